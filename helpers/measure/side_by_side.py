"""Notebook 06's interleaved timing, its results file ``artifacts/benchmarks.json`` and its ratio table."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from helpers.data.atomic import atomic_path
from helpers.data.paths import artifacts_dir
from helpers.measure.timing import bench_scale, time_calls

SCHEMA = "onnx-pdf/benchmarks/v1"
RESULTS_FILE = "benchmarks.json"
NOTEBOOK = "06_benchmark_runtimes.ipynb"


def _object(optional: dict | None = None, **required) -> dict:
    """A JSON-schema object of the ``required`` properties (keyword arguments), and the ``optional`` ones."""
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
    }


_POSITIVE = {"type": "number", "exclusiveMinimum": 0}
_STRING = {"type": "string"}
_LATENCY = _object(p50=_POSITIVE, p90=_POSITIVE, optional={"n": {"type": "integer", "minimum": 1}})
RESULTS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    **_object(
        schema={"const": SCHEMA},
        machine=_object(
            cpu=_object(
                model={"type": "string", "minLength": 1}, flags={"type": "array", "items": _STRING}
            ),
            threads={"type": "integer", "minimum": 1},
            packages=_object(onnxruntime=_STRING),
        ),
        batch_sizes={"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
        variants={
            "type": "array",
            "minItems": 1,
            "items": _object(
                name=_STRING,
                model=_STRING,
                runtime={"enum": ["onnxruntime", "pytorch", "keras"]},
                precision=_STRING,
                size_bytes={"type": "integer", "minimum": 1},
                accuracy={"type": "number", "minimum": 0, "maximum": 1},
                latency_us={"type": "object", "additionalProperties": _LATENCY},
            ),
        },
        optional={
            "targets": {
                "type": "array",
                "items": _object(
                    description=_STRING,
                    variant=_STRING,
                    reference=_STRING,
                    batch_size={"type": "integer"},
                    max_ratio=_POSITIVE,
                ),
            }
        },
    ),
}


class BenchmarkFormatError(ValueError):
    """A results dictionary or file does not follow ``RESULTS_SCHEMA``."""


def time_side_by_side(
    candidates: Mapping[str, tuple[Callable[[Any], Any], Mapping[int, Any]]],
    *,
    min_time_s: float = 0.5,
    rounds: int = 5,
    warmup: int = 5,
    pause_s: float = 0.005,
    seed: int = 0,
) -> dict[str, dict[str, dict]]:
    """Time ``{name: (predict, {batch_size: x})}`` in seeded shuffled rounds; ``{name: {"1": stats, ...}}``."""
    import random
    import time

    import numpy as np

    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    slice_s = min_time_s * bench_scale() / rounds
    runs = {
        (name, b): (predict, x)
        for name, (predict, inputs) in candidates.items()
        for b, x in inputs.items()
    }
    samples: dict[tuple, list[list[float]]] = {pair: [] for pair in runs}
    for predict, x in runs.values():
        for _ in range(warmup):
            predict(x)
    pairs, order = list(runs), random.Random(seed)
    for _ in range(rounds):
        order.shuffle(pairs)
        for pair in pairs:
            predict, x = runs[pair]
            time.sleep(pause_s)
            samples[pair].append(time_calls(lambda: predict(x), calls=2, seconds=slice_s))
    out: dict[str, dict[str, dict]] = {name: {} for name in candidates}
    for (name, b), per_round in samples.items():
        every = np.concatenate(per_round)
        out[name][str(int(b))] = {
            "p50": float(np.median(every)),
            "p90": float(np.percentile(every, 90)),
            "n": int(every.size),
            "round_p50": [float(np.median(r)) for r in per_round],
        }
    return out


def onnxruntime_predict(session) -> Callable:
    """``x -> logits`` for an ``onnxruntime.InferenceSession`` with one input and one output."""
    input_name, output_name = session.get_inputs()[0].name, session.get_outputs()[0].name
    return lambda x: session.run([output_name], {input_name: x})[0]


def validate_results(results: Any) -> dict:
    """Check ``results`` against ``RESULTS_SCHEMA`` and its cross-references; raise BenchmarkFormatError saying where."""
    import jsonschema

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(RESULTS_SCHEMA).iter_errors(results)
    )
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "benchmarks"
        raise BenchmarkFormatError(f"{where}: {error.message}")
    names = [v["name"] for v in results["variants"]]
    problems = [
        f"duplicate variant name {n!r}" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    for i, v in enumerate(results["variants"]):
        missing = [b for b in results["batch_sizes"] if str(b) not in v["latency_us"]]
        problems += (
            [f"variants/{i}/latency_us: no timing for batch size {missing}"] if missing else []
        )
    for i, t in enumerate(results.get("targets", [])):
        problems += [
            f"targets/{i}/{k}: no variant named {t[k]!r}"
            for k in ("variant", "reference")
            if t[k] not in names
        ]
        if t["batch_size"] not in results["batch_sizes"]:
            problems.append(
                f"targets/{i}/batch_size: {t['batch_size']} is not one of {results['batch_sizes']}"
            )
    if problems:
        raise BenchmarkFormatError("; ".join(problems))
    return results


def new_results(
    variants: list[dict],
    targets: list[dict],
    batch_sizes: Sequence[int],
    threads: int,
    settings: Mapping[str, Any],
    packages: Mapping[str, str] | None = None,
) -> dict:
    """The results document; ``packages``: versions measured in another process (Keras'), added."""
    import time

    from helpers.measure.machine import machine_report

    machine = machine_report(["numpy", "onnx", "onnxruntime", "torch"], threads=threads)
    machine["packages"].update(packages or {})
    return {
        "schema": SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "settings": dict(settings),
        "batch_sizes": list(batch_sizes),
        "variants": variants,
        "targets": targets,
    }


def write_results(results: dict, path: str | os.PathLike | None = None) -> Path:
    """Validate, then write ``results`` as JSON atomically (temporary file, then rename)."""
    path = Path(path) if path is not None else artifacts_dir() / RESULTS_FILE
    validate_results(results)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(results, indent=1) + "\n")
    return path


def load_results(path: str | os.PathLike | None = None) -> dict:
    """Read and validate a results file; errors name the file and what is wrong."""
    path = Path(path) if path is not None else artifacts_dir() / RESULTS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"no benchmark results at {path}; run notebook {NOTEBOOK} "
            "(or `python -m helpers.benchmark`) first"
        )
    try:
        return validate_results(json.loads(path.read_text()))
    except json.JSONDecodeError as err:
        raise BenchmarkFormatError(
            f"{path} is not valid JSON ({err}); was the run interrupted?"
        ) from err
    except BenchmarkFormatError as err:
        raise BenchmarkFormatError(f"{path}: {err}") from None


def ratio_rows(results: dict) -> list[dict]:
    """One row per variant: size, accuracy and p50/p90 latency, each also as a ratio (below 1:
    smaller or faster). ``vs_ort_fp32``: against the same model's fp32 ONNX Runtime variant;
    ``vs_framework``: against the same model in its own framework (PyTorch eager or Keras);
    ``None`` when there is no such variant.
    """
    variants = results["variants"]
    rows = []
    for v in variants:
        same = [w for w in variants if w["model"] == v["model"]]
        base = next(
            (w for w in same if (w["runtime"], w["precision"]) == ("onnxruntime", "fp32")), None
        )
        framework = next((w for w in same if w["runtime"] != "onnxruntime"), None)
        row = {k: v[k] for k in ("name", "model", "runtime", "precision", "size_bytes", "accuracy")}
        row["size_vs_ort_fp32"] = v["size_bytes"] / base["size_bytes"] if base else None
        row["accuracy_drop_pp"] = 100 * (base["accuracy"] - v["accuracy"]) if base else None
        for b in map(str, results["batch_sizes"]):
            p50 = v["latency_us"][b]["p50"]
            row[f"p50_us_b{b}"], row[f"p90_us_b{b}"] = p50, v["latency_us"][b]["p90"]
            row[f"vs_ort_fp32_b{b}"] = p50 / base["latency_us"][b]["p50"] if base else None
            row[f"vs_framework_b{b}"] = (
                p50 / framework["latency_us"][b]["p50"] if framework else None
            )
        rows.append(row)
    return rows


def _ratio(value: float | None, spec: str) -> str:
    """``value`` formatted with ``spec``, or a dash where there is nothing to compare with."""
    return "—" if value is None else format(value, spec)


def ratio_table(results: dict) -> str:
    """The ratio table as aligned plain text (notebook 06 and ``python -m helpers.benchmark`` print it)."""
    header = ["model", "runtime · precision", "size KiB", "size ×", "acc %", "Δ pp"]
    for b in results["batch_sizes"]:
        header += [f"b{b} p50 µs", f"b{b} p90 µs", "×ort32", "×frmwk"]
    lines = [header]
    for r in ratio_rows(results):
        line = [
            r["model"],
            f"{r['runtime']} · {r['precision']}",
            f"{r['size_bytes'] / 1024:.0f}",
            _ratio(r["size_vs_ort_fp32"], ".2f"),
            f"{100 * r['accuracy']:.2f}",
            _ratio(r["accuracy_drop_pp"], "+.2f"),
        ]
        for b in results["batch_sizes"]:
            line += [
                f"{r[f'p50_us_b{b}']:.0f}",
                f"{r[f'p90_us_b{b}']:.0f}",
                _ratio(r[f"vs_ort_fp32_b{b}"], ".2f"),
                _ratio(r[f"vs_framework_b{b}"], ".2f"),
            ]
        lines.append(line)
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    text = [
        "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in lines
    ]
    text.insert(1, "-" * len(text[0]))
    note = (
        "size × and ×ort32: against the same model's fp32 ONNX Runtime file; "
        "×frmwk: against the model in its own framework; "
        "Δ pp: accuracy drop in percentage points (negative = better). "
        "Below 1 = smaller/faster."
    )
    return "\n".join(text + ["", note])


def evaluate_targets(results: dict) -> list[dict]:
    """Each target with its ratio (p50 of ``variant`` / p50 of ``reference``), met or not."""
    p50 = {
        v["name"]: {b: s["p50"] for b, s in v["latency_us"].items()} for v in results["variants"]
    }
    out = []
    for t in results.get("targets", []):
        b = str(t["batch_size"])
        ratio = p50[t["variant"]][b] / p50[t["reference"]][b]
        out.append({**t, "ratio": ratio, "met": ratio <= t["max_ratio"]})
    return out


def targets_text(results: dict) -> str:
    """One line per target: met or not met, the measured ratio and the target's."""
    return "\n".join(
        f"[{'MET    ' if t['met'] else 'NOT MET'}] {t['description']}: "
        f"{t['ratio']:.2f}x "
        f"(target <= {t['max_ratio']}x, batch {t['batch_size']})"
        for t in evaluate_targets(results)
    )
