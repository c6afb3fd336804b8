"""The artifact pipeline: which notebook makes which file is declared once, in ``notebooks/series.json``.

``python -m helpers.pipeline.artifacts build [FILE...]`` (``make artifacts``) runs the notebooks making the files
that do not load yet, under a lock (``artifacts/.build.lock``), so parallel runs never race. A notebook's Setup calls
``ensure_artifact`` (run alone, it rebuilds what it needs, visibly); checkers, solutions and tests call
``existing_artifact``, which never trains: it names the notebook to run instead. ``make test`` runs the notebooks
making files first, under the same lock (conftest.py), so each runs once and the tests find their files.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import sys
import time
from pathlib import Path

from helpers.data.paths import NOTEBOOKS, artifacts_dir

META = "series.json"  # per notebook: run_time_s, markers (what it needs), reads and makes (artifact files)
LOCK_HELD = "ONNX_PDF_BUILD_LOCK_HELD"  # set while a build holds the lock; the notebooks' kernels inherit it


def series_meta(notebooks_dir: Path | None = None) -> dict[str, dict]:
    """``notebooks/series.json``: notebook file name -> its entry (empty when the file is absent)."""
    path = Path(notebooks_dir or NOTEBOOKS) / META
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def producers() -> dict[str, str]:
    """Artifact file name -> the notebook that makes it."""
    return {name: nb for nb, entry in series_meta().items() for name in entry.get("makes", [])}


def execute_notebook(path: Path, kernel_name: str = "python3", timeout: int = 3600):
    """``(executed notebook, wall seconds)`` of a run in a fresh kernel of this environment, cwd = its folder."""
    import nbclient
    import nbformat
    from traitlets.config import Config

    path = Path(path)
    nb = nbformat.read(path, as_version=4)  # a missing notebook: FileNotFoundError naming it
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
        # the kernel's sockets encrypted with keys the manager provisions (the kernelspec declares "curve"), as
        # classroom/execution_config.py does for nbgrader: else ipykernel warns "Kernel is running over TCP
        # without encryption" on every build, in a teacher's or learner's terminal too
        config=Config({"KernelManager": {"transport_encryption": "auto"}}),
    )
    t0 = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - t0


def run_notebook(name: str, timeout: int = 3600) -> None:
    """Execute ``notebooks/<name>`` headlessly (to rebuild what it writes), reporting its run time."""
    import nbclient.exceptions

    print(f"running {name} to rebuild what it writes ...", flush=True)
    try:
        _, seconds = execute_notebook(NOTEBOOKS / name, timeout=timeout)
    # its message holds the failing cell and traceback
    except nbclient.exceptions.CellExecutionError as err:
        raise RuntimeError(
            f"{name} failed while rebuilding what it writes (open it and run it to fix it):\n{err}"
        ) from err
    print(f"... {name} finished in {seconds:.0f} s", flush=True)


# what the zip file Keras 3 writes for model.save(....keras) holds
KERAS_ARCHIVE = ("metadata.json", "config.json", "model.weights.h5")


def keras_archive_problem(path: Path) -> str | None:
    """``None`` when ``path`` is a whole Keras archive (``model.save(....keras)``), else what is wrong with it.

    Checked without TensorFlow (notebook 06's kernel never imports it): the zip's members and their checksums.
    Its reader, ``helpers.keras_timing``, loads it with ``keras.saving.load_model``."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            missing = [name for name in KERAS_ARCHIVE if name not in archive.namelist()]
            damaged = archive.testzip()  # the first member whose checksum is wrong
    except (zipfile.BadZipFile, OSError) as err:
        return f"it is not a Keras archive ({err})"
    if missing:
        return f"the Keras archive has no {', '.join(missing)}"
    return f"the Keras archive's {damaged} is damaged" if damaged else None


def loads(path: Path) -> str | None:
    """``None`` when the model at ``path`` opens (ONNX Runtime; a ``.keras`` file: a whole Keras archive), else why
    not (missing, truncated, not ONNX)."""
    import onnxruntime as ort

    if not path.is_file():
        return "it is missing"
    if path.suffix == ".keras":
        return keras_archive_problem(path)
    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for a file it cannot load
        return (
            f"ONNX Runtime cannot load it ({type(err).__name__}: {str(err).splitlines()[0][:200]})"
        )
    return None


def _producer(filename: str) -> str:
    made = producers()
    if filename not in made:
        raise LookupError(
            f"no notebook is registered to produce {filename} in notebooks/{META} "
            f"(known: {sorted(made)})"
        )
    return made[filename]


def build_lock():
    """The lock a process holds while it runs the notebooks that make the artifacts (``filelock.FileLock``)."""
    from filelock import FileLock

    return FileLock(artifacts_dir() / ".build.lock")


def existing_artifact(filename: str) -> Path:
    """Path of ``artifacts/<filename>`` when it loads; never runs a notebook: else an error naming the one to run."""
    path, producer = artifacts_dir() / filename, _producer(filename)
    problem = loads(path)
    if problem is not None:
        raise FileNotFoundError(
            f"{path}: {problem}. Run notebooks/{producer} (or `make artifacts`) first."
        )
    return path


def _with_inputs(filenames: list[str]) -> list[str]:
    """``filenames`` preceded by what their notebooks read (recursively), each once, in build order."""
    made, meta, order = producers(), series_meta(), []
    for name in filenames:
        reads = [
            f
            for pattern in meta[_producer(name)].get("reads", [])
            for f in made
            if fnmatch.fnmatch(f, pattern)
        ]
        order += [f for f in _with_inputs(reads) + [name] if f not in order]
    return order


def build(*filenames: str) -> list[str]:
    """Run, under ``artifacts/.build.lock``, the notebooks making ``filenames`` (default: all) that do not load;
    return the notebooks run. A file another process built while this one waited for the lock is not rebuilt."""
    # held: an ancestor (the build running this notebook) has the lock
    ran, held = (
        [],
        os.environ.get(LOCK_HELD),
    )
    with contextlib.nullcontext() if held else build_lock():
        os.environ[LOCK_HELD] = "1"
        try:
            for name in _with_inputs(list(filenames) or list(producers())):
                path, producer = artifacts_dir() / name, _producer(name)
                problem = loads(path)
                if problem is not None and producer not in ran:
                    print(f"{path.name}: {problem}.", file=sys.stderr)
                    run_notebook(producer)
                    ran.append(producer)
                    problem = loads(path)
                if problem is not None:
                    raise FileNotFoundError(f"{producer} ran but {path}: {problem}")
        finally:
            if not held:
                del os.environ[LOCK_HELD]
    return ran


def ensure_artifact(filename: str) -> Path:
    """Path of ``artifacts/<filename>``, a model that loads (a Setup's call: else its notebook runs first)."""
    with contextlib.suppress(FileNotFoundError):
        return existing_artifact(filename)
    build(filename)
    return artifacts_dir() / filename


SERIES_GLOB = "[0-9][0-9]_*.ipynb"


def notebook_paths(notebooks_dir: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks of the series, in order (``NN_verb_object.ipynb``)."""
    return sorted(Path(notebooks_dir).glob(SERIES_GLOB))


if __name__ == "__main__":  # no FILE: every artifact series.json declares
    if sys.argv[1:2] != ["build"]:
        raise SystemExit("usage: python -m helpers.pipeline.artifacts build [FILE...]")
    print(
        f"notebooks run: {build(*sys.argv[2:]) or 'none'}; every artifact asked for loads ({artifacts_dir()})"
    )
