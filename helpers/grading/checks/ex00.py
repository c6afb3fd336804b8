"""Checks for the exercises of notebook 00 (inside an .onnx file)."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

from helpers.grading.checks._common import (
    Wrong,
    dims,
    load_model,
    require_callable,
    require_keys,
    rng,
    session,
    test_images,
)


def given_weights():  # W and b as exercise 00.1's text gives them (W stored [out, in], PyTorch's layout)
    return np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5, np.array(
        [0.1, -0.2, 0.3], np.float32
    )


def _first_row(got, want) -> int:  # the first row where they differ
    return int(np.argmax(~np.isclose(got, want, rtol=1e-4, atol=1e-5).all(axis=1)))


def _type_name(value_info) -> str:
    from onnx import TensorProto

    elem_type = value_info.type.tensor_type.elem_type
    return {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64"}.get(
        elem_type, TensorProto.DataType.Name(elem_type) if elem_type else "no type"
    )


def _declared(value_info, what: str, width: int, batch=None) -> str:
    """``value_info`` must be declared float32 ``[batch, width]``, its batch a name (``batch``: that name)."""
    kind = f"{what} {value_info.name!r}"
    if _type_name(value_info) != "float32":
        raise Wrong(
            f"expected the {kind} declared float32 (TensorProto.FLOAT), found {_type_name(value_info)}"
        )
    if not value_info.type.tensor_type.HasField("shape"):
        raise Wrong(
            f"expected the {kind} declared with the shape [batch, {width}], found no shape at all"
        )
    found = dims(value_info)
    if len(found) != 2 or found[1] != width:
        raise Wrong(f"expected the {kind} of shape [batch, {width}], found {found}")
    if not isinstance(found[0], str) or not found[0]:
        raise Wrong(
            f"expected the {kind} of shape [batch, {width}], its batch dimension a name (dynamic: any "
            f"size); found {found}"
        )
    if batch is not None and found[0] != batch:
        raise Wrong(
            f"the {kind} declares its batch dimension {found[0]!r} and the input {batch!r}: the same "
            f"name says they are the same size, as in [batch, 4] -> [batch, {width}]"
        )
    return found[0]


def check_classifier(answer):
    import onnx
    from onnx import numpy_helper

    from helpers.preprocess import softmax

    model, (W, b) = load_model(answer), given_weights()
    inits = {i.name: i for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    names = [i.name for i in inputs], [o.name for o in model.graph.output]
    if names != (["x"], ["probabilities"]):
        raise Wrong(
            f"expected input 'x' and output 'probabilities', found inputs {names[0]} and outputs {names[1]}"
        )
    batch = _declared(inputs[0], "input", 4)
    _declared(model.graph.output[0], "output", 3, batch)
    for name, init in inits.items():
        if init.data_type != onnx.TensorProto.FLOAT:
            raise Wrong(
                f"the initializer {name!r} is stored as {onnx.TensorProto.DataType.Name(init.data_type)}; "
                "the task gives W and b as float32"
            )
    ops = [n.op_type for n in model.graph.node]
    if sorted(ops) != ["Gemm", "Softmax"]:
        raise Wrong(
            f"expected one Gemm (no MatMul or Add) and one Softmax for the probabilities; your nodes are {ops}"
        )
    gemm = model.graph.node[ops.index("Gemm")]
    arrays = {name: numpy_helper.to_array(init) for name, init in inits.items()}
    B, transB = (
        arrays.get(gemm.input[1], np.zeros(0)),
        {a.name: a.i for a in gemm.attribute}.get("transB", 0),
    )
    if B.shape != W.shape or not transB:
        raise Wrong(
            f"Gemm computes A @ B (A @ B.T with transB=1): B should be the initializer W as given, stored "
            f"[3, 4] ([out, in]), with transB=1; yours is {list(B.shape)} with transB={transB}"
        )
    try:
        onnx.checker.check_model(model, full_check=True)
    except (
        Exception
    ) as err:  # ValidationError, InferenceError: what the checker says is the feedback
        raise Wrong(
            f"onnx.checker.check_model(model, full_check=True) refuses the model: "
            f"{' '.join(str(err).split())[:300]}"
        ) from None
    if not np.allclose(B, W):
        raise Wrong(
            "the initializer Gemm reads as W differs from the exercise's W: store it with exactly the "
            "values given"
        )
    C = arrays.get(gemm.input[2]) if len(gemm.input) > 2 else None
    # b as given, [3], or as a row [1, 3]: Gemm adds either to each row of x @ W.T alike
    if C is None or C.shape not in ((3,), (1, 3)) or not np.allclose(C.reshape(3), b):
        raise Wrong(
            "Gemm's third input (C) should be the initializer b with exactly the values given, shape [3]; "
            + (
                "yours has none"
                if C is None
                else f"yours has the shape {list(C.shape)}"
                if C.shape not in ((3,), (1, 3))
                else "yours has other values"
            )
        )
    x = rng().standard_normal((6, 4)).astype(np.float32)  # fresh inputs, new with each seed
    for n in (1, 6):  # fresh inputs, a batch of 1 and a batch of 6
        got, want = (
            session(model.SerializeToString()).run(None, {"x": x[:n]})[0],
            softmax(x[:n] @ W.T + b),
        )
        if got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6):
            continue
        if not np.allclose(got.sum(axis=-1), 1, atol=1e-5):
            raise Wrong(
                f"on fresh inputs (a batch of {n}), the output's rows do not each sum to 1: the Softmax "
                "should normalise each row's 3 scores (axis=-1, the default)"
            )
        raise Wrong(
            f"on fresh inputs (a batch of {n}), the output differs from softmax(x @ W.T + b), first in row "
            f"{_first_row(got, want)}"
        )
    return [
        f"input x float32 [{batch}, 4] -> output probabilities float32 [{batch}, 3]; check_model passes",
        f"nodes {ops}, W used as stored (transB=1)",
        "ONNX Runtime agrees with softmax(x @ W.T + b) on fresh x",
    ]


class _RuntimeCalled(Exception):
    """The learner's interpreter called a runtime instead of numpy."""


@contextmanager
def _runtimes_forbidden():
    """Meanwhile creating or running an ONNX Runtime session or a reference evaluator raises _RuntimeCalled."""
    from unittest import mock

    import onnxruntime
    from onnx.reference import ReferenceEvaluator as Reference
    from onnxruntime.capi.onnxruntime_inference_collection import Session

    with ExitStack() as stack:
        for cls, name in [
            (onnxruntime.InferenceSession, "__init__"),
            (Session, "run"),
            (Session, "run_with_ort_values"),
            (Reference, "__init__"),
            (Reference, "run"),
        ]:
            what = "the reference evaluator" if cls is Reference else "ONNX Runtime"
            stack.enter_context(mock.patch.object(cls, name, side_effect=_RuntimeCalled(what)))
        yield


def _perturbed(array, draw):  # the same shape, other values: a weight nobody can have memorised
    return (array * draw.uniform(0.8, 1.2, array.shape)).astype(array.dtype)


def _renamed_variant(exported, draw):
    """Every tensor renamed, the weights perturbed, one Gemm's weight stored [in, out] with transB=0."""
    import onnx
    from onnx import numpy_helper

    variant = onnx.compose.add_prefix(exported, "renamed_")
    for init in variant.graph.initializer:
        array = numpy_helper.to_array(init)
        if array.ndim == 2:  # the Gemm weights
            init.CopyFrom(numpy_helper.from_array(_perturbed(array, draw), init.name))
    gemm = [n for n in variant.graph.node if n.op_type == "Gemm"][1]
    init = next(i for i in variant.graph.initializer if i.name == gemm.input[1])
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).T.copy(), init.name))
    next(a for a in gemm.attribute if a.name == "transB").i = 0
    del variant.graph.value_info[
        :
    ]  # the exporter's shapes of the weights; shape inference finds the new ones
    return variant


def _reshaped_variant(exported, draw):
    """The MLP's five op types wired another way (Reshapes to two rows per image, transposed Gemms), weights moved."""
    from onnx import TensorProto, helper, numpy_helper

    by_op = {
        op: [node for node in exported.graph.node if node.op_type == op]
        for op in ("Sub", "Div", "Gemm")
    }
    weights = {i.name: numpy_helper.to_array(i) for i in exported.graph.initializer}
    (w1, b1), (w2, b2), (w3, b3) = [
        (weights[g.input[1]], weights[g.input[2]]) for g in by_op["Gemm"]
    ]
    mixing = np.eye(392, dtype=np.float32) + draw.normal(0, 0.05, (392, 392)).astype(np.float32)
    tensors = {
        "pixel_mean": weights[by_op["Sub"][0].input[1]],
        "pixel_std": weights[by_op["Div"][0].input[1]],
        "half_rows": np.array([-1, 392], np.int64),
        "whole_rows": np.array([-1, 784], np.int64),
        "mix.w": mixing,
        "mix.b": draw.normal(0, 0.1, 392).astype(np.float32),
        "fc1.w": _perturbed(w1, draw),
        "fc1.b": _perturbed(b1, draw)[:, None],
        "fc2.w": _perturbed(w2, draw),
        "fc2.b": _perturbed(b2, draw),
        "fc3.w": _perturbed(w3, draw),
        "fc3.b": _perturbed(b3, draw),
    }
    nodes = [
        helper.make_node("Sub", ["digits", "pixel_mean"], ["centred"]),
        helper.make_node("Div", ["centred", "pixel_std"], ["scaled"]),
        helper.make_node("Reshape", ["scaled", "half_rows"], ["halves"]),
        helper.make_node("Gemm", ["halves", "mix.w", "mix.b"], ["mixed"], transB=1),
        helper.make_node("Relu", ["mixed"], ["mixed_relu"]),
        helper.make_node("Reshape", ["mixed_relu", "whole_rows"], ["rows"]),
        helper.make_node("Gemm", ["fc1.w", "rows", "fc1.b"], ["h1_t"], transB=1),
        helper.make_node("Relu", ["h1_t"], ["a1_t"]),
        helper.make_node("Gemm", ["a1_t", "fc2.w", "fc2.b"], ["h2"], transA=1, transB=1),
        helper.make_node("Relu", ["h2"], ["a2"]),
        helper.make_node("Gemm", ["a2", "fc3.w", "fc3.b"], ["scores"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp_reshaped",
        [helper.make_tensor_value_info("digits", TensorProto.FLOAT, ["n", 1, 28, 28])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 10])],
        [numpy_helper.from_array(np.asarray(a), name) for name, a in tensors.items()],
    )
    return helper.make_model(
        graph, ir_version=exported.ir_version, opset_imports=exported.opset_import
    )


def _interpreter_models():
    """The exported MLP and two variants made from it without training (tests: every one passes check_model)."""
    import onnx

    from helpers.pipeline.artifacts import built_artifact

    exported = onnx.load(built_artifact("mnist_mlp_pytorch.onnx"))
    return {
        "the exported MLP": exported,
        "a variant (tensors renamed, weights changed, one Gemm with its weight stored [in, out] and transB=0)": _renamed_variant(
            exported, rng(1)
        ),
        "a variant (Reshape to [-1, 392] then [-1, 784], a square Gemm weight, a Gemm with transA=1)": _reshaped_variant(
            exported, rng(2)
        ),
    }


def _truncated(
    model, k: int
):  # the model cut after node k, whose first output becomes the graph output
    import onnx
    from onnx import helper

    name = model.graph.node[k].output[0]
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    output = (
        inferred[name]
        if name in inferred
        else next(o for o in model.graph.output if o.name == name)
    )
    used = {t for node in model.graph.node[: k + 1] for t in node.input}
    graph = helper.make_graph(
        model.graph.node[: k + 1],
        "cut",
        model.graph.input,
        [output],
        [init for init in model.graph.initializer if init.name in used],
    )  # ONNX Runtime warns about the others
    cut = helper.make_model(graph, ir_version=model.ir_version, opset_imports=model.opset_import)
    onnx.checker.check_model(
        cut, full_check=True
    )  # handed to the learner's code: it must be a valid model
    return cut


def _interpret(
    answer, model, x
):  # the learner's output with runtimes forbidden; what else it raises goes through
    try:
        with _runtimes_forbidden():
            return np.asarray(answer(model, x))
    except _RuntimeCalled as used:
        raise Wrong(f"your interpreter calls {used}: the exercise asks for numpy only") from None
    except KeyError as err:
        graph = model.graph
        names = {v.name for v in [*graph.input, *graph.initializer]} | {
            t for n in graph.node for t in n.output
        }
        if err.args and err.args[0] in names:
            raise Wrong(
                f"your interpreter looks up {err}, a tensor of this model, but never stored it: store each "
                "value under the name this model gives it, not a fixed one"
            ) from None
        raise Wrong(
            f"your interpreter looks up {err}, a name this model does not have (its input is "
            f"{graph.input[0].name!r}, its output {graph.output[0].name!r}): take every name from the "
            "model, not a fixed one"
        ) from None


def _where(
    answer, model, images
) -> str:  # the first node it gets wrong, the graph cut after each in turn
    for k, node in enumerate(model.graph.node):
        cut = _truncated(model, k)
        want = session(cut.SerializeToString()).run(None, {model.graph.input[0].name: images})[0]
        try:
            got = _interpret(answer, cut, images)
        except Wrong:
            raise
        except Exception as err:  # whatever the learner's code raises
            return f"the first node it gets wrong is node {k} ({node.op_type}), which raises {type(err).__name__}"
        if got.shape != want.shape:
            return (
                f"the first node that differs is node {k} ({node.op_type}): its output has the shape "
                f"{list(got.shape)} instead of {list(want.shape)}"
            )
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            return f"the first node that differs is node {k} ({node.op_type}){'' if k else ' (or what you return)'}"
    return "each node's output is right on its own: check what your interpreter returns"


def check_interpreter(answer):
    from helpers.preprocess import softmax

    require_callable(answer, "interpret(model, image)")
    images, _ = test_images(10_000)
    picked = rng(3).choice(len(images), 7, replace=False)  # fresh digits, two batch sizes
    for (label, model), batch in zip(
        _interpreter_models().items(), (images[picked[:5]], images[picked[5:6]], images[picked[:7]])
    ):
        want = session(model.SerializeToString()).run(None, {model.graph.input[0].name: batch})[0]
        try:
            got = _interpret(answer, model, batch)
        except Wrong:
            raise
        except Exception as err:  # whatever the learner's code raises
            raise Wrong(
                f"on {label}, your interpreter raises {type(err).__name__}: {str(err)[:200]}; "
                f"{_where(answer, model, batch)}"
            ) from None
        if got.shape == want.shape and np.allclose(got, softmax(want), atol=1e-5):
            raise Wrong(
                "your interpreter returns probabilities (a softmax), but the model's output is the logits: "
                "return the graph output's value as the last node computes it"
            )
        if got.shape != want.shape:
            raise Wrong(
                f"on {label} and a batch of {len(batch)}: expected logits of shape {list(want.shape)}, got "
                f"{list(got.shape)}; {_where(answer, model, batch)}"
            )
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            raise Wrong(
                f"on {label}, the logits differ from ONNX Runtime's, first for image "
                f"{_first_row(got, want)}; {_where(answer, model, batch)}"
            )
    return [
        "the exported MLP and two variants (other names, weights, layouts and Reshape targets): ONNX Runtime's "
        "logits on fresh test digits, with numpy only"
    ]


BREAKAGES = ("output_renamed", "opset_5", "W_shape_5x3")
TOOLS = (
    "onnx.checker.check_model, then check_model(..., full_check=True), then ort.InferenceSession"
)


def broken_models() -> (
    dict
):  # the three breakages of exercise 00.3, applied to the tiny relu(x @ W + b)
    from onnx import TensorProto, helper, numpy_helper

    def tiny(output="y", opset=20, W_shape=(4, 3)):
        nodes = [
            helper.make_node("MatMul", ["x", "W"], ["xW"]),
            helper.make_node("Add", ["xW", "b"], ["xW_plus_b"]),
            helper.make_node("Relu", ["xW_plus_b"], ["y"]),
        ]
        io = [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", n])
            for name, n in (("x", 4), (output, 3))
        ]
        weights = [
            numpy_helper.from_array(np.ones(s, np.float32), name)
            for name, s in (("W", W_shape), ("b", 3))
        ]
        graph = helper.make_graph(nodes, "relu_affine", io[:1], io[1:], weights)
        return helper.make_model(
            graph, ir_version=10, opset_imports=[helper.make_opsetid("", opset)]
        )

    return {
        "output_renamed": tiny(output="y_renamed"),
        "opset_5": tiny(opset=5),
        "W_shape_5x3": tiny(W_shape=(5, 3)),
    }


def detector_of(value) -> str | None:
    """check_model, full_check, InferenceSession or nothing for an answer spelt as the task or tool does, else None."""
    import functools

    import onnx
    import onnxruntime as ort

    if isinstance(value, functools.partial) and value.func is onnx.checker.check_model:
        return "full_check" if value.keywords.get("full_check") else "check_model"
    if not isinstance(value, str):
        tools = {"check_model": onnx.checker.check_model, "InferenceSession": ort.InferenceSession}
        return next((name for name, tool in tools.items() if value is tool), None)
    text = "".join(value.split()).lower()
    spelt = {
        "nothing": text == "nothing",
        "InferenceSession": "inferencesession" in text,  # the first that holds
        "full_check": "full_check" in text and "full_check=false" not in text,
        "check_model": "check_model" in text,
    }
    return next((name for name, holds in spelt.items() if holds), None)


def check_detectors(answer):
    require_keys(answer, BREAKAGES, "like {'output_renamed': 'onnx.checker.check_model', ...}")
    unknown = {k: answer[k] for k in BREAKAGES if detector_of(answer[k]) is None}
    if unknown:
        raise Wrong(
            f"each answer names one tool: 'onnx.checker.check_model', 'check_model(..., full_check=True)', "
            f"'ort.InferenceSession', or 'nothing'; these are none of them: {unknown}"
        )
    import onnx
    import onnxruntime as ort

    def first_detector(
        model,
    ) -> str:  # which of check_model, full_check, InferenceSession notices it first
        for name, probe in (
            ("check_model", onnx.checker.check_model),
            ("full_check", lambda m: onnx.checker.check_model(m, full_check=True)),
            ("InferenceSession", lambda m: ort.InferenceSession(m.SerializeToString(), quiet)),
        ):
            try:
                probe(model)
            except (
                Exception
            ):  # each tool raises its own exception types; any of them means "noticed"
                return name
        return "nothing"

    quiet = ort.SessionOptions()
    quiet.log_severity_level = (
        3  # ONNX Runtime's warnings about opset 5 are not the learner's concern here
    )
    truth = {k: first_detector(m) for k, m in broken_models().items()}
    wrong = [k for k in BREAKAGES if detector_of(answer[k]) != truth[k]]
    if wrong:
        raise Wrong(
            f"not yet right for {', '.join(wrong)} ({len(BREAKAGES) - len(wrong)} of {len(BREAKAGES)} "
            f"right). Build each of these broken models and run {TOOLS} on it, in that order: the first "
            "that raises an error is the one that notices"
        )
    return [f"{k}: {truth[k]}" for k in BREAKAGES]


CHECKS = {"00.1": check_classifier, "00.2": check_interpreter, "00.3": check_detectors}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)


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
