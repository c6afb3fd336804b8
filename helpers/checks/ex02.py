"""Checks for the exercises of notebook 02 (Keras export with tf2onnx).

The answer is ``(keras_model, path)``. The file runs in ONNX Runtime on test digits and batch sizes the learner
never used, against the learner's Keras model called on the same images: the reference is computed another way.
"""
from __future__ import annotations

import numpy as np

from helpers.checks._common import Wrong, as_model_path, load_model, session as _session
from helpers.predict import softmax

TOLERANCE = dict(rtol=1e-3, atol=1e-3)  # float32 sums in another order; a wrong export differs far more


def _answer(answer):
    if not (isinstance(answer, tuple) and len(answer) == 2 and callable(answer[0])):
        raise Wrong(f"expected a pair (keras_model, path_of_your_onnx_file), got {type(answer).__name__}")
    return answer[0], as_model_path(answer[1]), _session(as_model_path(answer[1]))


def _interface(session, inputs: dict, outputs: list):
    """``inputs``: {name or None (any name): (element type, shape after the batch)}; ``outputs``: names."""
    got = session.get_inputs()
    if len(got) != len(inputs) or not {n for n in inputs if n} <= {i.name for i in got}:
        raise Wrong(f"expected {len(inputs)} input(s) {[n for n in inputs if n]}, got {[i.name for i in got]}")
    for name, (elem_type, shape) in inputs.items():
        spec = next(i for i in got if i.name == name) if name else got[0]
        if spec.type != elem_type:
            raise Wrong(f"expected the input {spec.name!r} of type {elem_type}, got {spec.type}")
        if shape == [] and spec.shape != []:
            raise Wrong(f"expected {spec.name!r} to be one number, shape [] (tf.TensorSpec(())), got {spec.shape}")
        if shape and spec.shape[1:] != shape:
            raise Wrong(f"expected the input {spec.name!r} of shape [batch, {', '.join(map(str, shape))}], "
                        f"got {spec.shape}")
        if shape and isinstance(spec.shape[0], int):
            raise Wrong(f"the input {spec.name!r} has a fixed batch of {spec.shape[0]}: use None as the first "
                        "dimension of its TensorSpec, so that any batch size runs")
    names = [o.name for o in session.get_outputs()]
    if sorted(names) != sorted(outputs):
        raise Wrong(f"expected the output(s) {outputs}, got {names}: return a dict from your tf.function, "
                    "its keys name the outputs")


def _batches(layout: str):
    """Test digits the learner did not pick, in batches of sizes 1, 7 and 93, in ``layout``."""
    from helpers.mnist import load_mnist

    digits = load_mnist().x_test[np.random.default_rng(2024).permutation(10_000)[:101]]
    pixels = {"uint8": digits, "nhwc": digits[..., None] / 255, "nchw": digits[:, None] / 255}[layout]
    return [pixels[a:b].astype(np.uint8 if layout == "uint8" else np.float32) for a, b in ((0, 1), (1, 8), (8, 101))]


def _keras(model, x):
    try:
        return np.asarray(model(x), dtype=np.float32)
    except Exception as err:  # whatever the learner's model raises
        raise Wrong(f"calling your Keras model on a {x.dtype} batch of shape {list(x.shape)} failed "
                    f"({type(err).__name__}): pass the model you exported") from err


def _run(session, feed: dict) -> dict:
    try:
        return dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    except Exception as err:  # onnxruntime raises its own types (InvalidArgument, Fail, ...)
        raise Wrong(f"the file fails on a batch of {len(next(iter(feed.values())))}: {type(err).__name__}: "
                    f"{str(err).splitlines()[0][:200]}") from err


def _same(got, want, what: str, hint: str = "export the model you pass, with nothing changed in between"):
    if got.shape != want.shape:
        raise Wrong(f"on {what}: expected shape {list(want.shape)}, got {list(got.shape)}")
    if not np.allclose(got, want, **TOLERANCE):
        image, column = np.argwhere(~np.isclose(got, want, **TOLERANCE))[0]
        raise Wrong(f"on {what} the file differs from your Keras model (first at image {image}, column "
                    f"{column}, by more than {TOLERANCE['atol']}): {hint}")


def check_channels_last_cnn(answer):
    from helpers.mnist import load_mnist

    model, path, session = _answer(answer)
    _interface(session, {"image": ("tensor(float)", [28, 28, 1])}, ["logits"])
    if "Conv" not in {node.op_type for node in load_model(path).graph.node}:
        raise Wrong("the graph has no Conv operator: the exercise asks for a CNN (a Conv2D layer)")
    for batch in _batches("nhwc"):
        _same(_run(session, {"image": batch})["logits"], _keras(model, batch), f"a batch of {len(batch)}")
    data = load_mnist()
    logits = _run(session, {"image": (data.x_test[..., None] / 255).astype(np.float32)})["logits"]
    accuracy = (logits.argmax(1) == data.y_test).mean()
    if accuracy < 0.9:
        raise Wrong(f"the file's test accuracy is {accuracy:.1%}, below 90 %: train the CNN (one epoch on "
                    "x_train.transpose(0, 2, 3, 1)) before exporting it")
    return [f"input 'image' [batch, 28, 28, 1], output 'logits'; test accuracy {accuracy:.1%}",
            "batches of 1, 7 and 93 unseen digits give your Keras model's logits",
            "tf2onnx wraps the Conv in Transposes: ONNX's Conv is channels-first, Keras's usually channels-last"]


def check_temperature(answer):
    model, _, session = _answer(answer)
    _interface(session, {"image": ("tensor(float)", [1, 28, 28]), "temperature": ("tensor(float)", [])},
               ["logits", "probabilities"])
    for t, batch in zip((0.25, 2.0, 7.0), _batches("nchw")):  # temperatures the exercise did not name
        got = _run(session, {"image": batch, "temperature": np.array(t, np.float32)})
        what = f"a batch of {len(batch)} at temperature {t}"
        _same(got["logits"], _keras(model, batch), what)
        probabilities, logits = got["probabilities"], got["logits"]
        if np.allclose(probabilities, softmax(logits / t), atol=1e-5):
            continue
        for wrong, mistake in ((logits * t, "softmax(logits * temperature): divide by the temperature instead"),
                               (logits, "softmax(logits): the temperature changes nothing; divide the logits "
                                        "by it before the softmax")):
            if np.allclose(probabilities, softmax(wrong), atol=1e-5):
                raise Wrong(f"on {what} your probabilities are {mistake}")
        if not np.allclose(probabilities.sum(axis=1), 1, atol=1e-4):
            raise Wrong(f"on {what} the probabilities of an image do not sum to 1: take the softmax over the "
                        "10 classes (the last axis)")
        _same(probabilities, softmax(logits / t), what, "'probabilities' is not softmax(logits / temperature)")
    return ["two inputs ('image', a scalar 'temperature') and two named outputs: one signature, one dict",
            "'probabilities' equals softmax(logits / temperature) at temperatures you did not try",
            "dividing by a positive number keeps the order of the logits: the predicted digit never changes"]


def check_uint8_input(answer):
    model, path, session = _answer(answer)
    _interface(session, {None: ("tensor(uint8)", [28, 28])}, ["logits"])
    name = session.get_inputs()[0].name
    for batch in _batches("uint8"):
        pixels = batch[:, None].astype(np.float32)
        got = _run(session, {name: batch})["logits"]
        if got.shape == (len(batch), 10) and np.allclose(got, _keras(model, pixels), **TOLERANCE):
            raise Wrong("the file feeds the pixels 0..255 to the model: divide by 255 inside the function")
        _same(got, _keras(model, pixels / 255), f"a batch of {len(batch)} raw uint8 digits")
    ops = sorted({node.op_type for node in load_model(path).graph.node})
    return [f"input {name!r} uint8 [batch, 28, 28]: your model's logits on unseen raw digits",
            f"the Cast and the division are now part of the graph (operators {ops})",
            "callers no longer scale pixels, but the file no longer follows the series' contract: a trade-off"]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "02.1": check_channels_last_cnn,
    "02.2": check_temperature,
    "02.3": check_uint8_input,
}
