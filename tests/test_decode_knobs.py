"""helpers.measure.decode_knobs: a build checked against the options asked for, a generator that cannot load
says which and why, the summary of interleaved runs (no real model here)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from helpers.measure import decode_knobs


def write_model(folder, attributes):
    nodes = [
        helper.make_node(
            "MatMulNBits", ["x", f"w{i}", f"s{i}"], [f"y{i}"], domain="com.microsoft", **attrs
        )
        for i, attrs in enumerate(attributes)
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [
            helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1, 8])
            for i in range(len(nodes))
        ],
    )
    onnx.save(helper.make_model(graph), folder / "model.onnx")


def test_check_build_accepts_what_was_asked_and_names_what_came(tmp_path):
    asked = {"K": 64, "N": 8, "bits": 4, "block_size": 64, "accuracy_level": 4}
    write_model(tmp_path, [asked, asked])
    assert decode_knobs.check_build(tmp_path, block_size=64, accuracy_level=4) == 2
    with pytest.raises(ValueError, match=r"block_size=128 .*got \{\(64, 4\): 2\}.*ignored"):
        decode_knobs.check_build(tmp_path, block_size=128, accuracy_level=4)
    write_model(tmp_path, [asked, dict(asked, block_size=32)])  # one node left at the default
    with pytest.raises(ValueError, match=r"\(32, 4\): 1"):
        decode_knobs.check_build(tmp_path, block_size=64, accuracy_level=4)
    write_model(tmp_path, [{k: v for k, v in asked.items() if k != "accuracy_level"}])
    with pytest.raises(ValueError, match=r"accuracy_level=4, got \{\(64, 0\): 1\}"):
        decode_knobs.check_build(tmp_path, block_size=64, accuracy_level=4)
    write_model(tmp_path, [])
    with pytest.raises(ValueError, match="no MatMulNBits node"):
        decode_knobs.check_build(tmp_path, block_size=32, accuracy_level=4)


def test_a_generator_that_cannot_load_says_which_and_why(tmp_path):
    with pytest.raises(
        RuntimeError, match=r"(?s)generator 'broken' \(.*\{'x': 1\}\) exited with code"
    ):
        decode_knobs.start({"broken": (tmp_path / "missing", {"x": 1})}, log=lambda m: None)


def test_summary_keeps_the_best_rate_the_slowest_and_the_median_cpu():
    runs = [
        {"decode_tok_s": 100.0, "ttft_s": 0.05, "cpu_s_per_token": 0.02},
        {"decode_tok_s": 80.0, "ttft_s": 0.04, "cpu_s_per_token": 0.03},
        {"decode_tok_s": 90.0, "ttft_s": 0.06, "cpu_s_per_token": 0.01},
    ]
    s = decode_knobs.summary(runs)
    assert s["decode_tok_s"] == 100.0 and s["decode_tok_s_min"] == 80.0
    assert s["spread"] == pytest.approx(0.2) and s["ttft_ms"] == pytest.approx(40.0)
    assert s["cpu_s_per_token"] == 0.02 and s["runs"] == 3
