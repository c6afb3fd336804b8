"""Plumbing for notebook 05 (``05_quantize_and_benchmark.ipynb``): timing loops, results file, ratio table.

What the notebook *teaches* (the quantization calls, the session options, the thread settings) is written
out in the notebook. This module only holds what would otherwise be repeated boilerplate:

* ``time_by_batch``: one timing loop for any runtime (ONNX Runtime, PyTorch eager, Keras), with the input
  converted to the runtime's own tensor type *before* timing, so only the model call is measured;
* the results file ``artifacts/benchmarks.json``: ``validate_results`` (clear errors on a malformed file),
  ``write_results`` (atomic), ``load_results``;
* ``ratio_rows`` / ``ratio_table``: every variant against fp32 ONNX Runtime and against its framework;
* ``evaluate_targets``: the performance targets stored in the file, met or not on this machine;
* ``plot_latency``: bar charts.

Headless, without Jupyter (executes notebook 05, then prints the table from the file it wrote)::

    python -m helpers.benchmark               # run notebook 05, print the ratio table and targets
    python -m helpers.benchmark --scale 0.3   # shorter timing loops (ONNX_PDF_BENCH_SCALE)
    python -m helpers.benchmark --table-only  # only print the table of an existing benchmarks.json

torch and tensorflow are imported inside functions only (the helper package must stay light).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from helpers.assets import atomic_path
from helpers.paths import artifacts_dir
from helpers.timing import measure

SCHEMA = "onnx-pdf/benchmarks/v1"
RESULTS_FILE = "benchmarks.json"
NOTEBOOK = "05_quantize_and_benchmark.ipynb"
RUNTIMES = ("onnxruntime", "pytorch", "keras")
VARIANT_KEYS = {"name": str, "model": str, "runtime": str, "precision": str, "size_bytes": int,
                "accuracy": float, "latency_us": dict}


class BenchmarkFormatError(ValueError):
    """A results dictionary or file does not follow the ``benchmarks.json`` schema."""


# --------------------------------------------------------------------------------------------- timing
def time_by_batch(predict: Callable[[Any], Any], inputs: Mapping[int, Any], *, min_time_s: float = 0.5,
                  warmup: int = 5) -> dict[str, dict]:
    """Time ``predict(x)`` for each ``{batch_size: x}``; return ``{"1": {"p50": µs, "p90": µs, "n": calls}}``.

    ``x`` must already be in the runtime's own type (numpy for ONNX Runtime, ``torch.Tensor``, ``tf.Tensor``)
    so the loop measures the model call and nothing else. Loop lengths follow ``helpers.timing.measure``
    (scaled by ``ONNX_PDF_BENCH_SCALE``).
    """
    out = {}
    for batch_size, x in inputs.items():
        stats = measure(lambda: predict(x), warmup=warmup, min_time_s=min_time_s)
        out[str(int(batch_size))] = {"p50": stats["p50_us"], "p90": stats["p90_us"], "n": stats["n"]}
    return out


def onnxruntime_predict(session) -> Callable:
    """``x -> logits`` for an ``onnxruntime.InferenceSession`` with one input and one output."""
    input_name, output_name = session.get_inputs()[0].name, session.get_outputs()[0].name
    return lambda x: session.run([output_name], {input_name: x})[0]


def torch_predict(model) -> Callable:
    """``x -> logits`` for a PyTorch module in eval mode, without autograd bookkeeping."""
    import torch

    model.eval()

    def predict(x):
        with torch.inference_mode():
            return model(x)

    return predict


def keras_predict(model) -> Callable:
    """``x -> logits`` calling the Keras model directly (``model(x, training=False)``, not ``predict``)."""
    return lambda x: model(x, training=False)


# ------------------------------------------------------------------------------------------- the file
def _fail(where: str, message: str):
    raise BenchmarkFormatError(f"{where}: {message}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _validate_machine(machine: Any) -> None:
    # What a reader needs to interpret the timings: CPU model, instruction-set flags, threads, package versions.
    hint = "expected helpers.timing.machine_report(...) output"
    if not isinstance(machine, dict) or not isinstance(machine.get("cpu"), dict):
        _fail("machine", f"{hint} with a 'cpu' entry")
    cpu = machine["cpu"]
    if not (isinstance(cpu.get("model"), str) and cpu["model"]):
        _fail("machine.cpu.model", f"expected the CPU model name, got {cpu.get('model')!r}")
    if not (isinstance(cpu.get("flags"), list) and all(isinstance(f, str) for f in cpu["flags"])):
        _fail("machine.cpu.flags", f"expected a list of instruction-set flags, got {cpu.get('flags')!r:.80}")
    threads = machine.get("threads")
    if not (isinstance(threads, int) and not isinstance(threads, bool) and threads > 0):
        _fail("machine.threads", f"expected the thread count given to every runtime, got {threads!r}")
    packages = machine.get("packages")
    if not (isinstance(packages, dict) and isinstance(packages.get("onnxruntime"), str)):
        _fail("machine.packages", f"{hint}: package versions including onnxruntime, got {packages!r:.80}")


def validate_results(results: Any) -> dict:
    """Check the structure of a benchmarks dictionary; raise :class:`BenchmarkFormatError` saying where.

    Expected: ``{"schema": SCHEMA, "machine": {...}, "batch_sizes": [1, N], "variants": [...]}``; ``machine``
    with ``cpu.model``, ``cpu.flags``, ``threads`` and ``packages`` (onnxruntime at least); each variant
    with ``name, model, runtime, precision, size_bytes, accuracy, latency_us`` and ``latency_us`` holding
    ``p50`` <= ``p90`` (microseconds, positive) for every batch size. Optional: ``studies``, ``targets``.
    """
    if not isinstance(results, dict):
        _fail("benchmarks", f"expected a JSON object (dict), got {type(results).__name__}")
    if results.get("schema") != SCHEMA:
        _fail("schema", f"expected {SCHEMA!r}, got {results.get('schema')!r}")
    for key in ("machine", "batch_sizes", "variants"):
        if key not in results:
            _fail("benchmarks", f"missing key {key!r} (present: {sorted(results)})")
    _validate_machine(results["machine"])
    batches = results["batch_sizes"]
    if not (isinstance(batches, list) and batches and all(isinstance(b, int) and b > 0 for b in batches)):
        _fail("batch_sizes", f"expected a non-empty list of positive integers, got {batches!r}")
    variants = results["variants"]
    if not isinstance(variants, list) or not variants:
        _fail("variants", f"expected a non-empty list, got {variants!r:.80}")
    names = set()
    for i, v in enumerate(variants):
        where = f"variants[{i}]"
        if not isinstance(v, dict):
            _fail(where, f"expected an object, got {type(v).__name__}")
        where = f"variants[{i}] ({v.get('name', '?')})"
        for key, kind in VARIANT_KEYS.items():
            if key not in v:
                _fail(where, f"missing key {key!r}")
            value = v[key]
            ok = _is_number(value) if kind is float else isinstance(value, kind) and not isinstance(value, bool)
            if not ok:
                _fail(f"{where}.{key}", f"expected {kind.__name__}, got {value!r:.60}")
        if v["name"] in names:
            _fail(where, f"duplicate variant name {v['name']!r}")
        names.add(v["name"])
        if v["runtime"] not in RUNTIMES:
            _fail(f"{where}.runtime", f"expected one of {RUNTIMES}, got {v['runtime']!r}")
        if not 0.0 <= v["accuracy"] <= 1.0:
            _fail(f"{where}.accuracy", f"expected a fraction in [0, 1], got {v['accuracy']!r}")
        if v["size_bytes"] <= 0:
            _fail(f"{where}.size_bytes", f"expected a positive byte count, got {v['size_bytes']!r}")
        for b in batches:
            stats = v["latency_us"].get(str(b))
            if not isinstance(stats, dict):
                _fail(f"{where}.latency_us", f"missing batch size '{b}' (present: {sorted(v['latency_us'])})")
            for q in ("p50", "p90"):
                if not (_is_number(stats.get(q)) and stats[q] > 0):
                    _fail(f"{where}.latency_us['{b}'].{q}", f"expected a positive number of µs, got {stats.get(q)!r}")
            if stats["p90"] < stats["p50"]:
                _fail(f"{where}.latency_us['{b}']", f"p90 ({stats['p90']!r}) is below p50 ({stats['p50']!r})")
    for i, t in enumerate(results.get("targets", [])):
        for key in ("description", "variant", "reference", "batch_size", "max_ratio"):
            if key not in t:
                _fail(f"targets[{i}]", f"missing key {key!r}")
        for key in ("variant", "reference"):
            if t[key] not in names:
                _fail(f"targets[{i}].{key}", f"no variant named {t[key]!r}")
        if t["batch_size"] not in batches:
            _fail(f"targets[{i}].batch_size", f"{t['batch_size']!r} is not one of batch_sizes {batches}")
    return results


def write_results(results: dict, path: str | os.PathLike | None = None) -> Path:
    """Validate, then write ``results`` as JSON atomically (temporary file, then rename)."""
    path = Path(path) if path is not None else artifacts_dir() / RESULTS_FILE
    validate_results(results)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    return path


def load_results(path: str | os.PathLike | None = None) -> dict:
    """Read and validate a results file; errors name the file and what is wrong."""
    path = Path(path) if path is not None else artifacts_dir() / RESULTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark results at {path}; run notebook {NOTEBOOK} "
                                f"(or `python -m helpers.benchmark`) first")
    try:
        results = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise BenchmarkFormatError(f"{path} is not valid JSON ({err}); was the run interrupted?") from err
    try:
        return validate_results(results)
    except BenchmarkFormatError as err:
        raise BenchmarkFormatError(f"{path}: {err}") from None


# ------------------------------------------------------------------------------------------- ratios
def _find(variants: Sequence[dict], **match) -> dict | None:
    for v in variants:
        if all(v[k] == value for k, value in match.items()):
            return v
    return None


def ratio_rows(results: dict) -> list[dict]:
    """One row per variant: size, accuracy and latency, each also as a ratio.

    References: ``vs_ort_fp32`` = the same model's fp32 ONNX Runtime variant, ``vs_framework`` = the same
    model in the framework it came from (PyTorch eager or Keras). Ratios below 1 mean smaller / faster.
    """
    variants = results["variants"]
    rows = []
    for v in variants:
        base = _find(variants, model=v["model"], runtime="onnxruntime", precision="fp32")
        framework = next((w for w in variants if w["model"] == v["model"] and w["runtime"] != "onnxruntime"), None)
        row = {"name": v["name"], "model": v["model"], "runtime": v["runtime"], "precision": v["precision"],
               "size_bytes": v["size_bytes"], "accuracy": v["accuracy"],
               "size_vs_ort_fp32": v["size_bytes"] / base["size_bytes"] if base else None,
               "accuracy_drop_pp": 100 * (base["accuracy"] - v["accuracy"]) if base else None}
        for b in results["batch_sizes"]:
            p50 = v["latency_us"][str(b)]["p50"]
            row[f"p50_us_b{b}"] = p50
            row[f"p90_us_b{b}"] = v["latency_us"][str(b)]["p90"]
            row[f"vs_ort_fp32_b{b}"] = p50 / base["latency_us"][str(b)]["p50"] if base else None
            row[f"vs_framework_b{b}"] = p50 / framework["latency_us"][str(b)]["p50"] if framework else None
        rows.append(row)
    return rows


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def ratio_table(results: dict) -> str:
    """The ratio table as aligned plain text (the notebook prints it; so does ``python -m helpers.benchmark``)."""
    batches = results["batch_sizes"]
    header = ["model", "runtime · precision", "size KiB", "size ×", "acc %", "Δ pp"]
    for b in batches:
        header += [f"b{b} p50 µs", f"b{b} p90 µs", "×ort32", "×frmwk"]
    lines = [header]
    for r in ratio_rows(results):
        line = [r["model"], f"{r['runtime']} · {r['precision']}", f"{r['size_bytes'] / 1024:.0f}",
                _fmt(r["size_vs_ort_fp32"], ".2f"), f"{100 * r['accuracy']:.2f}", _fmt(r["accuracy_drop_pp"], "+.2f")]
        for b in batches:
            line += [f"{r[f'p50_us_b{b}']:.0f}", f"{r[f'p90_us_b{b}']:.0f}",
                     _fmt(r[f"vs_ort_fp32_b{b}"], ".2f"), _fmt(r[f"vs_framework_b{b}"], ".2f")]
        lines.append(line)
    widths = [max(len(str(row[i])) for row in lines) for i in range(len(header))]
    text = ["  ".join(str(c).rjust(w) if i > 1 else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
            for row in lines]
    text.insert(1, "-" * len(text[0]))
    note = ("size × and ×ort32: against the same model's fp32 ONNX Runtime file; ×frmwk: against the model in "
            "its own framework; Δ pp: accuracy drop in percentage points (negative = better). Below 1 = smaller/faster.")
    return "\n".join(text + ["", note])


def evaluate_targets(results: dict) -> list[dict]:
    """Each stored target with its measured ratio (p50 of ``variant`` / p50 of ``reference``) and whether it is met."""
    variants = {v["name"]: v for v in results["variants"]}
    out = []
    for t in results.get("targets", []):
        b = str(t["batch_size"])
        ratio = variants[t["variant"]]["latency_us"][b]["p50"] / variants[t["reference"]]["latency_us"][b]["p50"]
        out.append({**t, "ratio": ratio, "met": ratio <= t["max_ratio"]})
    return out


def targets_text(results: dict) -> str:
    lines = []
    for t in evaluate_targets(results):
        status = "MET    " if t["met"] else "NOT MET"
        lines.append(f"[{status}] {t['description']}: {t['ratio']:.2f}x (target <= {t['max_ratio']}x, "
                     f"batch {t['batch_size']})")
    return "\n".join(lines)


def machine_text(results: dict) -> str:
    m = results["machine"]
    cpu = m["cpu"]
    packages = ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items() if v)
    return (f"CPU: {cpu.get('model')} ({cpu.get('logical_cores')} logical cores), flags: "
            f"{' '.join(cpu.get('flags', []))}\nthreads per runtime: {m.get('threads')} | {packages}")


# ------------------------------------------------------------------------------------------- charts
def plot_latency(results: dict, batch_size: int):
    """Horizontal bars: p50 latency of every variant for one batch size, one panel per model."""
    import matplotlib.pyplot as plt

    rows = ratio_rows(results)
    models = list(dict.fromkeys(r["model"] for r in rows))
    colors = {"pytorch": "tab:red", "keras": "tab:orange", "onnxruntime": "tab:blue"}
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 2.8), squeeze=False)
    for ax, model in zip(axes.flat, models):
        mine = [r for r in rows if r["model"] == model]
        labels = [f"{r['runtime']} · {r['precision']}" for r in mine]
        values = [r[f"p50_us_b{batch_size}"] for r in mine]
        errors = [r[f"p90_us_b{batch_size}"] - r[f"p50_us_b{batch_size}"] for r in mine]
        ax.barh(labels, values, xerr=[[0] * len(errors), errors], color=[colors[r["runtime"]] for r in mine],
                error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.invert_yaxis()
        ax.set_xscale("log")  # runtimes differ by orders of magnitude
        ax.set_title(f"{model}, batch {batch_size}")
        ax.set_xlabel("latency µs, log scale (bar: median, whisker: p90)")
    plt.show()
    return fig


# ------------------------------------------------------------------------------------------- command
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.benchmark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table-only", action="store_true", help="do not run the notebook; print the existing file")
    parser.add_argument("--scale", type=float, help="ONNX_PDF_BENCH_SCALE for this run (default: 1.0 or the env)")
    parser.add_argument("--results", type=Path, help=f"results file (default: artifacts/{RESULTS_FILE})")
    args = parser.parse_args(argv)
    if args.scale is not None:
        if not args.scale > 0:
            parser.error(f"--scale must be positive, got {args.scale}")
        os.environ["ONNX_PDF_BENCH_SCALE"] = str(args.scale)  # the notebook's kernel inherits it
    if not args.table_only:
        from helpers.notebooks import run_notebook

        run_notebook(NOTEBOOK)
    results = load_results(args.results)
    print(machine_text(results), end="\n\n")
    print(ratio_table(results), end="\n\n")
    print(targets_text(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
