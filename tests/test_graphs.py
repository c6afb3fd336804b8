"""Tests for helpers.graphs (the graph pictures of notebook 00)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import graphs


def tiny_model(x_name: str = "x", add_input: str = "b") -> onnx.ModelProto:
    """relu(x @ W + b) with a dynamic batch dimension, as built in notebook 00."""
    rng = np.random.default_rng(0)
    W = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("MatMul", [x_name, "W"], ["xW"], name="matmul"),
             helper.make_node("Add", ["xW", add_input], ["xW_plus_b"], name="add"),
             helper.make_node("Relu", ["xW_plus_b"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "relu_affine",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
                              initializer=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def mlp_like_model() -> onnx.ModelProto:
    """Sub(scalar) -> Reshape(int64 [-1, 4]) -> Gemm(transB=1): the patterns of an exported MLP."""
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "mean"),
             numpy_helper.from_array(np.array([-1, 4], np.int64), "target_shape"),
             numpy_helper.from_array(np.ones((2, 4), np.float32), "weight"),
             numpy_helper.from_array(np.zeros(2, np.float32), "bias")]
    nodes = [helper.make_node("Sub", ["image", "mean"], ["centered"]),
             helper.make_node("Reshape", ["centered", "target_shape"], ["flat"]),
             helper.make_node("Gemm", ["flat", "weight", "bias"], ["logits"], transB=1, alpha=1.0)]
    graph = helper.make_graph(nodes, "mlp_like",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 2, 2])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])],
                              initializer=inits)
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def kinds(G) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node, kind in G.nodes(data="kind"):
        out.setdefault(kind, []).append(node)
    return out


def test_initializers_folded_into_operators():
    G = graphs.onnx_to_networkx(tiny_model())
    assert {k: len(v) for k, v in kinds(G).items()} == {"input": 1, "op": 3, "output": 1}
    assert list(G.edges) == [("input:x", "op:0"), ("op:0", "op:1"), ("op:1", "op:2"), ("op:2", "output:y")]
    assert G.edges["op:0", "op:1"] == {"tensor": "xW", "type": "float[batch,3]"}  # inferred, not declared
    assert G.nodes["op:0"]["label"] == "MatMul\nB: W float[4,3]"
    assert G.nodes["op:1"]["label"] == "Add\nB: b float[3]"
    assert G.nodes["input:x"]["label"] == "x\nfloat[batch,4]"
    assert [G.nodes[n]["layer"] for n in ("input:x", "op:0", "op:1", "op:2", "output:y")] == [0, 1, 2, 3, 4]


def test_initializers_as_nodes_sit_above_their_consumer():
    G = graphs.onnx_to_networkx(tiny_model(), initializers_as_nodes=True)
    assert sorted(kinds(G)["initializer"]) == ["init:W", "init:b"]
    assert ("init:W", "op:0") in G.edges and ("init:b", "op:1") in G.edges
    assert G.nodes["init:W"]["layer"] == G.nodes["op:0"]["layer"] - 1
    assert G.nodes["init:b"]["layer"] == G.nodes["op:1"]["layer"] - 1
    assert G.nodes["op:0"]["label"] == "MatMul"


def test_small_values_and_changed_attributes_are_shown():
    G = graphs.onnx_to_networkx(mlp_like_model())
    assert G.nodes["op:0"]["label"] == "Sub\nB: mean = 0.5"
    assert G.nodes["op:1"]["label"] == "Reshape\nshape: target_shape = [-1, 4]"
    # transB differs from its default (0) and is shown; alpha=1.0 is the default and is not.
    assert G.nodes["op:2"]["label"] == "Gemm (transB=1)\nB: weight float[2,4]\nC: bias float[2]"
    # Shape inference cannot tell that Reshape's -1 is the batch, so it invents a symbol for it.
    assert G.edges["op:1", "op:2"]["type"] == "float[unk__0,4]"


def test_operator_from_a_custom_domain_is_drawn_without_a_schema():
    node = helper.make_node("FusedThing", ["x", "k"], ["y"], domain="com.example", mode=3)
    graph = helper.make_graph([node], "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              initializer=[numpy_helper.from_array(np.ones(2, np.float32), "k")])
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20),
                                                                    helper.make_opsetid("com.example", 1)])
    G = graphs.onnx_to_networkx(model)
    assert G.nodes["op:0"]["label"] == "com.example.FusedThing (mode=3)\nin1: k float[2]"
    assert G.edges["op:0", "output:y"]["type"] == "float[2]"


@pytest.mark.parametrize("bad", ["model.onnx", Path("model.onnx"), b"\x08\x0a", {"graph": None}, None])
def test_not_a_model_proto_is_a_type_error(bad):
    with pytest.raises(TypeError, match=r"expected an onnx\.ModelProto.*got"):
        graphs.onnx_to_networkx(bad)
    with pytest.raises(TypeError, match=r"expected an onnx\.ModelProto"):
        graphs.draw_onnx_graph(bad)


def test_path_gets_a_hint_to_load_it_first():
    with pytest.raises(TypeError, match=r"onnx\.load\(path\).*got builtins\.str"):
        graphs.onnx_to_networkx("model.onnx")


def test_a_graph_proto_is_not_a_model_proto():
    with pytest.raises(TypeError, match=r"got onnx\.onnx_ml_pb2\.GraphProto|got onnx\..*GraphProto"):
        graphs.onnx_to_networkx(tiny_model().graph)


def test_dangling_input_is_a_value_error():
    with pytest.raises(ValueError, match=r"node 1 \(Add 'add'\) reads tensor 'bias'.*not a graph input"):
        graphs.onnx_to_networkx(tiny_model(add_input="bias"))


def test_unproduced_graph_output_is_a_value_error():
    model = tiny_model()
    model.graph.output[0].name = "nowhere"
    with pytest.raises(ValueError, match="graph output 'nowhere' is not produced"):
        graphs.onnx_to_networkx(model)


@pytest.mark.parametrize("as_nodes", [False, True])
def test_draw_returns_a_figure_with_one_box_per_node(as_nodes):
    import matplotlib.pyplot as plt

    model = tiny_model()
    fig = graphs.draw_onnx_graph(model, initializers_as_nodes=as_nodes, title="tiny")
    try:
        ax = fig.axes[0]
        boxes = [t for t in ax.texts if t.get_bbox_patch() is not None and t.get_text()]
        G = graphs.onnx_to_networkx(model, initializers_as_nodes=as_nodes)
        assert len(boxes) == G.number_of_nodes()
        arrows = [c for c in ax.get_children() if type(c).__name__ == "Annotation"]
        assert len(arrows) == G.number_of_edges()
        assert fig._suptitle.get_text() == "tiny"
        fig.canvas.draw()  # the artist-relative arrow coordinates resolve at draw time
    finally:
        plt.close(fig)


def test_import_stays_light():
    code = ("import sys, helpers.graphs; heavy = [m for m in ('torch', 'tensorflow', 'networkx', "
            "'matplotlib', 'onnx') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
