"""The checks of notebook 00 name the mistake in realistic wrong answers (and accept the right ones)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers.exercises import check
from solutions.ex00 import interpret


# ----------------------------------------------------------------------------------------------- 00.1 Gemm
def gemm_model(W=None, transB=None, batch="batch", extra_add=False, alpha=None):
    rng = np.random.default_rng(1)
    W = rng.standard_normal((4, 3)).astype(np.float32) if W is None else W
    b = rng.standard_normal(3).astype(np.float32)
    attrs = {} if transB is None else {"transB": transB}
    attrs.update({} if alpha is None else {"alpha": alpha})
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["g"], **attrs)]
    if extra_add:  # Gemm without C, the bias still added by the old Add
        nodes = [helper.make_node("Gemm", ["x", "W"], ["xW"]), helper.make_node("Add", ["xW", "b"], ["g"])]
    nodes.append(helper.make_node("Relu", ["g"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
                              [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def test_gemm_right_with_or_without_transposed_storage():
    assert check("00.1", gemm_model()).ok
    W_out_in = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    assert check("00.1", gemm_model(W=W_out_in, transB=1)).ok  # PyTorch's layout


def test_gemm_with_transB_but_untransposed_weight_is_refused_with_the_shape_problem():
    feedback = check("00.1", gemm_model(transB=1))  # W is [4, 3]: transB=1 makes it [3, 4]
    assert not feedback.ok
    assert "transB" in feedback.message


def test_scaled_gemm_is_named():
    feedback = check("00.1", gemm_model(alpha=2.0))
    assert not feedback.ok
    assert "does not compute relu(x @ W + b)" in feedback.message and "alpha=2.0" in feedback.message


def test_leftover_add_is_named():
    feedback = check("00.1", gemm_model(extra_add=True))
    assert not feedback.ok
    assert "no MatMul or Add" in feedback.message


def test_fixed_batch_is_named():
    feedback = check("00.1", gemm_model(batch=1))
    assert not feedback.ok
    assert "batch dimension should stay dynamic" in feedback.message


# ----------------------------------------------------------------------------------------------- 00.2 interpreter
def test_interpreter_right_answer_passes_both_models():
    feedback = check("00.2", interpret)
    assert feedback.ok, str(feedback)
    assert len(feedback.details) == 3 and "numpy only" in feedback.details[-1]


def test_interpreter_calling_onnxruntime_is_named():
    def interpret_ort(model, image):
        return ort.InferenceSession(model.SerializeToString()).run(None, {"image": image})[0]

    feedback = check("00.2", interpret_ort)
    assert not feedback.ok
    assert "calls ONNX Runtime" in feedback.message and "numpy only" in feedback.message
    # and the runtime works again afterwards: the check left the kernel as it found it
    model = onnx.load(_mlp_path())
    assert interpret_ort(model, np.zeros((1, 1, 28, 28), np.float32)).shape == (1, 10)


def test_interpreter_reusing_an_existing_session_is_named():
    existing = ort.InferenceSession(_mlp_path())

    def interpret_cached(model, image):
        return existing.run(["logits"], {"image": image})[0]

    feedback = check("00.2", interpret_cached)
    assert not feedback.ok and "calls ONNX Runtime" in feedback.message


def test_interpreter_calling_the_reference_evaluator_is_named():
    def interpret_ref(model, image):
        return ReferenceEvaluator(model).run(None, {"image": image})[0]

    feedback = check("00.2", interpret_ref)
    assert not feedback.ok
    assert "calls the reference evaluator" in feedback.message


def _patched_interpreter(**changes):
    """The worked interpreter with one operator done wrong."""
    def wrong(model, image):
        from onnx import numpy_helper

        values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        values[model.graph.input[0].name] = image
        for node in model.graph.node:
            x = [values[n] for n in node.input]
            if node.op_type in changes:
                out = changes[node.op_type](*x)
            elif node.op_type == "Sub":
                out = x[0] - x[1]
            elif node.op_type == "Div":
                out = x[0] / x[1]
            elif node.op_type == "Reshape":
                out = x[0].reshape(x[1])
            elif node.op_type == "Gemm":
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                out = x[0] @ (x[1].T if attrs.get("transB") else x[1]) + x[2]
            elif node.op_type == "Relu":
                out = np.maximum(x[0], 0)
            values[node.output[0]] = out.astype(np.float32)
        return values[model.graph.output[0].name]
    return wrong


def test_gemm_that_always_transposes_B_is_named():
    feedback = check("00.2", _patched_interpreter(Gemm=lambda a, b, c: a @ b.T + c))  # ignores transB
    assert not feedback.ok
    assert "transB=0" in feedback.message and "node 5 (Gemm)" in feedback.message
    assert "does your Gemm follow its transB attribute" in feedback.message


def test_gemm_that_never_transposes_B_is_located_on_the_exported_model():
    feedback = check("00.2", _patched_interpreter(Gemm=lambda a, b, c: a @ b + c))  # ignores transB=1
    assert not feedback.ok
    assert "on the exported MLP (every Gemm has transB=1)" in feedback.message and "node 3 (Gemm)" in feedback.message
    assert "does your Gemm follow its transB attribute" in feedback.message


def test_wrong_operator_is_located():
    feedback = check("00.2", _patched_interpreter(Relu=lambda a: a))  # Relu forgotten
    assert not feedback.ok
    assert "first goes wrong at node 4 (Relu)" in feedback.message
    feedback = check("00.2", _patched_interpreter(Div=lambda a, b: a * b))
    assert not feedback.ok
    assert "first goes wrong at node 1 (Div)" in feedback.message


def _mlp_path():
    from helpers.notebooks import require_artifact

    return require_artifact("mnist_mlp_pytorch.onnx")


# ----------------------------------------------------------------------------------------------- 00.3 detectors
RIGHT = {"output_renamed": "check_model", "opset_5": "InferenceSession", "W_shape_5x3": "full_check"}


def test_detectors_right_answer_passes():
    assert check("00.3", RIGHT).ok


def test_detector_too_early_says_that_tool_accepts_it():
    feedback = check("00.3", {**RIGHT, "opset_5": "check_model"})
    assert not feedback.ok
    assert "opset_5: check_model accepts this model" in feedback.message
    assert "output_renamed" not in feedback.message and "W_shape_5x3" not in feedback.message


def test_detector_too_late_says_an_earlier_tool_notices():
    feedback = check("00.3", {**RIGHT, "W_shape_5x3": "InferenceSession", "output_renamed": "nothing"})
    assert not feedback.ok
    assert "W_shape_5x3: a tool earlier in the order than InferenceSession already notices it" in feedback.message
    assert "output_renamed: a tool earlier in the order than nothing" in feedback.message


def test_detector_unknown_tool_name_lists_the_choices():
    feedback = check("00.3", {**RIGHT, "opset_5": "ort"})
    assert not feedback.ok and "answers must be one of" in feedback.message
