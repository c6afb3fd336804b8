"""Checks for the exercises of notebook 02 (Keras export with tf2onnx).

The checks only need onnx, onnxruntime and numpy: they judge the file, not how it was made.
"""
from __future__ import annotations

import functools

import numpy as np

from helpers.checks._common import as_model_path, dims, load_model, reference_logits, session as _session, test_images
from helpers.checks._common import Wrong
from helpers.predict import softmax as _softmax

_reference_logits = functools.partial(reference_logits, "mnist_mlp_keras.onnx")  # the notebook's own file

TOLERANCE = dict(rtol=1e-4, atol=1e-4)  # notebook 02's tolerance for ORT against Keras


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
    want = _reference_logits(images)
    if not np.allclose(logits, want, **TOLERANCE):
        raise Wrong(f"expected the logits of mnist_mlp_keras.onnx (rtol/atol 1e-4), got a max difference of "
                    f"{np.abs(logits - want).max():.3g}; did you export the trained `model` of section 1?")
    try:
        session.run(None, {name: images[:7]})
    except Exception as err:  # onnxruntime raises its InvalidArgument type here
        message = str(err).splitlines()[0][:160]
    else:
        raise Wrong("a batch of 7 ran, so the batch dimension is not fixed to 32")
    return [f"input {name!r} fixed to [32, 1, 28, 28]; a batch of 32 gives logits (32, 10)",
            f"a batch of 7 fails: {message}",
            "10,000 images at once fail the same way: callers must split into batches of exactly 32 (and pad the last)"]


def check_temperature(answer):
    path = as_model_path(answer)
    session = _session(path)
    inputs = {i.name: i for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    if sorted(inputs) != ["image", "temperature"]:
        raise Wrong(f"expected two inputs named 'image' and 'temperature' (the TensorSpecs' names), got {sorted(inputs)}")
    if sorted(outputs) != ["logits", "probabilities"]:
        hint = ": return a dict {'logits': ..., 'probabilities': ...}, its keys name the outputs" if any(
            ":" in name for name in outputs) else ""
        raise Wrong(f"expected two outputs named 'logits' and 'probabilities', got {outputs}{hint}")
    image, temperature = inputs["image"], inputs["temperature"]
    if image.type != "tensor(float)" or len(image.shape) != 4 or image.shape[1:] != [1, 28, 28] or isinstance(
            image.shape[0], int):
        raise Wrong(f"expected 'image' as in the contract, float32 [batch, 1, 28, 28] with a dynamic batch, got "
                    f"{image.type} {image.shape}")
    if temperature.type != "tensor(float)" or temperature.shape != []:
        raise Wrong(f"expected 'temperature' to be one float32 number, shape [] (tf.TensorSpec((), tf.float32)), "
                    f"got {temperature.type} {temperature.shape}")
    images, _ = test_images(1000)
    want_logits = _reference_logits(images)
    for t in (0.5, 1.0, 3.0):
        try:
            got = dict(zip(outputs, session.run(outputs, {"image": images, "temperature": np.array(t, np.float32)})))
        except Exception as err:  # onnxruntime raises its own exception types (InvalidArgument, Fail, ...)
            raise Wrong(f"expected the file to run on 1000 test images at temperature {t}, got "
                        f"{type(err).__name__}: {err}") from err
        if not np.allclose(got["logits"], want_logits, **TOLERANCE):
            raise Wrong(f"expected 'logits' to be the logits of mnist_mlp_keras.onnx, got a max difference of "
                        f"{np.abs(got['logits'] - want_logits).max():.3g}; did you export the trained `model`?")
        probabilities = got["probabilities"]
        if np.allclose(probabilities, _softmax(want_logits / t), atol=1e-5):
            continue
        if t != 1.0 and np.allclose(probabilities, _softmax(want_logits * t), atol=1e-5):
            raise Wrong(f"at temperature {t} your probabilities are softmax(logits * {t}): divide the logits by the "
                        "temperature instead")
        if t != 1.0 and np.allclose(probabilities, _softmax(want_logits), atol=1e-5):
            raise Wrong(f"temperature {t} changes nothing: the probabilities are softmax(logits); divide the logits "
                        "by the temperature before the softmax")
        if not np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-4):
            raise Wrong(f"expected probabilities that sum to 1 for each image, got sums from "
                        f"{probabilities.sum(axis=1).min():.3g} to {probabilities.sum(axis=1).max():.3g}: a softmax "
                        "over the 10 classes")
        raise Wrong(f"at temperature {t} expected softmax(logits / {t}), got a max difference of "
                    f"{np.abs(probabilities - _softmax(want_logits / t)).max():.3g}")
    return ["two inputs ('image', a scalar 'temperature') and two named outputs: one signature, one dict",
            "'probabilities' equals softmax(logits / temperature) at temperatures 0.5, 1 and 3",
            "dividing by a positive number keeps the order of the logits: the predicted digit never changes"]


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
    "02.2": check_temperature,
    "02.3": check_uint8_input,
}
