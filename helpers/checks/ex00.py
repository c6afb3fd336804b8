"""Checks for the exercises of notebook 00 (inside an .onnx file)."""
from __future__ import annotations

from contextlib import ExitStack, contextmanager

import numpy as np

from helpers.checks._common import Wrong, dims, load_model, require_callable, require_keys, session, test_images


def given_weights():  # W and b as exercise 00.1's text gives them (W stored [out, in], PyTorch's layout)
    return np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5, np.array([0.1, -0.2, 0.3], np.float32)


def _first_row(got, want) -> int:  # the first row where they differ
    return int(np.argmax(~np.isclose(got, want, rtol=1e-4, atol=1e-5).all(axis=1)))


def check_classifier(answer):
    from onnx import numpy_helper

    from helpers.predict import softmax

    model, (W, b) = load_model(answer), given_weights()
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    names = [i.name for i in inputs], [o.name for o in model.graph.output]
    if names != (["x"], ["probabilities"]):
        raise Wrong(f"expected input 'x' and output 'probabilities', found inputs {names[0]} and outputs {names[1]}")
    if len(dims(inputs[0])) != 2 or dims(inputs[0])[1] != 4 or not isinstance(dims(inputs[0])[0], str):
        raise Wrong(f"expected x of shape [batch, 4], the batch dimension named (dynamic); found {dims(inputs[0])}")
    ops = [n.op_type for n in model.graph.node]
    if sorted(ops) != ["Gemm", "Softmax"]:
        raise Wrong(f"expected one Gemm (no MatMul or Add) and one Softmax for the probabilities; your nodes are {ops}")
    gemm = model.graph.node[ops.index("Gemm")]
    B, transB = inits.get(gemm.input[1], np.zeros(0)), {a.name: a.i for a in gemm.attribute}.get("transB", 0)
    if B.shape != W.shape or not transB:
        raise Wrong(f"Gemm computes A @ B (A @ B.T with transB=1): B should be the initializer W as given, stored "
                    f"[3, 4] ([out, in]), with transB=1; yours is {list(B.shape)} with transB={transB}")
    x = np.random.default_rng(2026).standard_normal((6, 4)).astype(np.float32)
    for n in (1, 6):  # fresh inputs, a batch of 1 and a batch of 6
        got, want = session(model.SerializeToString()).run(None, {"x": x[:n]})[0], softmax(x[:n] @ W.T + b)
        if got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6):
            continue
        if not np.allclose(B, W) or len(gemm.input) < 3 or not np.allclose(inits.get(gemm.input[2], 0), b):
            raise Wrong("the weights differ from the exercise's: store W and b with exactly the values given")
        if not np.allclose(got.sum(axis=-1), 1, atol=1e-5):
            raise Wrong(f"on fresh inputs (a batch of {n}), the output's rows do not each sum to 1: the Softmax "
                        "should normalise each row's 3 scores (axis=-1, the default)")
        raise Wrong(f"on fresh inputs (a batch of {n}), the output differs from softmax(x @ W.T + b), first in row "
                    f"{_first_row(got, want)}")
    return [f"nodes {ops}, W used as stored (transB=1)", "ONNX Runtime agrees with softmax(x @ W.T + b) on fresh x"]


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
        for cls, name in [(onnxruntime.InferenceSession, "__init__"), (Session, "run"),
                          (Session, "run_with_ort_values"), (Reference, "__init__"), (Reference, "run")]:
            what = "the reference evaluator" if cls is Reference else "ONNX Runtime"
            stack.enter_context(mock.patch.object(cls, name, side_effect=_RuntimeCalled(what)))
        yield


def _interpreter_models():
    """The exported MLP, and a variant: every tensor renamed, one Gemm's weight stored [in, out] with transB=0."""
    import onnx
    from onnx import numpy_helper

    from helpers.notebooks import require_artifact

    exported = onnx.load(require_artifact("mnist_mlp_pytorch.onnx"))
    variant = onnx.compose.add_prefix(exported, "renamed_")
    gemm = [n for n in variant.graph.node if n.op_type == "Gemm"][1]
    init = next(i for i in variant.graph.initializer if i.name == gemm.input[1])
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).T.copy(), init.name))
    next(a for a in gemm.attribute if a.name == "transB").i = 0
    return {"the exported MLP": exported,
            "a variant (tensors renamed, one Gemm with its weight stored [in, out] and transB=0)": variant}


def _truncated(model, k: int):  # the model cut after node k, whose first output becomes the graph output
    from onnx import TensorProto, helper

    used = {name for node in model.graph.node[:k + 1] for name in node.input}
    graph = helper.make_graph(
        model.graph.node[:k + 1], "cut", model.graph.input,
        [helper.make_tensor_value_info(model.graph.node[k].output[0], TensorProto.FLOAT, None)],
        [init for init in model.graph.initializer if init.name in used])  # ONNX Runtime warns about the others
    return helper.make_model(graph, ir_version=model.ir_version, opset_imports=model.opset_import)


def _interpret(answer, model, x):  # the learner's output with runtimes forbidden; what else it raises goes through
    try:
        with _runtimes_forbidden():
            return np.asarray(answer(model, x))
    except _RuntimeCalled as used:
        raise Wrong(f"your interpreter calls {used}: the exercise asks for numpy only") from None
    except KeyError as err:
        raise Wrong(f"your interpreter looks up {err} but never stored it (this model's input is "
                    f"{model.graph.input[0].name!r}): take every name from the model, not a fixed one") from None


def _where(answer, model, images) -> str:  # the first node it gets wrong, the graph cut after each in turn
    for k, node in enumerate(model.graph.node):
        cut = _truncated(model, k)
        want = session(cut.SerializeToString()).run(None, {model.graph.input[0].name: images})[0]
        try:
            got = _interpret(answer, cut, images)
        except Exception as err:  # whatever the learner's code raises
            return f"the first node it gets wrong is node {k} ({node.op_type}), which raises {type(err).__name__}"
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            return f"the first node that differs is node {k} ({node.op_type}){'' if k else ' (or what you return)'}"
    return "each node's output is right on its own: check what your interpreter returns"


def check_interpreter(answer):
    from helpers.predict import softmax

    require_callable(answer, "interpret(model, image)")
    images, _ = test_images(10_000)
    images = images[np.random.default_rng(2026).choice(len(images), 5, replace=False)]  # fresh digits
    for label, model in _interpreter_models().items():
        want = session(model.SerializeToString()).run(None, {model.graph.input[0].name: images})[0]
        try:
            got = _interpret(answer, model, images)
        except Wrong:
            raise
        except Exception as err:  # whatever the learner's code raises
            raise Wrong(f"on {label}, your interpreter raises {type(err).__name__}: {str(err)[:200]}; "
                        f"{_where(answer, model, images)}") from None
        if got.shape != want.shape:
            raise Wrong(f"on {label}: expected logits of shape {want.shape}, got {got.shape}")
        if np.allclose(got, softmax(want), atol=1e-5):
            raise Wrong("your interpreter returns probabilities (a softmax), but the model's output is the logits: "
                        "return the graph output's value as the last node computes it")
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            raise Wrong(f"on {label}, the logits differ from ONNX Runtime's, first for image "
                        f"{_first_row(got, want)}; {_where(answer, model, images)}")
    return ["the exported MLP and its variant: ONNX Runtime's logits on 5 fresh test digits, with numpy only"]


BREAKAGES = ("output_renamed", "opset_5", "W_shape_5x3")
DETECTORS = ("check_model", "full_check", "InferenceSession", "nothing")


def broken_models() -> dict:  # the three breakages of exercise 00.3, applied to the tiny relu(x @ W + b)
    from onnx import TensorProto, helper, numpy_helper

    def tiny(output="y", opset=20, W_shape=(4, 3)):
        nodes = [helper.make_node("MatMul", ["x", "W"], ["xW"]), helper.make_node("Add", ["xW", "b"], ["xW_plus_b"]),
                 helper.make_node("Relu", ["xW_plus_b"], ["y"])]
        io = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", n])
              for name, n in (("x", 4), (output, 3))]
        weights = [numpy_helper.from_array(np.ones(s, np.float32), name) for name, s in (("W", W_shape), ("b", 3))]
        graph = helper.make_graph(nodes, "relu_affine", io[:1], io[1:], weights)
        return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", opset)])

    return {"output_renamed": tiny(output="y_renamed"), "opset_5": tiny(opset=5), "W_shape_5x3": tiny(W_shape=(5, 3))}


def check_detectors(answer):
    require_keys(answer, BREAKAGES, "like {'output_renamed': 'check_model', ...}")
    if any(answer[k] not in DETECTORS for k in BREAKAGES):
        raise Wrong(f"answers must be one of {list(DETECTORS)}; got {({k: answer[k] for k in BREAKAGES})}")
    import onnx
    import onnxruntime as ort

    def first_detector(model) -> str:  # which of check_model, full_check, InferenceSession notices it first
        for name, probe in (("check_model", onnx.checker.check_model),
                            ("full_check", lambda m: onnx.checker.check_model(m, full_check=True)),
                            ("InferenceSession", lambda m: ort.InferenceSession(m.SerializeToString()))):
            try:
                probe(model)
            except Exception:  # each tool raises its own exception types; any of them means "noticed"
                return name
        return "nothing"

    truth = {k: first_detector(m) for k, m in broken_models().items()}
    wrong = [f"{k}: {answer[k]} accepts this model (try it)" if DETECTORS.index(answer[k]) < DETECTORS.index(truth[k])
             else f"{k}: a tool earlier in the order than {answer[k]} already notices it"
             for k in BREAKAGES if answer[k] != truth[k]]
    if wrong:
        raise Wrong("not quite; try each tool in order on each broken model. " + "; ".join(wrong))
    return [f"{k}: {truth[k]}" for k in BREAKAGES]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {"00.1": check_classifier, "00.2": check_interpreter, "00.3": check_detectors}
