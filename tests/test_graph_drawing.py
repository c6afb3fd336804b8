"""Tests for helpers.show.graph_drawing (the graph pictures of notebook 00)."""

from __future__ import annotations

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.show import graph_drawing


def tiny_model(add_input: str = "b") -> onnx.ModelProto:
    """relu(x @ W + b) with a dynamic batch dimension, as built in notebook 00."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xW"]),
        helper.make_node("Add", ["xW", add_input], ["xW_plus_b"]),
        helper.make_node("Relu", ["xW_plus_b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "relu_affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[
            numpy_helper.from_array(rng.random((4, 3), np.float32), "W"),
            numpy_helper.from_array(rng.random(3, np.float32), "b"),
        ],
    )
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def test_edges_follow_tensor_names_and_weights_label_their_operator():
    G = graph_drawing.onnx_to_networkx(tiny_model())
    assert list(G.edges(data="tensor")) == [
        ("input:x", "op:0", "x"),
        ("op:0", "op:1", "xW"),
        ("op:1", "op:2", "xW_plus_b"),
        ("op:2", "output:y", "y"),
    ]
    assert [G.nodes[n]["label"] for n in ("op:0", "op:1", "op:2")] == [
        "MatMul\nW",
        "Add\nb",
        "Relu",
    ]


@pytest.mark.parametrize("bad", ["model.onnx", b"\x08\x0a", None])
def test_not_a_model_proto_is_a_type_error_with_a_hint(bad):
    with pytest.raises(
        TypeError, match=r"expected an onnx\.ModelProto \(load a file with onnx\.load"
    ):
        graph_drawing.draw_onnx_graph(bad)


def test_dangling_input_and_unproduced_output_are_value_errors():
    with pytest.raises(
        ValueError, match=r"node 1 \(Add\) reads 'bias', which is not a graph input"
    ):
        graph_drawing.onnx_to_networkx(tiny_model(add_input="bias"))
    model = tiny_model()
    model.graph.output[0].name = "nowhere"
    with pytest.raises(ValueError, match="graph output 'nowhere' is not produced"):
        graph_drawing.onnx_to_networkx(model)


def test_draw_shows_one_box_per_node_top_to_bottom():
    import matplotlib.pyplot as plt

    fig = graph_drawing.draw_onnx_graph(tiny_model(), title="tiny")
    try:
        ax = fig.axes[0]
        boxes = {
            t.get_text(): t.get_position()[1] for t in ax.texts if t.get_bbox_patch() is not None
        }
        assert {"x", "MatMul\nW", "Add\nb", "Relu", "y"} <= set(boxes)
        heights = [boxes[k] for k in ("x", "MatMul\nW", "Add\nb", "Relu", "y")]
        assert heights == sorted(heights, reverse=True)  # data flows down
        assert ax.get_title() == "tiny"
    finally:
        plt.close(fig)


def test_draw_into_given_axes_side_by_side_with_operator_types_only():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    try:
        for ax, title in zip(axes, ("left", "right")):
            assert graph_drawing.draw_onnx_graph(tiny_model(), title, ax=ax, names=False) is fig
        for ax, title in zip(axes, ("left", "right")):
            boxes = [t.get_text() for t in ax.texts if t.get_bbox_patch() is not None]
            # operator types only, no weight names, no tensor names on the edges
            assert sorted(boxes) == sorted(["x", "MatMul", "Add", "Relu", "y"]), boxes
            assert ax.get_title() == title
    finally:
        plt.close(fig)


def test_side_by_side_draws_each_model_in_its_own_panel():
    import matplotlib.pyplot as plt

    longer = tiny_model()
    longer.graph.node.append(helper.make_node("Relu", ["y"], ["z"]))
    longer.graph.output[0].name = "z"
    fig = graph_drawing.draw_graphs_side_by_side({"three ops": tiny_model(), "four ops": longer})
    try:
        assert [ax.get_title() for ax in fig.axes] == ["three ops", "four ops"]
        boxes = [sum(t.get_bbox_patch() is not None for t in ax.texts) for ax in fig.axes]
        assert boxes == [5, 6], boxes
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="expected at least one"):
        graph_drawing.draw_graphs_side_by_side({})
    with pytest.raises(TypeError, match="expected an onnx.ModelProto"):
        graph_drawing.draw_graphs_side_by_side({"a path": "model.onnx"})


def test_import_stays_light():
    code = (
        "import sys, helpers.show.graph_drawing; heavy = [m for m in ('torch', 'tensorflow', 'networkx', "
        "'matplotlib', 'onnx') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
