"""Checks for the exercises of notebook 00 (inside an .onnx file)."""
from __future__ import annotations

import numpy as np

from helpers.checks._common import load_model, require_callable, require_keys, test_images
from helpers.exercises import Wrong


def _gemm(a, b, c, alpha=1.0, beta=1.0, transA=0, transB=0):
    a = a.T if transA else a
    b = b.T if transB else b
    return alpha * (a @ b) + beta * c


def check_gemm_model(answer):
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    model = load_model(answer)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:
        raise Wrong(f"onnx.checker refuses the model: {err}") from err
    ops = [n.op_type for n in model.graph.node]
    if ops.count("Gemm") != 1 or "MatMul" in ops or "Add" in ops:
        raise Wrong(f"expected one Gemm (and a Relu), no MatMul or Add; your nodes are {ops}")
    gemm = next(n for n in model.graph.node if n.op_type == "Gemm")
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    if len(model.graph.input) != 1:
        raise Wrong(f"expected one graph input x, found {[i.name for i in model.graph.input]}")
    if gemm.input[1] not in inits or (len(gemm.input) > 2 and gemm.input[2] not in inits):
        raise Wrong("Gemm's B and C inputs should be the initializers W and b")
    attrs = {a.name: helper.get_attribute_value(a) for a in gemm.attribute}
    W = inits[gemm.input[1]]
    b = inits[gemm.input[2]] if len(gemm.input) > 2 else 0.0
    in_dim = model.graph.input[0].type.tensor_type.shape.dim
    first = in_dim[0]
    if first.dim_value:
        raise Wrong(f"the batch dimension should stay dynamic (a name like 'batch'), it is fixed to {first.dim_value}")
    features = in_dim[1].dim_value
    x = np.random.default_rng(0).standard_normal((5, features)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {model.graph.input[0].name: x})[0]
    want = np.maximum(_gemm(x, W, b, **{k: v for k, v in attrs.items() if k in ("alpha", "beta", "transA", "transB")}), 0)
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        raise Wrong("the model runs but does not compute relu(x @ W + b); check Gemm's transB/alpha/beta")
    return [f"nodes {ops}, {len(model.SerializeToString())} bytes", "ONNX Runtime agrees with relu(x @ W + b)"]


def check_interpreter(answer):
    import onnx
    import onnxruntime as ort

    from helpers.notebooks import require_artifact

    require_callable(answer, "interpret(model, image)")
    path = require_artifact("mnist_mlp_pytorch.onnx")
    model = onnx.load(path)
    images, _ = test_images(8)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["logits"], {"image": images})[0]
    try:
        got = np.asarray(answer(model, images))
    except Exception as err:
        raise Wrong(f"your interpreter raised {type(err).__name__}: {err}") from err
    if got.shape != want.shape:
        raise Wrong(f"expected logits of shape {want.shape}, got {got.shape}")
    if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        raise Wrong(f"logits differ from ONNX Runtime by up to {np.abs(got - want).max():.3g} (tolerance 1e-4)")
    return f"matches ONNX Runtime on 8 test images (max |diff| {np.abs(got - want).max():.1e})"


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
    wrong = [f"{k}: you said {answer[k]!r}" for k in BREAKAGES if answer[k] != truth[k]]
    if wrong:
        raise Wrong("not quite; try each tool in order on each broken model. Wrong: " + "; ".join(wrong))
    return [f"{k}: {truth[k]}" for k in BREAKAGES]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "00.1": check_gemm_model,
    "00.2": check_interpreter,
    "00.3": check_detectors,
}
