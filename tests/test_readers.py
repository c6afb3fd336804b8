"""helpers.measure.readers: every reader in a process of its own, each outcome classified, on tiny models."""

from __future__ import annotations

import math
import stat

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers.measure import readers

X = np.array([[-2.0, -0.5, 0.0, 0.5, 3.0]], dtype=np.float32)


def tiny_model(path, domain: str = "", op: str = "Relu"):
    """One node on a [batch, 5] float input, in the standard domain or another one."""
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], domain=domain)],
        "tiny",
        [value("x", TensorProto.FLOAT, ["batch", 5])],
        [value("y", TensorProto.FLOAT, ["batch", 5])],
    )
    opsets = [helper.make_opsetid("", 20)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    onnx.save(helper.make_model(graph, ir_version=10, opset_imports=opsets), path)
    return path


@pytest.mark.parametrize("reader", readers.READERS)
def test_every_reader_agrees_on_a_standard_operator(tmp_path, reader):
    model = tiny_model(tmp_path / "relu.onnx")
    outcome = readers.try_reader(
        reader, "relu", model, {"x": X}, np.maximum(X, 0), 1e-6, classifier=False
    )
    assert outcome.status == "agrees" and outcome.max_diff <= 1e-6, outcome


def test_a_wrong_answer_differs_and_says_by_how_much(tmp_path):
    model = tiny_model(tmp_path / "relu.onnx")
    wrong = np.maximum(X, 0) + np.array([[0, 0, 0, 0, 0.5]], dtype=np.float32)
    outcome = readers.try_reader("tract", "relu", model, {"x": X}, wrong, 1e-4, classifier=True)
    assert outcome.status == "differs" and outcome.max_diff == pytest.approx(0.5), outcome
    assert outcome.top1 == 1.0 and outcome.cell() == "5e-01, top-1 100%"


def test_a_vendor_operator_is_refused_with_the_readers_first_line(tmp_path):
    model = tiny_model(tmp_path / "vendor.onnx", domain="com.example", op="Frobnicate")
    outcome = readers.try_reader(
        "reference evaluator", "vendor", model, {"x": X}, X, 1e-4, classifier=False
    )
    assert outcome.status == "refuses", outcome
    assert "Frobnicate" in outcome.message and "\n" not in outcome.message


def test_a_reader_that_aborts_its_process_is_reported_as_dying(tmp_path, monkeypatch):
    """What tract's Rust panic does ("cannot unwind": SIGABRT), played by a stand-in interpreter."""
    aborting = tmp_path / "python"
    aborting.write_text(
        "#!/bin/sh\necho 'panic in a function that cannot unwind' >&2\nkill -ABRT $$\n"
    )
    aborting.chmod(aborting.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(readers.sys, "executable", str(aborting))
    model = tiny_model(tmp_path / "relu.onnx")
    outcome = readers.try_reader("tract", "relu", model, {"x": X}, X, 1e-4, classifier=False)
    assert outcome.status == "dies", outcome
    assert "cannot unwind" in outcome.message and "exit code -6" in outcome.message


def test_first_line_skips_openvino_s_source_locations():
    message = (
        "Exception from src/inference/src/cpp/core.cpp:84:\n"
        "Exception from src/inference/src/model_reader.cpp:148:\n"
        'Unable to read the model: "m.ort" Please check that model format: ".ort" is supported\n'
    )
    assert readers.first_line(message).startswith("Unable to read the model")
    assert readers.first_line("") == "(no message)"
    assert len(readers.first_line("x" * 500)) == 160


def test_unknown_reader_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown reader 'Netron'"):
        readers.run_reader("Netron", "model.onnx", {})


def test_table_and_grid_show_every_outcome(tmp_path):
    relu = tiny_model(tmp_path / "relu.onnx")
    vendor = tiny_model(tmp_path / "vendor.onnx", domain="com.example", op="Frobnicate")
    outcomes = readers.readers_table(
        {"relu.onnx": relu, "vendor.onnx": vendor},
        feeds_for=lambda path: {"x": X},
        reference_for=lambda path, feeds: np.maximum(X, 0),
        readers=("reference evaluator", "tract"),
        classifier=False,
    )
    assert [(o.file, o.reader, o.status) for o in outcomes] == [
        ("relu.onnx", "reference evaluator", "agrees"),
        ("relu.onnx", "tract", "agrees"),
        ("vendor.onnx", "reference evaluator", "refuses"),
        ("vendor.onnx", "tract", "refuses"),
    ]
    table = readers.format_table(outcomes)
    assert table.splitlines()[0].split() == ["file", "reference", "evaluator", "tract"]
    assert "vendor.onnx, tract refuses:" in table
    fig = readers.draw_readers_grid(outcomes, "tiny")
    labels = sorted(t.get_text() for t in fig.axes[0].texts)
    assert labels == sorted(o.cell() for o in outcomes)


def test_tract_matches_operators_by_name_whatever_their_domain(tmp_path):
    """Where readers differ (pinned tract 0.23.9): a `Gelu` declared in a made-up domain runs as ONNX's own,
    where the reference evaluator refuses it. A reader that runs a file is not proof it read its domains."""
    model = tiny_model(tmp_path / "gelu.onnx", domain="com.example", op="Gelu")
    erf = np.vectorize(math.erf)
    gelu = (0.5 * X * (1 + erf(X / np.sqrt(2)))).astype(np.float32)
    ran = readers.try_reader("tract", "gelu", model, {"x": X}, gelu, 1e-5, classifier=False)
    refused = readers.try_reader(
        "reference evaluator", "gelu", model, {"x": X}, gelu, 1e-5, classifier=False
    )
    assert (ran.status, refused.status) == ("agrees", "refuses"), (ran, refused)
