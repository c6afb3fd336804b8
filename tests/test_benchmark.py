"""helpers.measure.side_by_side: the results schema, atomic writing, the ratio table and targets, interleaved
timing; helpers.benchmark, the command that prints the table."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import pytest

from helpers import benchmark
from helpers.measure import side_by_side
from helpers.measure.side_by_side import (
    BenchmarkFormatError,
    evaluate_targets,
    ratio_rows,
    ratio_table,
    targets_text,
)


def variant(name, model, runtime, precision, size, accuracy, b1, b256):
    return {
        "name": name,
        "model": model,
        "runtime": runtime,
        "precision": precision,
        "size_bytes": size,
        "accuracy": accuracy,
        "latency_us": {
            "1": {"p50": b1, "p90": b1 * 1.5, "n": 100},
            "256": {"p50": b256, "p90": b256 * 1.2, "n": 20},
        },
    }


@pytest.fixture
def results():
    return {
        "schema": side_by_side.SCHEMA,
        "machine": {
            "cpu": {"model": "Test CPU", "logical_cores": 2, "flags": ["avx2"]},
            "threads": 2,
            "packages": {"onnxruntime": "1.32.0"},
        },
        "batch_sizes": [1, 256],
        "variants": [
            variant("mlp/pytorch/fp32", "mlp", "pytorch", "fp32", 1000, 0.98, 100.0, 2000.0),
            variant("mlp/onnxruntime/fp32", "mlp", "onnxruntime", "fp32", 1000, 0.98, 40.0, 1000.0),
            variant(
                "mlp/onnxruntime/int8-dynamic",
                "mlp",
                "onnxruntime",
                "int8-dynamic",
                250,
                0.979,
                20.0,
                500.0,
            ),
            variant("cnn/onnxruntime/fp32", "cnn", "onnxruntime", "fp32", 400, 0.99, 50.0, 4000.0),
        ],
        "targets": [
            {
                "description": "ort under 0.4x torch",
                "variant": "mlp/onnxruntime/fp32",
                "reference": "mlp/pytorch/fp32",
                "batch_size": 1,
                "max_ratio": 0.4,
            },
            {
                "description": "int8 below fp32",
                "variant": "mlp/onnxruntime/int8-dynamic",
                "reference": "mlp/onnxruntime/fp32",
                "batch_size": 256,
                "max_ratio": 0.4,
            },
        ],
    }


def test_valid_results_pass_and_are_returned(results):
    # time_side_by_side's extra field
    results["variants"][0]["latency_us"]["1"]["round_p50"] = [
        1.0,
        2.0,
    ]
    assert side_by_side.validate_results(results) is results


def test_ratio_rows_against_ort_fp32_and_framework(results):
    rows = {r["name"]: r for r in ratio_rows(results)}
    q = rows["mlp/onnxruntime/int8-dynamic"]
    assert q["size_vs_ort_fp32"] == pytest.approx(0.25)
    assert q["accuracy_drop_pp"] == pytest.approx(0.1)
    assert q["vs_ort_fp32_b1"] == pytest.approx(0.5) and q["vs_ort_fp32_b256"] == pytest.approx(0.5)
    assert q["vs_framework_b1"] == pytest.approx(0.2) and q["vs_framework_b256"] == pytest.approx(
        0.25
    )
    assert rows["mlp/pytorch/fp32"]["vs_ort_fp32_b1"] == pytest.approx(2.5)
    # no framework variant for that model
    assert rows["cnn/onnxruntime/fp32"]["vs_framework_b1"] is None


def test_ratio_table_text(results):
    table = ratio_table(results)
    lines = table.splitlines()
    assert "size ×" in lines[0] and "b256 p50 µs" in lines[0] and set(lines[1]) == {"-"}
    int8 = next(line for line in lines if "int8-dynamic" in line)
    assert "0.25" in int8 and "+0.10" in int8 and "0.20" in int8
    cnn = next(line for line in lines if line.startswith("cnn"))
    assert "—" in cnn  # missing reference shown as a dash, not a crash
    # aligned columns
    assert len({len(line) for line in lines[2 : 2 + len(results["variants"])]}) == 1


def test_targets_evaluated(results):
    status = evaluate_targets(results)
    assert [t["ratio"] for t in status] == [pytest.approx(0.4), pytest.approx(0.5)]
    assert [t["met"] for t in status] == [True, False]  # at most max_ratio is met
    results["variants"][1]["latency_us"]["1"]["p50"] = 41.0
    assert evaluate_targets(results)[0]["met"] is False
    text = targets_text(results).splitlines()
    assert text[0].startswith("[NOT MET] ort under 0.4x torch: 0.41x") and "NOT MET" in text[1]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.update(schema="other/v0"), r"^schema: 'onnx-pdf/benchmarks/v1' was expected"),
        (lambda r: r.pop("variants"), r"^benchmarks: 'variants' is a required property"),
        (
            lambda r: r.update(batch_sizes=[1, "256"]),
            r"^batch_sizes/1: '256' is not of type 'integer'",
        ),
        (
            lambda r: r["variants"][2].pop("accuracy"),
            r"^variants/2: 'accuracy' is a required property",
        ),
        (
            lambda r: r["variants"][0].update(accuracy=98.0),
            r"^variants/0/accuracy: 98.0 is greater than the maximum of 1",
        ),
        (
            lambda r: r["variants"][0].update(size_bytes="1 KB"),
            r"^variants/0/size_bytes: '1 KB' is not of type 'integer'",
        ),
        (
            lambda r: r["variants"][1].update(runtime="tflite"),
            r"^variants/1/runtime: 'tflite' is not one of",
        ),
        (
            lambda r: r["variants"][1]["latency_us"].pop("256"),
            r"variants/1/latency_us: no timing for batch size \[256\]",
        ),
        (
            lambda r: r["variants"][1]["latency_us"]["1"].update(p50=-3.0),
            r"^variants/1/latency_us/1/p50: -3.0 is less than or equal to the minimum of 0",
        ),
        (
            lambda r: r["variants"][1]["latency_us"]["1"].update(p90="fast"),
            r"^variants/1/latency_us/1/p90: 'fast' is not",
        ),
        (
            lambda r: r["variants"].append(copy.deepcopy(r["variants"][0])),
            r"duplicate variant name 'mlp/pytorch/fp32'",
        ),
        (
            lambda r: r["targets"][0].update(reference="nope"),
            r"targets/0/reference: no variant named 'nope'",
        ),
        (
            lambda r: r["targets"][1].update(batch_size=64),
            r"targets/1/batch_size: 64 is not one of \[1, 256\]",
        ),
        (
            lambda r: r["targets"][0].update(max_ratio="0.4"),
            r"^targets/0/max_ratio: '0.4' is not of type 'number'",
        ),
        (
            lambda r: r.update(targets=["ort under 0.4x torch"]),
            r"^targets/0: 'ort under 0.4x torch' is not of type 'object'",
        ),
        (
            lambda r: r.update(targets={"mlp": 0.4}),
            r"^targets: \{'mlp': 0.4\} is not of type 'array'",
        ),
        (lambda r: r["machine"].pop("cpu"), r"^machine: 'cpu' is a required property"),
        (
            lambda r: r["machine"]["cpu"].pop("model"),
            r"^machine/cpu: 'model' is a required property",
        ),
        (
            lambda r: r["machine"]["cpu"].update(flags="avx2"),
            r"^machine/cpu/flags: 'avx2' is not of type 'array'",
        ),
        (lambda r: r["machine"].pop("threads"), r"^machine: 'threads' is a required property"),
        (
            lambda r: r["machine"]["packages"].pop("onnxruntime"),
            r"^machine/packages: 'onnxruntime' is a required property",
        ),
    ],
)
def test_malformed_results_name_the_problem(results, mutate, message):
    mutate(results)
    with pytest.raises(BenchmarkFormatError, match=message):
        side_by_side.validate_results(results)


def test_not_a_dict_is_refused():
    with pytest.raises(BenchmarkFormatError, match=r"^benchmarks: \[\] is not of type 'object'"):
        side_by_side.validate_results([])


def test_the_schema_is_a_valid_json_schema():
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(side_by_side.RESULTS_SCHEMA)


def test_write_then_load_round_trip(results, tmp_path):
    path = side_by_side.write_results(results, tmp_path / "benchmarks.json")
    assert json.loads(path.read_text()) == results
    assert side_by_side.load_results(path) == results
    assert [p.name for p in tmp_path.iterdir()] == ["benchmarks.json"]  # no temporary file left


def test_invalid_results_are_never_written_and_old_file_survives(results, tmp_path):
    path = side_by_side.write_results(results, tmp_path / "benchmarks.json")
    before = path.read_bytes()
    results["variants"][0]["latency_us"] = {}
    with pytest.raises(BenchmarkFormatError):
        side_by_side.write_results(results, path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [
        "benchmarks.json"
    ]


def test_interrupted_write_leaves_old_file(results, tmp_path, monkeypatch):
    path = side_by_side.write_results(results, tmp_path / "benchmarks.json")
    before = path.read_bytes()

    def explode(*args, **kwargs):
        raise KeyboardInterrupt("interrupted mid-write")

    monkeypatch.setattr(side_by_side.json, "dumps", explode)
    with pytest.raises(KeyboardInterrupt):
        side_by_side.write_results(results, path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [
        "benchmarks.json"
    ]


def test_load_errors_name_the_file(tmp_path, results):
    with pytest.raises(FileNotFoundError, match="run notebook 06_benchmark_runtimes.ipynb"):
        side_by_side.load_results(tmp_path / "missing.json")
    truncated = tmp_path / "truncated.json"
    truncated.write_text(json.dumps(results)[:200])
    with pytest.raises(BenchmarkFormatError, match="truncated.json is not valid JSON"):
        side_by_side.load_results(truncated)
    wrong = tmp_path / "wrong.json"
    results["variants"][0].pop("name")
    wrong.write_text(json.dumps(results))
    with pytest.raises(
        BenchmarkFormatError, match=r"wrong\.json: variants/0: 'name' is a required property"
    ):
        side_by_side.load_results(wrong)


def test_onnxruntime_predict_uses_the_graph_names():
    from helpers.measure.bandwidth import engine_session, matmul_model

    session = engine_session(matmul_model(2, 3).SerializeToString(), 1)  # "x" -> "y", W all 0.5
    out = side_by_side.onnxruntime_predict(session)(np.array([[1.0, 3.0]], np.float32))
    np.testing.assert_array_equal(out, [[2.0, 2.0, 2.0]])


def test_command_table_only_prints_table_and_targets(results, tmp_path):
    path = side_by_side.write_results(results, tmp_path / "benchmarks.json")
    out = subprocess.run(
        [sys.executable, "-m", "helpers.benchmark", "--table-only", "--results", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Test CPU" in out and "int8-dynamic" in out and "NOT MET" in out


def test_command_rejects_bad_scale():
    result = subprocess.run(
        [sys.executable, "-m", "helpers.benchmark", "--scale", "0", "--table-only"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "--scale must be positive" in result.stderr


def test_command_runs_notebook_06(results, tmp_path, monkeypatch, capsys):
    import helpers.pipeline.artifacts
    from helpers.data.paths import NOTEBOOKS

    ran = []
    monkeypatch.setattr(helpers.pipeline.artifacts, "run_notebook", ran.append)
    path = side_by_side.write_results(results, tmp_path / "benchmarks.json")
    assert benchmark.main(["--results", str(path)]) == 0
    assert ran == ["06_benchmark_runtimes.ipynb"] and (NOTEBOOKS / ran[0]).is_file()
    assert "NOT MET" in capsys.readouterr().out


def test_time_side_by_side_interleaves_rounds(monkeypatch):
    monkeypatch.setenv("ONNX_PDF_BENCH_SCALE", "0.05")
    log = []
    candidates = {
        "a": (lambda x: log.append(("a", len(x))), {1: np.zeros(1), 4: np.zeros(4)}),
        "b": (lambda x: log.append(("b", len(x))), {1: np.zeros(1)}),
    }
    out = side_by_side.time_side_by_side(candidates, min_time_s=0.2, rounds=3, warmup=2, pause_s=0)
    assert (
        sorted(out) == ["a", "b"] and sorted(out["a"]) == ["1", "4"] and sorted(out["b"]) == ["1"]
    )
    for name, batch in [("a", 1), ("a", 4), ("b", 1)]:
        stats = out[name][str(batch)]
        assert (
            len(stats["round_p50"]) == 3
            and stats["n"] >= 3 * 2
            and 0 < stats["p50"] <= stats["p90"]
        )
        assert log.count((name, batch)) == stats["n"] + 2  # warm-up calls are not timed
    # interleaved: after the warm-up, "b" is called before the last call of "a" (not all of "a", then all of "b")
    timed = log[6:]
    assert timed.index(("b", 1)) < len(timed) - 1 - timed[::-1].index(("a", 1))
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        side_by_side.time_side_by_side(candidates, rounds=0)


def test_new_results_is_a_valid_document(results):
    doc = side_by_side.new_results(
        results["variants"],
        results["targets"],
        results["batch_sizes"],
        2,
        {"threads": 2},
        packages={"keras": "3.0"},
    )
    assert side_by_side.validate_results(doc) is doc
    assert doc["machine"]["threads"] == 2 and doc["machine"]["packages"]["keras"] == "3.0"
    assert doc["schema"] == side_by_side.SCHEMA and doc["settings"] == {"threads": 2}
