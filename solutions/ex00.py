"""Solutions for notebook 00's exercises."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def solve_1(workdir: Path):
    """softmax(x @ W.T + b): Gemm reads W as stored [out, in] with transB=1, then Softmax over the last axis."""
    from onnx import TensorProto, helper, numpy_helper

    W = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
    b = np.array([0.1, -0.2, 0.3], np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "W", "b"], ["scores"], transB=1),
            helper.make_node("Softmax", ["scores"], ["probabilities"]),
        ],
        "linear_classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def interpret(model, image):
    """A numpy interpreter for the five op types of the MLP."""
    from onnx import helper, numpy_helper

    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    values[model.graph.input[0].name] = image
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        x = [values[name] for name in node.input]
        if node.op_type == "Sub":
            out = x[0] - x[1]
        elif node.op_type == "Div":
            out = x[0] / x[1]
        elif node.op_type == "Reshape":
            out = x[0].reshape(x[1])
        elif node.op_type == "Gemm":
            a = x[0].T if attrs.get("transA") else x[0]
            b = x[1].T if attrs.get("transB") else x[1]
            out = attrs.get("alpha", 1.0) * (a @ b) + attrs.get("beta", 1.0) * (
                x[2] if len(x) > 2 else 0
            )
        elif node.op_type == "MatMul":
            out = x[0] @ x[1]
        elif node.op_type == "Add":
            out = x[0] + x[1]
        elif node.op_type == "Relu":
            out = np.maximum(x[0], 0)
        else:
            raise NotImplementedError(f"this interpreter does not implement {node.op_type}")
        values[node.output[0]] = out.astype(np.float32)
    return values[model.graph.output[0].name]


def solve_2(workdir: Path):
    return interpret


def solve_3(workdir: Path):
    """Found by trying check_model, check_model(full_check=True), InferenceSession in that order."""
    return {
        "output_renamed": "check_model",
        "opset_5": "InferenceSession",
        "W_shape_5x3": "full_check",
    }
