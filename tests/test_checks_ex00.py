"""Notebook 00's checks: right answers pass; a *_REQUIREMENTS row breaks one of the text's requirements, named."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from tables import accepted, check, refused

from helpers.grading.checks._common import rng, seeded
from helpers.grading.checks.ex00 import BREAKAGES, broken_models, given_weights, interpret
from helpers.pipeline.artifacts import built_artifact


# ----------------------------------------------------------------------------------------------- 00.1 classifier
def classifier(
    W=None,
    b=None,
    transB=1,
    ops=("Gemm", "Softmax"),
    output="probabilities",
    batch="batch",
    softmax_axis=None,
    x_name="x",
    x_type=TensorProto.FLOAT,
    x_shape=None,
    out_type=TensorProto.FLOAT,
    out_shape="default",
    out_batch=None,
    **gemm_attrs,
):
    """A hand-built answer to 00.1, right by default; each argument makes one realistic mistake."""
    W0, b0 = given_weights()
    W, b = W0 if W is None else W, b0 if b is None else b
    weights = {
        "Gemm": ["W", "b"],
        "MatMul": ["W"],
        "Add": ["b"],
    }  # the inputs after the previous node's output
    softmax = {} if softmax_axis is None else {"axis": softmax_axis}
    attributes = {"Gemm": dict(transB=transB, **gemm_attrs), "Softmax": softmax}
    nodes, last = [], x_name
    for i, op in enumerate(ops):
        out = output if i == len(ops) - 1 else f"t{i}"
        nodes.append(
            helper.make_node(op, [last, *weights.get(op, [])], [out], **attributes.get(op, {}))
        )
        last = out
    out_shape = [out_batch or batch, 3] if out_shape == "default" else out_shape
    graph = helper.make_graph(
        nodes,
        "answer",
        [helper.make_tensor_value_info(x_name, x_type, x_shape or [batch, 4])],
        [helper.make_tensor_value_info(output, out_type, out_shape)],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def test_classifier_right_answers_written_differently_pass(tmp_path):
    # every Gemm attribute spelled out, Softmax axis=1, checked as the notebook does, passed as a path
    explicit = classifier(softmax_axis=1, alpha=1.0, beta=1.0, transA=0)
    onnx.checker.check_model(explicit, full_check=True)
    onnx.save(explicit, tmp_path / "explicit.onnx")
    assert check("00.1", tmp_path / "explicit.onnx").ok
    # another batch name, an older opset whose Softmax also works on 2-D rows, the initializers listed as inputs
    old_style = classifier(batch="N", softmax_axis=-1)
    old_style.opset_import[0].version = 13
    old_style.graph.input.extend(
        [
            helper.make_tensor_value_info("W", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
        ]
    )
    accepted("00.1", old_style)
    # the notebook's own code (section 1) applied to the new case: other initializer and tensor names
    W, b = given_weights()
    graph = helper.make_graph(
        [
            helper.make_node(
                "Gemm", inputs=["x", "weight", "bias"], outputs=["xW_plus_b"], transB=1
            ),
            helper.make_node("Softmax", inputs=["xW_plus_b"], outputs=["probabilities"]),
        ],
        "linear_softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3])],
        initializer=[
            numpy_helper.from_array(W, name="weight"),
            numpy_helper.from_array(b, name="bias"),
        ],
    )
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model, full_check=True)
    accepted("00.1", model)
    # b stored as a row [1, 3]: Gemm adds it to every row of x @ W.T just the same
    accepted("00.1", classifier(b=given_weights()[1].reshape(1, 3)))


W_RANDOM = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
CLASSIFIER_REQUIREMENTS = {
    "input named x": (dict(x_name="features"), ["expected input 'x'", "found inputs ['features']"]),
    "input float32": (
        dict(x_type=TensorProto.DOUBLE),
        ["input 'x' declared float32", "found float64"],
    ),
    "input [batch, 4]": (
        dict(x_shape=["batch", 4, 1]),
        ["input 'x' of shape [batch, 4]", "['batch', 4, 1]"],
    ),
    "input batch dynamic": (
        dict(x_shape=[1, 4]),
        ["batch dimension a name (dynamic", "found [1, 4]"],
    ),
    "output named probabilities": (dict(output="y"), ["output 'probabilities'", "outputs ['y']"]),
    "output float32": (
        dict(out_type=TensorProto.DOUBLE),
        ["output 'probabilities' declared float32"],
    ),
    "output [batch, 3]": (
        dict(out_shape=["batch", 4]),
        ["output 'probabilities' of shape [batch, 3]", "found ['batch', 4]"],
    ),
    "output batch dynamic": (
        dict(out_shape=[1, 3]),
        ["output 'probabilities' of shape [batch, 3], its batch dimension a name", "found [1, 3]"],
    ),
    "output batch is the input's": (
        dict(out_batch="N"),
        ["declares its batch dimension 'N' and the input 'batch'"],
    ),
    "passes check_model": (
        dict(alpha=1),
        ["onnx.checker.check_model(model, full_check=True) refuses", "alpha"],
    ),  # an int where Gemm's alpha is a float
    "one Gemm then one Softmax": (
        dict(ops=("MatMul", "Add", "Softmax"), W=given_weights()[0].T.copy()),
        ["one Gemm", "your nodes are ['MatMul', 'Add', 'Softmax']"],
    ),
    "Gemm reads W as stored, transB=1": (
        dict(W=given_weights()[0].T.copy(), transB=0),
        ["stored [3, 4]", "transB=1", "yours is [4, 3] with transB=0"],
    ),
    "W float32": (
        dict(W=given_weights()[0].astype(np.float64)),
        ["'W' is stored as DOUBLE", "float32"],
    ),
    "W as given": (dict(W=W_RANDOM), ["differs from the exercise's W"]),
    "b as given": (dict(b=np.zeros(3, np.float32)), ["initializer b", "other values"]),
    "b [3] (or a row [1, 3])": (
        dict(b=np.tile(given_weights()[1], (2, 1))),
        ["initializer b", "shape [3]", "yours has the shape [2, 3]"],
    ),
    "softmax over each row": (dict(softmax_axis=0), ["do not each sum to 1", "axis=-1"]),
    "equals softmax(x @ W.T + b)": (
        dict(alpha=2.0),
        ["differs from softmax(x @ W.T + b), first in row"],
    ),
}
CLASSIFIER_OWN_ROUND = {
    "Relu kept from the notebook": (
        dict(ops=("Gemm", "Relu")),
        ["one Softmax", "['Gemm', 'Relu']"],
    ),
    "no Softmax": (dict(ops=("Gemm",)), ["one Softmax", "['Gemm']"]),
    "W transposed, transB=1 kept": (
        dict(W=given_weights()[0].T.copy()),
        ["yours is [4, 3] with transB=1"],
    ),
    "transB forgotten": (dict(transB=0), ["transB=1", "yours is [3, 4] with transB=0"]),
    "output declared without a shape": (dict(out_shape=None), ["no shape at all"]),
    "transB misspelt transb": (dict(transB=0, transb=1), ["transB=1", "with transB=0"]),
}


@pytest.mark.parametrize("requirement", list(CLASSIFIER_REQUIREMENTS) + list(CLASSIFIER_OWN_ROUND))
def test_classifier_requirement_broken_alone_is_named_without_the_expected_output(requirement):
    answer, words = {**CLASSIFIER_REQUIREMENTS, **CLASSIFIER_OWN_ROUND}[requirement]
    feedback = refused("00.1", classifier(**answer), *words)
    with seeded(feedback.seed):  # the inputs the check made
        x = rng().standard_normal((6, 4)).astype(np.float32)
    expected = ReferenceEvaluator(classifier()).run(None, {"x": x})[0]
    assert not any(f"{v:.3f}" in feedback.message for v in expected.ravel())


# ----------------------------------------------------------------------------------------------- 00.2 interpreter
def interpret_with_a_table(model, image, changes=None, input_name=None, output_name=None):
    """A right answer written differently: one lambda per op type, einsum for Gemm, names from the node lists
    (a wrong one with ``changes``, op type -> its wrong implementation given the trans attributes, or fixed names)."""

    def gemm(a, b, c=0.0, alpha=1.0, beta=1.0, transA=0, transB=0):
        return alpha * np.einsum("ij,jk->ik", a.T if transA else a, b.T if transB else b) + beta * c

    ops = {
        "Sub": np.subtract,
        "Div": np.divide,
        "Relu": lambda a: np.clip(a, 0, None),
        "Reshape": lambda a, shape: np.reshape(a, shape),
        "Gemm": gemm,
    } | (changes or {})
    env = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    env[input_name or model.graph.input[0].name] = image
    for node in model.graph.node:
        attrs = {
            a.name: helper.get_attribute_value(a) for a in node.attribute if a.name != "allowzero"
        }
        if node.op_type in (changes or {}):
            attrs = {k: v for k, v in attrs.items() if k.startswith("trans")}
        (env[node.output[0]],) = [ops[node.op_type](*(env[t] for t in node.input), **attrs)]
    return env[output_name or model.graph.output[0].name]


class Interpreter:
    """Another right answer: a callable object that keeps the values it computed in a dict."""

    def __call__(self, model, image):
        known = dict(zip([model.graph.input[0].name], [image]))
        known.update((t.name, numpy_helper.to_array(t)) for t in model.graph.initializer)
        for node in model.graph.node:
            a = [known[t] for t in node.input]
            t = {x.name: x.i for x in node.attribute if x.type == onnx.AttributeProto.INT}
            if node.op_type == "Gemm":
                out = (
                    np.matmul(
                        np.swapaxes(a[0], 0, 1) if t.get("transA") else a[0],
                        np.swapaxes(a[1], 0, 1) if t.get("transB") else a[1],
                    )
                    + a[2]
                )
            else:
                out = {
                    "Sub": lambda: a[0] - a[1],
                    "Div": lambda: a[0] / a[1],
                    "Relu": lambda: a[0] * (a[0] > 0),
                    "Reshape": lambda: a[0].reshape(tuple(a[1])),
                }[node.op_type]()
            known[node.output[0]] = out
        return known[model.graph.output[0].name]


def interpret_checking_first(model, image):
    """A right answer that validates what it is given, as the notebook teaches, then interprets it."""
    onnx.checker.check_model(model, full_check=True)
    return interpret(model, image)


@pytest.mark.parametrize(
    "answer", [interpret, interpret_with_a_table, Interpreter(), interpret_checking_first]
)
def test_interpreter_right_answers_pass(answer):
    accepted("00.2", answer)


def _patched_interpreter(input_name=None, output_name=None, finish=None, validate=False, **changes):
    """The table interpreter with one thing done wrong (``changes``: op type -> its wrong implementation)."""

    def wrong(model, image):
        if validate:
            onnx.checker.check_model(model, full_check=True)
        result = interpret_with_a_table(model, image, changes, input_name, output_name)
        return finish(result) if finish else result

    return wrong


def _interpret_ort(model, image):
    return ort.InferenceSession(model.SerializeToString()).run(
        None, {model.graph.input[0].name: image}
    )[0]


def _interpret_reference(model, image):
    return ReferenceEvaluator(model).run(None, {model.graph.input[0].name: image})[0]


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _gemm_shape_guess(
    a, b, c, transA=0, transB=0
):  # transposes B when the shapes do not fit, not per transB
    return (a.T if transA else a) @ (b if a.shape[1 - transA] == b.shape[0] else b.T) + c


RENAMED, RESHAPED = "on a variant (tensors renamed", "on a variant (Reshape to [-1, 392]"
INTERPRETER_REQUIREMENTS = {
    "numpy only: no ONNX Runtime": (_interpret_ort, ["calls ONNX Runtime", "numpy only"]),
    "numpy only: no reference evaluator": (_interpret_reference, ["calls the reference evaluator"]),
    "starts with the model's input (its name)": (
        _patched_interpreter(input_name="image"),
        ["looks up 'renamed_image', a tensor of this model", "never stored it", "not a fixed one"],
    ),
    "returns the model's output (its name)": (
        _patched_interpreter(output_name="logits"),
        ["looks up 'logits', a name this model does not have", "not a fixed one"],
    ),
    "returns the logits": (_patched_interpreter(finish=_softmax), ["returns probabilities"]),
    "Sub": (
        _patched_interpreter(Sub=lambda a, b: b - a),
        ["first node that differs is node 0 (Sub)"],
    ),
    "Div": (
        _patched_interpreter(Div=lambda a, b: a * b),
        ["first node that differs is node 1 (Div)"],
    ),
    "Reshape to its shape input": (
        _patched_interpreter(Reshape=lambda a, shape: a.reshape(len(a), -1)),
        [RESHAPED, "node 2 (Reshape): its output has the shape [7, 784] instead of [14, 392]"],
    ),
    "Relu": (_patched_interpreter(Relu=lambda a: a), ["first node that differs is node 4 (Relu)"]),
    "Gemm with transB": (_patched_interpreter(Gemm=_gemm_shape_guess), [RESHAPED, "node 3 (Gemm)"]),
    "Gemm with transA": (
        _patched_interpreter(
            Gemm=lambda a, b, c, transA=0, transB=0: a @ (b.T if transB else b) + c
        ),
        [RESHAPED, "node 8 (Gemm), which raises ValueError"],
    ),
    "Gemm adds C": (
        _patched_interpreter(
            Gemm=lambda a, b, c, transA=0, transB=0: (a.T if transA else a) @ (b.T if transB else b)
        ),
        ["first node that differs is node 3 (Gemm)"],
    ),
    "any batch of other digits": (
        _patched_interpreter(Reshape=lambda a, shape: a.reshape(5, -1)),
        [RENAMED, "node 2 (Reshape), which raises ValueError"],
    ),
}
INTERPRETER_OWN_ROUND = {
    "Gemm always transposes B": (
        _patched_interpreter(Gemm=lambda a, b, c, **t: a @ b.T + c),
        [RENAMED, "node 5 (Gemm)"],
    ),
    "Gemm never transposes B": (
        _patched_interpreter(Gemm=lambda a, b, c, **t: a @ b + c),
        ["on the exported MLP", "node 3 (Gemm), which raises ValueError"],
    ),
    "Reshape hard-codes 784": (
        _patched_interpreter(Reshape=lambda a, shape: a.reshape(-1, 784)),
        [RESHAPED, "node 2 (Reshape): its output has the shape"],
    ),
    "Div operands swapped": (_patched_interpreter(Div=lambda a, b: b / a), ["node 1 (Div)"]),
    "Relu forgotten, validating first": (
        _patched_interpreter(Relu=lambda a: a, validate=True),
        ["node 4 (Relu)"],
    ),
    "the exported file's tensor names hard-coded": (
        _patched_interpreter(input_name="image", output_name="logits"),
        ["looks up", "not a fixed one"],
    ),
}


@pytest.mark.parametrize(
    "requirement", list(INTERPRETER_REQUIREMENTS) + list(INTERPRETER_OWN_ROUND)
)
def test_interpreter_requirement_broken_alone_is_named(requirement):
    answer, words = {**INTERPRETER_REQUIREMENTS, **INTERPRETER_OWN_ROUND}[requirement]
    refused("00.2", answer, *words)


def test_interpreter_calling_onnxruntime_leaves_the_runtime_working():
    refused("00.2", _interpret_ort, "calls ONNX Runtime")
    model = onnx.load(built_artifact("mnist_mlp_pytorch.onnx"))
    assert _interpret_ort(model, np.zeros((1, 1, 28, 28), np.float32)).shape == (1, 10)


def test_interpreter_reusing_an_existing_session_is_named():
    existing = ort.InferenceSession(built_artifact("mnist_mlp_pytorch.onnx"))
    refused(
        "00.2",
        lambda model, image: existing.run(["logits"], {"image": image})[0],
        "calls ONNX Runtime",
    )


def test_every_model_handed_to_an_interpreter_passes_check_model():
    from helpers.grading.checks.ex00 import _interpreter_models, _truncated

    with seeded(2026):
        models = _interpreter_models()
    for model in models.values():
        onnx.checker.check_model(model, full_check=True)
        for k in range(len(model.graph.node)):  # the cut graphs that locate the first wrong node
            onnx.checker.check_model(_truncated(model, k), full_check=True)


# ----------------------------------------------------------------------------------------------- 00.3 detectors
RIGHT = {
    "output_renamed": "check_model",
    "opset_5": "InferenceSession",
    "W_shape_5x3": "full_check",
}
AS_THE_TASK_SPELLS_IT = {
    "output_renamed": "onnx.checker.check_model",
    "opset_5": "ort.InferenceSession",
    "W_shape_5x3": "check_model(..., full_check=True)",
}


def test_detectors_right_answers_pass():
    assert check("00.3", RIGHT).ok
    assert check("00.3", AS_THE_TASK_SPELLS_IT).ok
    # the tools themselves, and other spellings of them
    assert check(
        "00.3",
        {
            "output_renamed": onnx.checker.check_model,
            "opset_5": ort.InferenceSession,
            "W_shape_5x3": functools.partial(onnx.checker.check_model, full_check=True),
        },
    ).ok
    assert check(
        "00.3",
        {
            "output_renamed": "check_model(model)",
            "opset_5": "onnxruntime.InferenceSession",
            "W_shape_5x3": "full_check=True",
        },
    ).ok

    def first(model):  # found the way the exercise suggests, by trying each tool in order
        for name, tool in [
            ("check_model", lambda: onnx.checker.check_model(model)),
            ("full_check", lambda: onnx.checker.check_model(model, full_check=True)),
            ("InferenceSession", lambda: ort.InferenceSession(model.SerializeToString())),
        ]:
            try:
                tool()
            except Exception:
                return name
        return "nothing"

    tried = {name: first(model) for name, model in reversed(broken_models().items())}
    assert check("00.3", tried).ok
    zipped = dict(
        zip(BREAKAGES, ["check_model", "InferenceSession", "full_check"])
    )  # built another way
    assert check("00.3", {**zipped, "why": "the renamed output dangles"}).ok  # extra keys are fine


NO_DIRECTION = (
    "earlier",
    "later",
    "too ",
    "accepts",
)  # never whether the answer is before or after the right one
DETECTOR_REQUIREMENTS = {
    "output_renamed: the first tool that notices": (
        {**RIGHT, "output_renamed": "full_check"},
        ["not yet right for output_renamed (2 of 3 right)"],
    ),
    "opset_5: the first tool that notices": (
        {**AS_THE_TASK_SPELLS_IT, "opset_5": "onnx.checker.check_model"},
        ["not yet right for opset_5 (2 of 3 right)"],
    ),
    "W_shape_5x3: the first tool that notices": (
        {**RIGHT, "W_shape_5x3": "ort.InferenceSession"},
        ["not yet right for W_shape_5x3 (2 of 3 right)"],
    ),
    "one of the tools named, or nothing": (
        {**RIGHT, "opset_5": "ort"},
        ["each answer names one tool", "{'opset_5': 'ort'}"],
    ),
    "the three keys": (
        {"output_renamed": "check_model", "opset_5": "InferenceSession"},
        ["missing ['W_shape_5x3']"],
    ),
}
DETECTOR_OWN_ROUND = {
    "check_model everywhere": (
        dict.fromkeys(BREAKAGES, "check_model"),
        ["not yet right for opset_5, W_shape_5x3 (1 of 3 right)"],
    ),
    "nothing everywhere": (
        dict.fromkeys(BREAKAGES, "nothing"),
        ["not yet right for output_renamed, opset_5, W_shape_5x3 (0 of 3 right)"],
    ),
    "opset_5 and W_shape_5x3 swapped": (
        {**RIGHT, "opset_5": "full_check", "W_shape_5x3": "InferenceSession"},
        ["not yet right for opset_5, W_shape_5x3"],
    ),
    "the task's ... left in": (
        {**RIGHT, "W_shape_5x3": ...},
        ["each answer names one tool", "Ellipsis"],
    ),
    "None for nothing": (
        {**RIGHT, "output_renamed": None},
        ["each answer names one tool", "'nothing'"],
    ),
    "a key misspelt": (
        {
            "output_renamed": "check_model",
            "opset5": "InferenceSession",
            "W_shape_5x3": "full_check",
        },
        ["missing ['opset_5']"],
    ),
    "a list in the order of the task": (
        ["check_model", "InferenceSession", "full_check"],
        ["expected a dict"],
    ),
}


@pytest.mark.parametrize("requirement", list(DETECTOR_REQUIREMENTS) + list(DETECTOR_OWN_ROUND))
def test_detector_requirement_broken_alone_is_named_without_a_direction(requirement):
    answer, words = {**DETECTOR_REQUIREMENTS, **DETECTOR_OWN_ROUND}[requirement]
    feedback = refused("00.3", answer, *words)
    assert not any(word in feedback.message for word in NO_DIRECTION), feedback.message


def test_wrong_detectors_are_told_which_tools_to_try():
    feedback = refused("00.3", {**RIGHT, "opset_5": "check_model"}, "opset_5")
    for tool in ("onnx.checker.check_model", "full_check=True", "ort.InferenceSession"):
        assert tool in feedback.message, feedback.message
    assert "output_renamed" not in feedback.message and "W_shape_5x3" not in feedback.message
