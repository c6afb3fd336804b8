"""Every file against every reader: notebook 04's readers table (and notebook 10's rows for its encoder).

A reader here is an engine that opens an `.onnx` file and runs it: ONNX Runtime (the reference of each row),
ONNX's reference evaluator, OpenVINO (its default precision, then f32) and tract. Each non-reference reader
runs in a process of its own (``python -m helpers.measure.readers READER MODEL FEEDS OUT``): tract 0.23.9
aborts the whole process on some `com.microsoft` operators (a Rust panic "in a function that cannot unwind"),
which no ``except`` catches, so a reader's death is reported as a result of that file, never as the kernel's.

The outcome of one (file, reader) pair is one of:

* ``agrees``: it ran, and its first output is within ``tolerance`` of ONNX Runtime's;
* ``differs``: it ran, with a larger difference (the largest difference and the top-1 agreement say how much);
* ``refuses``: it raised an error (the first line of its message is kept);
* ``dies``: its process ended without an answer (a signal, an abort; the last line it printed is kept).

The lessons write each reader's calls out (notebook 04's section 3); this module is the plumbing that runs
them for a whole table. Nothing here is asserted about a machine: the table reports what happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

#: The readers run in a child process, in the table's column order (ONNX Runtime, the reference, comes first).
READERS = ("reference evaluator", "OpenVINO (default)", "OpenVINO (f32)", "tract")
STATUSES = ("agrees", "differs", "refuses", "dies")


def show_agreement(
    readers: Mapping[str, np.ndarray], reference: np.ndarray, labels: np.ndarray
) -> None:
    """Print, per reader, its accuracy, its share of same digits as ``reference`` and the largest difference."""
    for reader, logits in readers.items():
        if logits.shape != reference.shape:
            raise ValueError(f"{reader} gave shape {logits.shape}, expected {reference.shape}")
        print(
            f"{reader:20} accuracy {(logits.argmax(1) == labels).mean():.2%}, same digit as ONNX "
            f"Runtime on {(logits.argmax(1) == reference.argmax(1)).mean():.2%}, "
            f"max |logit diff| {np.abs(logits - reference).max():.1e}"
        )


def run_reader(reader: str, model: str, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    """The first output of ``model`` run by ``reader`` on ``feeds`` (in the graph's input order)."""
    if reader == "reference evaluator":
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, dict(feeds))[0]
    if reader.startswith("OpenVINO"):
        import openvino as ov

        core = ov.Core()
        config = {"INFERENCE_PRECISION_HINT": "f32"} if reader == "OpenVINO (f32)" else {}
        compiled = core.compile_model(core.read_model(model), "CPU", config)
        return compiled(dict(feeds))[compiled.outputs[0]]
    if reader == "tract":
        import tract

        runnable = tract.onnx().load(model).into_model().into_runnable()
        return runnable.run(list(feeds.values()))[0].to_numpy()
    raise ValueError(f"unknown reader {reader!r}: expected one of {READERS}")


def first_line(message: str, limit: int = 160) -> str:
    """The first line of ``message`` that says something (OpenVINO opens with "Exception from <file>:<line>:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    telling = [line for line in lines if not line.startswith("Exception from ")]
    line = (telling or lines or ["(no message)"])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _child(reader: str, model: str, feeds_path: str, out_path: str) -> int:
    """The child process: run, then write the output (``.npy``) or the error's first line (``.json``)."""
    with np.load(feeds_path) as archive:  # np.savez keeps the feeds' order: the graph's input order
        feeds = {name: archive[name] for name in archive.files}
    try:
        output = np.asarray(run_reader(reader, model, feeds))
    except Exception as err:  # the reader refused the file: that is the result we report
        Path(out_path).with_suffix(".json").write_text(
            json.dumps({"error": f"{type(err).__name__}: {first_line(str(err))}"})
        )
        return 0
    np.save(out_path, output)
    return 0


@dataclass(frozen=True)
class Outcome:
    """What one reader did with one file, compared with ONNX Runtime on the same feeds."""

    file: str
    reader: str
    status: str  # one of STATUSES
    max_diff: float | None = None  # largest |difference| from ONNX Runtime's first output
    top1: float | None = None  # share of rows whose argmax agrees with ONNX Runtime's (classifiers)
    message: str = ""  # the first line of a refusal, the last line of a death

    def cell(self) -> str:
        """The table cell: the difference when it ran, else the status."""
        if self.status in ("agrees", "differs"):
            text = f"{self.max_diff:.0e}"
            return text if self.top1 is None else f"{text}, top-1 {self.top1:.0%}"
        return self.status


def try_reader(
    reader: str,
    file: str,
    model: Path,
    feeds: Mapping[str, np.ndarray],
    reference: np.ndarray,
    tolerance: float,
    classifier: bool,
    timeout: float = 600,
) -> Outcome:
    """Run ``reader`` on ``model`` in a process of its own and compare its output with ``reference``."""
    with tempfile.TemporaryDirectory(prefix="onnx_readers_") as work:
        feeds_path, out_path = Path(work) / "feeds.npz", Path(work) / "out.npy"
        np.savez(feeds_path, **feeds)
        child = subprocess.run(
            [sys.executable, "-m", __name__, reader, str(model), str(feeds_path), str(out_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out_path.with_suffix(".json").is_file():
            error = json.loads(out_path.with_suffix(".json").read_text())["error"]
            return Outcome(file, reader, "refuses", message=error)
        if child.returncode != 0 or not out_path.is_file():
            last = (child.stderr.strip().splitlines() or ["(nothing printed)"])[-1][:160]
            return Outcome(file, reader, "dies", message=f"exit code {child.returncode}: {last}")
        output = np.load(out_path).astype(np.float32)
    if output.shape != reference.shape:
        message = f"output shape {output.shape}, ONNX Runtime's {reference.shape}"
        return Outcome(file, reader, "differs", message=message)
    max_diff = float(np.abs(output - reference.astype(np.float32)).max())
    top1 = float((output.argmax(-1) == reference.argmax(-1)).mean()) if classifier else None
    status = "agrees" if max_diff <= tolerance else "differs"
    return Outcome(file, reader, status, max_diff, top1)


def readers_table(
    files: Mapping[str, Path],
    feeds_for: Callable[[Path], Mapping[str, np.ndarray]],
    reference_for: Callable[[Path, Mapping[str, np.ndarray]], np.ndarray],
    readers: tuple[str, ...] = READERS,
    tolerance: float = 1e-4,
    classifier: bool = True,
    workers: int = 2,
) -> list[Outcome]:
    """Every (file, reader) pair, ``workers`` child processes at a time, with a progress bar over the files.

    ``feeds_for(path)`` gives the file's feeds in its input order and types; ``reference_for(path, feeds)``
    ONNX Runtime's first output on them (run by the caller, in its own process: the reference reader).
    """
    from tqdm.auto import tqdm  # extra code: progress bar only

    outcomes = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for label, path in tqdm(files.items(), desc="files x readers", unit="file"):
            feeds = feeds_for(path)
            reference = reference_for(path, feeds)
            row = list(
                pool.map(
                    lambda reader: try_reader(
                        reader, label, path, feeds, reference, tolerance, classifier
                    ),
                    readers,
                )
            )
            outcomes += row
    return outcomes


def format_table(outcomes: list[Outcome]) -> str:
    """The outcomes as a text table (files down, readers across), then each refusal's and death's message."""
    files = list(dict.fromkeys(o.file for o in outcomes))
    readers = list(dict.fromkeys(o.reader for o in outcomes))
    cells = {(o.file, o.reader): o.cell() for o in outcomes}
    width = max(len(f) for f in files)
    widths = [max(len(r), *(len(cells[f, r]) for f in files)) for r in readers]
    lines = [f"{'file':<{width}}  " + "  ".join(f"{r:<{w}}" for r, w in zip(readers, widths))]
    for f in files:
        lines.append(
            f"{f:<{width}}  " + "  ".join(f"{cells[f, r]:<{w}}" for r, w in zip(readers, widths))
        )
    notes = [f"- {o.file}, {o.reader} {o.status}: {o.message}" for o in outcomes if o.message]
    return "\n".join(lines + ([""] + notes if notes else []))


def draw_readers_grid(outcomes: list[Outcome], title: str):
    """The outcomes as a coloured grid (files down, readers across), each cell labelled; returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    files = list(dict.fromkeys(o.file for o in outcomes))
    readers = list(dict.fromkeys(o.reader for o in outcomes))
    by_pair = {(o.file, o.reader): o for o in outcomes}
    codes = np.array([[STATUSES.index(by_pair[f, r].status) for r in readers] for f in files])
    colours = ListedColormap(["#4c9a5b", "#e3b341", "#9aa0a6", "#c0392b"])
    fig, ax = plt.subplots(figsize=(2.2 * len(readers) + 3, 0.42 * len(files) + 1.4))
    ax.imshow(codes, cmap=colours, vmin=-0.5, vmax=len(STATUSES) - 0.5, aspect="auto")
    for (i, f), (j, r) in ((fi, rj) for fi in enumerate(files) for rj in enumerate(readers)):
        ax.text(j, i, by_pair[f, r].cell(), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(readers)), readers)
    ax.set_yticks(range(len(files)), files)
    ax.xaxis.tick_top()
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours(k)) for k in range(len(STATUSES))]
    ax.legend(handles, STATUSES, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title(title, pad=24)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit("usage: python -m helpers.measure.readers READER MODEL FEEDS.npz OUT.npy")
    raise SystemExit(_child(*sys.argv[1:]))
