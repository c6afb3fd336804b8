"""The checks of notebook 00 name the mistake in realistic wrong answers (and accept the right ones)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers.checks.ex00 import given_weights
from helpers.exercises import check
from solutions.ex00 import interpret


# ----------------------------------------------------------------------------------------------- 00.1 classifier
def classifier(W=None, b=None, transB=1, ops=("Gemm", "Softmax"), output="probabilities", batch="batch",
               softmax_axis=None, **gemm_attrs):
    """A hand-built answer to 00.1, right by default; each argument makes one realistic mistake."""
    W0, b0 = given_weights()
    W, b = W0 if W is None else W, b0 if b is None else b
    nodes, last = [], "x"
    for i, op in enumerate(ops):
        out = output if i == len(ops) - 1 else f"t{i}"
        if op == "Gemm":
            nodes.append(helper.make_node("Gemm", [last, "W", "b"], [out], transB=transB, **gemm_attrs))
        elif op == "MatMul":
            nodes.append(helper.make_node("MatMul", [last, "W"], [out]))
        elif op == "Add":
            nodes.append(helper.make_node("Add", [last, "b"], [out]))
        elif op == "Softmax" and softmax_axis is not None:
            nodes.append(helper.make_node("Softmax", [last], [out], axis=softmax_axis))
        else:
            nodes.append(helper.make_node(op, [last], [out]))
        last = out
    graph = helper.make_graph(nodes, "answer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, [batch, 3])],
                              [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def test_classifier_right_answers_written_differently_pass(tmp_path):
    # every Gemm attribute spelled out, Softmax axis=1, saved to a file and passed as a path
    explicit = classifier(softmax_axis=1, alpha=1.0, beta=1.0, transA=0)
    onnx.save(explicit, tmp_path / "explicit.onnx")
    assert check("00.1", tmp_path / "explicit.onnx").ok
    # another batch name, an older opset whose Softmax also works on 2-D rows, the initializers listed as inputs
    old_style = classifier(batch="N", softmax_axis=-1)
    old_style.opset_import[0].version = 13
    old_style.graph.input.extend([helper.make_tensor_value_info("W", TensorProto.FLOAT, [3, 4]),
                                  helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])])
    feedback = check("00.1", old_style)
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("answer, named", [
    (dict(ops=("MatMul", "Add", "Relu")), ["one Gemm", "your nodes are ['MatMul', 'Add', 'Relu']"]),
    (dict(ops=("Gemm", "Relu")), ["one Softmax", "['Gemm', 'Relu']"]),  # the notebook's Relu kept
    (dict(ops=("Gemm",)), ["one Softmax", "['Gemm']"]),
    (dict(W=given_weights()[0].T.copy(), transB=0), ["stored [3, 4]", "yours is [4, 3] with transB=0"]),
    (dict(transB=0), ["transB=1", "yours is [3, 4] with transB=0"]),
    (dict(output="y"), ["output 'probabilities'", "outputs ['y']"]),
    (dict(batch=1), ["[batch, 4]", "found [1, 4]"]),
    (dict(W=np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)), ["weights differ"]),
    (dict(b=np.zeros(3, np.float32)), ["weights differ"]),
    (dict(softmax_axis=0), ["do not each sum to 1", "axis=-1"]),
    (dict(alpha=2.0), ["differs from softmax(x @ W.T + b), first in row"]),
])
def test_classifier_mistakes_are_named_without_the_expected_output(answer, named):
    feedback = check("00.1", classifier(**answer))
    assert not feedback.ok
    for words in named:
        assert words in feedback.message, feedback.message
    W, b = given_weights()
    x = np.random.default_rng(2026).standard_normal((6, 4)).astype(np.float32)
    expected = ReferenceEvaluator(classifier()).run(None, {"x": x})[0]
    assert not any(f"{v:.3f}" in feedback.message for v in expected.ravel())


# ----------------------------------------------------------------------------------------------- 00.2 interpreter
def interpret_with_a_table(model, image):
    """A right answer written differently: one lambda per op type, einsum for Gemm, names from the node lists."""
    def gemm(a, b, c=0.0, alpha=1.0, beta=1.0, transA=0, transB=0):
        return alpha * np.einsum("ij,jk->ik", a.T if transA else a, b.T if transB else b) + beta * c

    ops = {"Sub": np.subtract, "Div": np.divide, "Relu": lambda a: np.clip(a, 0, None),
           "Reshape": lambda a, shape: np.reshape(a, shape), "Gemm": gemm}
    env = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer} | {model.graph.input[0].name: image}
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name != "allowzero"}
        (env[node.output[0]],) = [ops[node.op_type](*(env[t] for t in node.input), **attrs)]
    return env[model.graph.output[0].name]


class Interpreter:
    """Another right answer: a callable object that keeps the values it computed in a list."""

    def __call__(self, model, image):
        known = dict(zip([model.graph.input[0].name], [image]))
        known.update((t.name, numpy_helper.to_array(t)) for t in model.graph.initializer)
        for node in model.graph.node:
            a = [known[t] for t in node.input]
            t = {x.name: x.i for x in node.attribute if x.type == onnx.AttributeProto.INT}
            if node.op_type == "Gemm":
                out = np.matmul(np.swapaxes(a[0], 0, 1) if t.get("transA") else a[0],
                                np.swapaxes(a[1], 0, 1) if t.get("transB") else a[1]) + a[2]
            else:
                out = {"Sub": lambda: a[0] - a[1], "Div": lambda: a[0] / a[1], "Relu": lambda: a[0] * (a[0] > 0),
                       "Reshape": lambda: a[0].reshape(tuple(a[1]))}[node.op_type]()
            known[node.output[0]] = out
        return known[model.graph.output[0].name]


@pytest.mark.parametrize("answer", [interpret, interpret_with_a_table, Interpreter()])
def test_interpreter_right_answers_pass(answer):
    feedback = check("00.2", answer)
    assert feedback.ok, str(feedback)


def test_interpreter_calling_onnxruntime_is_named():
    def interpret_ort(model, image):
        return ort.InferenceSession(model.SerializeToString()).run(None, {model.graph.input[0].name: image})[0]

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
        return ReferenceEvaluator(model).run(None, {model.graph.input[0].name: image})[0]

    feedback = check("00.2", interpret_ref)
    assert not feedback.ok
    assert "calls the reference evaluator" in feedback.message


def _patched_interpreter(input_name=None, output_name=None, finish=None, **changes):
    """The worked interpreter with one thing done wrong."""
    def wrong(model, image):
        values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        values[input_name or model.graph.input[0].name] = image
        for node in model.graph.node:
            x = [values[n] for n in node.input]
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type in changes:
                out = changes[node.op_type](*x)
            elif node.op_type == "Sub":
                out = x[0] - x[1]
            elif node.op_type == "Div":
                out = x[0] / x[1]
            elif node.op_type == "Reshape":
                out = x[0].reshape(x[1])
            elif node.op_type == "Gemm":
                out = x[0] @ (x[1].T if attrs.get("transB") else x[1]) + x[2]
            elif node.op_type == "Relu":
                out = np.maximum(x[0], 0)
            values[node.output[0]] = out.astype(np.float32)
        result = values[output_name or model.graph.output[0].name]
        return finish(result) if finish else result
    return wrong


def test_hard_coded_input_name_is_named():
    feedback = check("00.2", _patched_interpreter(input_name="image"))
    assert not feedback.ok
    assert "looks up 'renamed_image' but never stored it" in feedback.message and "not a fixed one" in feedback.message


def test_hard_coded_output_name_is_named():
    feedback = check("00.2", _patched_interpreter(output_name="logits"))
    assert not feedback.ok
    assert "looks up 'logits' but never stored it" in feedback.message and "not a fixed one" in feedback.message


def test_returning_probabilities_is_named_not_blamed_on_a_node():
    def softmax(z):
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    feedback = check("00.2", _patched_interpreter(finish=softmax))
    assert not feedback.ok
    assert "returns probabilities" in feedback.message and "node 0" not in feedback.message


def test_gemm_that_always_transposes_B_is_located_on_the_variant():
    feedback = check("00.2", _patched_interpreter(Gemm=lambda a, b, c: a @ b.T + c))  # ignores transB=0
    assert not feedback.ok
    assert "on a variant" in feedback.message and "node 5 (Gemm)" in feedback.message


def test_gemm_that_never_transposes_B_is_located_on_the_exported_model():
    feedback = check("00.2", _patched_interpreter(Gemm=lambda a, b, c: a @ b + c))  # ignores transB=1
    assert not feedback.ok
    assert "on the exported MLP" in feedback.message and "node 3 (Gemm)" in feedback.message
    assert "raises ValueError" in feedback.message  # the shapes do not fit: what numpy says is shown


def test_wrong_operator_is_located():
    feedback = check("00.2", _patched_interpreter(Relu=lambda a: a))  # Relu forgotten
    assert not feedback.ok
    assert "first node that differs is node 4 (Relu)" in feedback.message
    feedback = check("00.2", _patched_interpreter(Div=lambda a, b: a * b))
    assert not feedback.ok
    assert "first node that differs is node 1 (Div)" in feedback.message


def test_missing_operator_is_located_with_what_it_raises():
    def no_reshape(a, shape):
        raise NotImplementedError("Reshape")

    feedback = check("00.2", _patched_interpreter(Reshape=no_reshape))
    assert not feedback.ok
    assert "node 2 (Reshape), which raises NotImplementedError" in feedback.message


def _mlp_path():
    from helpers.notebooks import require_artifact

    return require_artifact("mnist_mlp_pytorch.onnx")


# ----------------------------------------------------------------------------------------------- 00.3 detectors
RIGHT = {"output_renamed": "check_model", "opset_5": "InferenceSession", "W_shape_5x3": "full_check"}


def test_detectors_right_answers_pass():
    assert check("00.3", RIGHT).ok
    # found the way the exercise suggests, by trying each tool in order; a dict in another order
    from helpers.checks.ex00 import broken_models

    def first(model):
        for name, tool in [("check_model", lambda: onnx.checker.check_model(model)),
                           ("full_check", lambda: onnx.checker.check_model(model, full_check=True)),
                           ("InferenceSession", lambda: ort.InferenceSession(model.SerializeToString()))]:
            try:
                tool()
            except Exception:
                return name
        return "nothing"

    tried = {name: first(model) for name, model in reversed(broken_models().items())}
    assert check("00.3", tried).ok
    from helpers.checks.ex00 import BREAKAGES

    zipped = dict(zip(BREAKAGES, ["check_model", "InferenceSession", "full_check"]))  # built another way
    assert check("00.3", {**zipped, "why": "the renamed output dangles"}).ok  # extra keys are fine


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
