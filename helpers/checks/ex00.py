"""Checks for the exercises of notebook 00 (inside an .onnx file)."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from helpers.checks._common import load_model, require_callable, require_keys, test_images
from helpers.checks._common import Wrong


def check_gemm_model(answer):
    import onnx
    from onnx import helper, numpy_helper

    from helpers.checks._common import session

    model = load_model(answer)
    ops = [n.op_type for n in model.graph.node]
    if ops.count("Gemm") != 1 or "MatMul" in ops or "Add" in ops:
        raise Wrong(f"expected one Gemm (and a Relu), no MatMul or Add; your nodes are {ops}")
    if len(model.graph.input) != 1:
        raise Wrong(f"expected one graph input x, found {[i.name for i in model.graph.input]}")
    gemm = next(n for n in model.graph.node if n.op_type == "Gemm")
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    if gemm.input[1] not in inits or (len(gemm.input) > 2 and gemm.input[2] not in inits):
        raise Wrong("Gemm's B and C inputs should be the initializers W and b")
    attrs = {a.name: helper.get_attribute_value(a) for a in gemm.attribute}
    W = inits[gemm.input[1]]
    first, features = model.graph.input[0].type.tensor_type.shape.dim[:2]
    if first.dim_value:
        raise Wrong(f"the batch dimension should stay dynamic (a name like 'batch'), it is fixed to {first.dim_value}")
    B = W.T if attrs.get("transB") else W
    if W.ndim == 2 and B.shape[0] != features.dim_value:
        fix = "drop transB=1 (this W is stored [in, out])" if attrs.get("transB") else \
            "set transB=1 (this W is stored [out, in])"
        raise Wrong(f"Gemm computes A @ B (A @ B.T with transB=1): with W {list(W.shape)} and "
                    f"transB={attrs.get('transB', 0)}, B is {list(B.shape)} but x has {features.dim_value} features; "
                    f"{fix}")
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:  # ValidationError or InferenceError, with the checker's own words
        raise Wrong(f"onnx.checker refuses the model: {err}") from err
    b = inits[gemm.input[2]] if len(gemm.input) > 2 else 0.0
    x = np.random.default_rng(0).standard_normal((5, features.dim_value)).astype(np.float32)
    got = session(model.SerializeToString()).run(None, {model.graph.input[0].name: x})[0]
    want = np.maximum(x @ B + b, 0)  # what the exercise asks, whatever the attributes say
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        raise Wrong(f"the model runs but does not compute relu(x @ W + b): Gemm computes alpha * (A @ B) + beta * C, "
                    f"and yours has alpha={attrs.get('alpha', 1.0)}, beta={attrs.get('beta', 1.0)}, "
                    f"transA={attrs.get('transA', 0)}; leave them at their defaults")
    return [f"nodes {ops}, {len(model.SerializeToString())} bytes", "ONNX Runtime agrees with relu(x @ W + b)"]


class _Failed(Exception):
    """The learner's interpreter raised."""


class _RuntimeCalled(Exception):
    """Raised inside the learner's interpreter when it calls a runtime instead of numpy."""


@contextmanager
def _runtimes_forbidden():
    """While active, creating or running an ONNX Runtime session or a reference evaluator raises _RuntimeCalled.

    The classes are patched in place (so names the learner imported earlier are caught too) and restored after.
    """
    import onnxruntime
    from onnx.reference import ReferenceEvaluator
    from onnxruntime.capi.onnxruntime_inference_collection import Session

    def forbid(what):
        def refuse(*args, **kwargs):
            raise _RuntimeCalled(what)
        return refuse

    patches = [(onnxruntime.InferenceSession, "__init__", "ONNX Runtime"),
               (Session, "run", "ONNX Runtime"), (Session, "run_with_ort_values", "ONNX Runtime"),
               (ReferenceEvaluator, "__init__", "the reference evaluator"),
               (ReferenceEvaluator, "run", "the reference evaluator")]
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in patches]
    try:
        for cls, name, what in patches:
            setattr(cls, name, forbid(what))
        yield
    finally:
        for cls, name, original in saved:
            setattr(cls, name, original)


def _interpreter_models():
    """The exported MLP, and the same MLP with its second Gemm's weight stored [in, out] and transB=0."""
    import onnx
    from onnx import helper, numpy_helper

    from helpers.notebooks import require_artifact

    exported = onnx.load(require_artifact("mnist_mlp_pytorch.onnx"))
    variant = onnx.ModelProto()
    variant.CopyFrom(exported)
    gemm = [n for n in variant.graph.node if n.op_type == "Gemm"][1]
    init = next(i for i in variant.graph.initializer if i.name == gemm.input[1])
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).T.copy(), init.name))
    for attr in gemm.attribute:
        if attr.name == "transB":
            attr.CopyFrom(helper.make_attribute("transB", 0))
    return {"the exported MLP (every Gemm has transB=1)": exported,
            "the same MLP with one Gemm's weight stored [in, out] and transB=0": variant}


def _truncated(model, node_index):
    """``model`` with its output moved to the first output of node ``node_index``."""
    import onnx
    from onnx import TensorProto, helper

    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    del cut.graph.node[node_index + 1:]
    used = {name for node in cut.graph.node for name in node.input}
    kept = [init for init in cut.graph.initializer if init.name in used]  # ONNX Runtime warns about the others
    del cut.graph.initializer[:]
    cut.graph.initializer.extend(kept)
    del cut.graph.output[:]
    cut.graph.output.append(helper.make_tensor_value_info(cut.graph.node[node_index].output[0], TensorProto.FLOAT,
                                                          None))
    return cut


def _interpret(answer, model, images):
    """The learner's logits (an array), with runtimes forbidden; a Wrong that says why when there are none."""
    try:
        with _runtimes_forbidden():
            return np.asarray(answer(model, images))
    except _RuntimeCalled as used:
        raise Wrong(f"your interpreter calls {used}: the exercise asks for numpy only "
                    "(walk model.graph.node and compute each operator yourself)") from None
    except Exception as err:  # whatever the learner's code raises
        raise _Failed(f"{type(err).__name__}: {str(err)[:200]}") from err


def _first_wrong_node(answer, model, images) -> str:
    """'node 4 (Relu)': the first node whose output the interpreter computes wrongly, by cutting the graph."""
    from helpers.checks._common import session

    for index, node in enumerate(model.graph.node):
        cut = _truncated(model, index)
        want = session(cut.SerializeToString()).run(None, {"image": images})[0]
        try:
            got = _interpret(answer, cut, images)
        except _Failed as failed:
            return f"node {index} ({node.op_type}), which raises {failed}"
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            return f"node {index} ({node.op_type})"
    return "no single node (each node's output is right on its own)"


def _gemm_hint(where: str) -> str:
    return " (does your Gemm follow its transB attribute: B.T when transB=1, B as stored when 0?)" \
        if "(Gemm)" in where else ""


def check_interpreter(answer):
    from helpers.checks._common import session

    require_callable(answer, "interpret(model, image)")
    images, _ = test_images(8)
    details = []
    for label, model in _interpreter_models().items():
        want = session(model.SerializeToString()).run(["logits"], {"image": images})[0]
        try:
            got = _interpret(answer, model, images)
        except _Failed:
            where = _first_wrong_node(answer, model, images)
            raise Wrong(f"on {label}, your interpreter first goes wrong at {where}{_gemm_hint(where)}") from None
        if got.shape != want.shape:
            raise Wrong(f"on {label}: expected logits of shape {want.shape}, got {got.shape}")
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            where = _first_wrong_node(answer, model, images)
            raise Wrong(f"on {label}, the logits differ from ONNX Runtime's by up to {np.abs(got - want).max():.3g}; "
                        f"your interpreter first goes wrong at {where}{_gemm_hint(where)}")
        details.append(f"{label}: matches ONNX Runtime on 8 test images (max |diff| {np.abs(got - want).max():.1e})")
    return details + ["no runtime was called: numpy only"]


BREAKAGES = ("output_renamed", "opset_5", "W_shape_5x3")
DETECTORS = ("check_model", "full_check", "InferenceSession", "nothing")


def _tiny_model():
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    W = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xW"]), helper.make_node("Add", ["xW", "b"], ["xW_plus_b"]),
         helper.make_node("Relu", ["xW_plus_b"], ["y"])],
        "relu_affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def broken_models() -> dict:
    """The three breakages of exercise 00.3, applied to the notebook's tiny model."""
    from onnx import helper, numpy_helper

    out = {}
    m = _tiny_model()
    m.graph.output[0].name = "y_renamed"
    out["output_renamed"] = m
    m = _tiny_model()
    del m.opset_import[:]
    m.opset_import.append(helper.make_opsetid("", 5))
    out["opset_5"] = m
    m = _tiny_model()
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones((5, 3), np.float32), "W"))
    out["W_shape_5x3"] = m
    return out


def first_detector(model) -> str:
    """Which of check_model, full_check, InferenceSession notices the problem first."""
    import onnx
    import onnxruntime as ort

    for name, probe in (("check_model", lambda: onnx.checker.check_model(model)),
                        ("full_check", lambda: onnx.checker.check_model(model, full_check=True)),
                        ("InferenceSession", lambda: ort.InferenceSession(model.SerializeToString(),
                                                                          providers=["CPUExecutionProvider"]))):
        try:
            probe()
        except Exception:  # each tool raises its own exception types; any of them means "noticed"
            return name
    return "nothing"


def check_detectors(answer):
    require_keys(answer, BREAKAGES, "like {'output_renamed': 'check_model', ...}")
    bad = {k: v for k, v in answer.items() if v not in DETECTORS}
    if bad:
        raise Wrong(f"answers must be one of {list(DETECTORS)}; got {bad}")
    truth = {k: first_detector(m) for k, m in broken_models().items()}
    wrong = []
    for k in BREAKAGES:
        said, right = DETECTORS.index(answer[k]), DETECTORS.index(truth[k])
        if said < right:
            wrong.append(f"{k}: {answer[k]} accepts this model (try it)")
        elif said > right:
            wrong.append(f"{k}: a tool earlier in the order than {answer[k]} already notices it")
    if wrong:
        raise Wrong("not quite; try each tool in order on each broken model. " + "; ".join(wrong))
    return [f"{k}: {truth[k]}" for k in BREAKAGES]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "00.1": check_gemm_model,
    "00.2": check_interpreter,
    "00.3": check_detectors,
}
