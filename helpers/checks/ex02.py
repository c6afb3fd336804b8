"""Checks for the exercises of notebook 02 (Keras export with tf2onnx).

The checks only need onnx, onnxruntime and numpy: they judge the file, not how it was made.
"""
from __future__ import annotations

import numpy as np

from helpers.checks._common import as_model_path, dims, load_model, session as _session, test_images
from helpers.exercises import Wrong

TOLERANCE = dict(rtol=1e-4, atol=1e-4)  # notebook 02's tolerance for ORT against Keras



def _reference_logits(images):
    """Logits of the notebook's own file, artifacts/mnist_mlp_keras.onnx, on ``images``."""
    from helpers.notebooks import require_artifact

    reference = _session(require_artifact("mnist_mlp_keras.onnx"))
    return reference.run(["logits"], {"image": images})[0]


def check_fixed_batch(answer):
    path = as_model_path(answer)
    model = load_model(path)
    if len(model.graph.input) != 1:
        raise Wrong(f"expected one graph input, found {[i.name for i in model.graph.input]}")
    shape = dims(model.graph.input[0])
    if shape != [32, 1, 28, 28]:
        raise Wrong(f"expected the input shape [32, 1, 28, 28] (from the TensorSpec), got {shape}")
    session = _session(path)
    name = session.get_inputs()[0].name
    images, _ = test_images(32)
    (logits,) = session.run([session.get_outputs()[0].name], {name: images})
    if logits.shape != (32, 10):
        raise Wrong(f"expected logits of shape (32, 10) for a batch of 32, got {logits.shape}")
    try:
        session.run(None, {name: images[:7]})
    except Exception as err:  # onnxruntime raises its InvalidArgument type here
        message = str(err).splitlines()[0][:160]
    else:
        raise Wrong("a batch of 7 ran, so the batch dimension is not fixed to 32")
    return [f"input {name!r} fixed to [32, 1, 28, 28]; a batch of 32 gives logits (32, 10)",
            f"a batch of 7 fails: {message}",
            "10,000 images at once fail the same way: callers must split into batches of exactly 32 (and pad the last)"]


def _contract_problems(model) -> list[str]:
    """Differences between ``model``'s interface and the MNIST file contract."""
    problems = []
    inputs = [(v.name, dims(v), v.type.tensor_type.elem_type) for v in model.graph.input]
    outputs = [(v.name, dims(v), v.type.tensor_type.elem_type) for v in model.graph.output]
    if inputs != [("image", ["batch", 1, 28, 28], 1)]:
        problems.append(f"expected input ('image', ['batch', 1, 28, 28], float32), got "
                        f"{[(n, d) for n, d, _ in inputs]}")
    if outputs != [("logits", ["batch", 10], 1)]:
        problems.append(f"expected output ('logits', ['batch', 10], float32), got "
                        f"{[(n, d) for n, d, _ in outputs]}")
    return problems


def check_keras_export(answer):
    import onnx

    from helpers.notebooks import require_artifact

    path = as_model_path(answer)
    model = load_model(path)
    problems = _contract_problems(model)
    if problems:
        raise Wrong("; ".join(problems) + " (rename the output on its node and on graph.output, and set "
                    "dim_param = 'batch' on both)")
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:  # onnx raises ValidationError / InferenceError
        raise Wrong(f"onnx.checker refuses the file: {err}") from err
    reference = onnx.load(require_artifact("mnist_mlp_keras.onnx"), load_external_data=False)
    want_meta = {p.key: p.value for p in reference.metadata_props}
    got_meta = {p.key: p.value for p in model.metadata_props}
    if got_meta.get("contract") != want_meta["contract"]:
        raise Wrong(f"expected metadata_props['contract'] to be the contract text of notebook 01, word for word; "
                    f"got {got_meta.get('contract')!r}")
    images, labels = test_images(1000)
    session = _session(path)
    (got,) = session.run(["logits"], {"image": images})
    want = _reference_logits(images)
    if not np.allclose(got, want, **TOLERANCE):
        raise Wrong(f"expected the same logits as mnist_mlp_keras.onnx (rtol/atol 1e-4), got a max difference of "
                    f"{np.abs(got - want).max():.3g}; did you export the trained `model` of section 1?")
    session.run(["logits"], {"image": images[:7]})  # any batch size
    producer = f"{model.producer_name} {model.producer_version}".strip()
    return [f"contract names, shared 'batch' dimension and metadata are right (producer {producer!r})",
            f"same logits as the from_function file on 1000 test images (max |diff| {np.abs(got - want).max():.1e}), "
            f"accuracy {(got.argmax(1) == labels).mean():.1%}",
            "both routes end in tf2onnx.convert.from_function; only the names needed fixing"]


def check_uint8_input(answer):
    from helpers.mnist import load_mnist

    path = as_model_path(answer)
    session = _session(path)
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1 or len(outputs) != 1:
        raise Wrong(f"expected one input and one output, got inputs {[i.name for i in inputs]} and outputs "
                    f"{[o.name for o in outputs]}")
    (spec,) = inputs
    if spec.type != "tensor(uint8)":
        raise Wrong(f"expected the input type tensor(uint8) (TensorSpec dtype tf.uint8), got {spec.type}")
    if len(spec.shape) != 3 or list(spec.shape[1:]) != [28, 28] or isinstance(spec.shape[0], int):
        raise Wrong(f"expected the input shape [batch, 28, 28] with a dynamic batch, got {spec.shape}")
    raw = load_mnist().x_test[:1000]
    try:
        (got,) = session.run(None, {spec.name: raw})
        session.run(None, {spec.name: raw[:7]})
    except Exception as err:  # onnxruntime raises its own exception types (InvalidArgument, Fail, ...)
        raise Wrong(f"expected the file to run on uint8 [N, 28, 28] images, got {type(err).__name__}: {err}") from err
    images, labels = test_images(1000)
    want = _reference_logits(images)
    if got.shape != want.shape:
        raise Wrong(f"expected logits of shape {want.shape}, got {got.shape}")
    if not np.allclose(got, want, **TOLERANCE):
        hint = ""
        scaled = _reference_logits(raw[:, None].astype(np.float32))
        if np.allclose(got, scaled, **TOLERANCE):
            hint = ": you feed 0..255 to the model; divide by 255 inside the function"
        raise Wrong(f"expected the logits of mnist_mlp_keras.onnx on uint8 / 255, got a max difference of "
                    f"{np.abs(got - want).max():.3g}{hint}")
    ops = sorted({n.op_type for n in load_model(path).graph.node})
    return [f"input {spec.name!r} {spec.shape} uint8; same logits as the float file on 1000 raw test images, "
            f"accuracy {(got.argmax(1) == labels).mean():.1%}",
            f"the Cast and the division are now part of the graph (operators {ops})",
            "callers no longer scale pixels, but the file no longer follows the series' contract: a trade-off"]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "02.1": check_fixed_batch,
    "02.2": check_keras_export,
    "02.3": check_uint8_input,
}
