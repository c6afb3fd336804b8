"""Checks for notebook 02's exercises: each file runs in ONNX Runtime on unseen digits against the Keras model."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

import numpy as np

from helpers.grading.checks._common import Wrong, as_model_path, load_model, rng
from helpers.grading.checks._common import session as _session
from helpers.preprocess import softmax

TOLERANCE = dict(
    rtol=1e-3, atol=1e-3
)  # float32 sums in another order; a wrong export differs far more
ACCURACY = 0.9  # 02.1's text: "at least 90 %"; for 02.2 and 02.3, the floor of a trained model
TRAINING_DIGITS = 60_000  # 02.1: all the training digits, in another order and relabelled
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # notebook 01's #@save constants (02.3: normalised twice)


def _answer(answer):
    if not (isinstance(answer, tuple) and len(answer) == 2 and callable(answer[0])):
        raise Wrong(
            f"expected a pair (keras_model, path_of_your_onnx_file), got {type(answer).__name__}"
        )
    return answer[0], as_model_path(answer[1]), _session(as_model_path(answer[1]))


def _interface(session, inputs: dict, outputs: list):
    """``inputs``: {name or None (any name): (element type, shape after the batch)}; ``outputs``: names."""
    got = session.get_inputs()
    if len(got) != len(inputs) or not {n for n in inputs if n} <= {i.name for i in got}:
        raise Wrong(
            f"expected {len(inputs)} input(s) {[n for n in inputs if n]}, got {[i.name for i in got]}"
        )
    for name, (elem_type, shape) in inputs.items():
        spec = next(i for i in got if i.name == name) if name else got[0]
        if spec.type != elem_type:
            raise Wrong(f"expected the input {spec.name!r} of type {elem_type}, got {spec.type}")
        if shape == [] and spec.shape != []:
            raise Wrong(
                f"expected {spec.name!r} to be one number, shape [] (tf.TensorSpec(())), got {spec.shape}"
            )
        if shape and spec.shape[1:] != shape:
            raise Wrong(
                f"expected the input {spec.name!r} of shape [batch, {', '.join(map(str, shape))}], "
                f"got {spec.shape}"
            )
        if shape and isinstance(spec.shape[0], int):
            raise Wrong(
                f"the input {spec.name!r} has a fixed batch of {spec.shape[0]}: use None as the first "
                "dimension of its TensorSpec, so that any batch size runs"
            )
    names = [o.name for o in session.get_outputs()]
    if sorted(names) != sorted(outputs):
        raise Wrong(
            f"expected the output(s) {outputs}, got {names}: return a dict from your tf.function, "
            "its keys name the outputs"
        )
    for spec in session.get_outputs():
        if spec.type != "tensor(float)":
            raise Wrong(
                f"expected the output {spec.name!r} float32 (tensor(float)), got {spec.type}"
            )


def _test_digits(n: int, stream: int):
    """``n`` test digits picked with the check's seed (uint8 [n, 28, 28]) and their labels."""
    from helpers.data.mnist import load_mnist

    data = load_mnist()
    picked = rng(stream).permutation(len(data.x_test))[:n]
    return data.x_test[picked], data.y_test[picked].astype(np.int64)


def _batches(layout: str):
    """Test digits the learner did not pick, in batches of sizes 1, 7 and 93, in ``layout``."""
    digits, _ = _test_digits(101, stream=24)
    pixels = {"uint8": digits, "nhwc": digits[..., None] / 255, "nchw": digits[:, None] / 255}[
        layout
    ]
    return [
        pixels[a:b].astype(np.uint8 if layout == "uint8" else np.float32)
        for a, b in ((0, 1), (1, 8), (8, 101))
    ]


def _keras(model, x):
    try:
        return np.asarray(model(x), dtype=np.float32)
    except Exception as err:  # whatever the learner's model raises
        raise Wrong(
            f"calling your Keras model on a {x.dtype} batch of shape {list(x.shape)} failed "
            f"({type(err).__name__}): pass the model you exported"
        ) from err


def _run(session, feed: dict) -> dict:
    try:
        return dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    except Exception as err:  # onnxruntime raises its own types (InvalidArgument, Fail, ...)
        raise Wrong(
            f"the file fails on a batch of {len(next(iter(feed.values())))}: {type(err).__name__}: "
            f"{str(err).splitlines()[0][:200]}"
        ) from err


def _close(got, want) -> bool:
    return got.shape == want.shape and np.allclose(got, want, **TOLERANCE)


def _same(got, want, what: str, reference: str = "your Keras model on the same images"):
    """``got`` must be ``want``; otherwise say where they differ (and the shapes), not why."""
    if got.shape != want.shape:
        raise Wrong(f"on {what}: expected shape {list(want.shape)}, got {list(got.shape)}")
    if not np.allclose(got, want, **TOLERANCE):
        image, column = np.argwhere(~np.isclose(got, want, **TOLERANCE))[0]
        raise Wrong(
            f"on {what} the file differs from {reference} (first at image {image}, column {column}, by more "
            f"than {TOLERANCE['atol']})"
        )


def _not_probabilities(logits, what: str):
    if np.allclose(logits.sum(axis=1), 1, atol=1e-4) and (logits >= 0).all():
        raise Wrong(
            f"on {what} the file's 'logits' are probabilities (each row is in 0..1 and sums to 1): the "
            "output is the raw scores, with no softmax"
        )


def _trained(logits, labels, whose: str):
    accuracy = (logits.argmax(1) == labels).mean()
    if accuracy < ACCURACY:
        raise Wrong(
            f"{whose} classifies {accuracy:.1%} of {len(labels)} test digits right, below "
            f"{ACCURACY:.0%}: export the trained `model` of section 1 (untrained, a model gets about 10 %)"
        )
    return accuracy


# ------------------------------------------------------------------------------------------------ 02.1
def relabelling() -> np.ndarray:
    """A permutation of the ten classes moving every one (digit d is given the label relabelling()[d]); new
    with each seed."""
    draw = rng(31)
    while True:
        order = draw.permutation(10)
        if (order != np.arange(10)).all():
            return order


def training_data():
    """What 02.1's check gives ``train_cnn``: random training digits float32 [N, 1, 28, 28] in 0..1, relabelled."""
    from helpers.data.mnist import load_mnist

    data = load_mnist()
    picked = rng(30).choice(len(data.x_train), TRAINING_DIGITS, replace=False)
    return (
        (data.x_train[picked] / 255).astype(np.float32)[:, None],
        relabelling()[data.y_train[picked]].astype(data.y_train.dtype),
    )


def gate(accuracy: float) -> bool:
    """02.1's bound: "at least 90 %"."""
    return accuracy >= ACCURACY


def check_channels_last_cnn(answer):
    if not callable(answer) or hasattr(answer, "layers"):
        raise Wrong(
            f"expected your function train_cnn(x_train, y_train, path), which trains the CNN on the digits "
            f"it is given and exports it to path, got {type(answer).__name__}"
        )
    x_train, y_train = training_data()
    with tempfile.TemporaryDirectory(prefix="check_02_1_") as folder:
        path = Path(folder) / f"cnn_{rng(32).integers(10**6)}.onnx"  # a name it cannot guess
        try:
            cnn = answer(x_train, y_train, path)
        except Exception as err:  # whatever the learner's function raises
            raise Wrong(
                f"train_cnn(x_train, y_train, path) raised {type(err).__name__}: {str(err)[:300]} "
                f"(x_train float32 {list(x_train.shape)} in 0..1, y_train {y_train.dtype} "
                f"{list(y_train.shape)}, path a pathlib.Path)"
            ) from None
        if not Path(path).is_file():
            raise Wrong(
                f"train_cnn wrote no file at the path it was given ({path.name}): export to `path`"
            )
        if not callable(cnn):
            raise Wrong(
                f"expected train_cnn to return the trained Keras model, got {type(cnn).__name__}"
            )
        session = _session(path)
        _interface(session, {"image": ("tensor(float)", [28, 28, 1])}, ["logits"])
        if "Conv" not in {node.op_type for node in load_model(path).graph.node}:
            raise Wrong(
                "the graph has no Conv operator: the exercise asks for a CNN (a Conv2D layer)"
            )
        for batch in _batches("nhwc"):
            what = f"a batch of {len(batch)}"
            got = _run(session, {"image": batch})["logits"]
            _not_probabilities(got, what)
            _same(
                got,
                _keras(cnn, batch),
                what,
                "the Keras model your function returned, on the same images",
            )
        digits, labels = _test_digits(2000, stream=32)
        logits = _run(session, {"image": (digits[..., None] / 255).astype(np.float32)})["logits"]
    relabelled, probabilities = relabelling()[labels], softmax(logits)
    given, usual = (logits.argmax(1) == relabelled).mean(), (logits.argmax(1) == labels).mean()
    if usual >= 0.25:
        raise Wrong(
            f"on 2000 test digits the check held out, {usual:.0%} of the CNN's predictions are the digits' "
            f"usual labels and {given:.0%} the labels your function was given (the check relabels the "
            "classes): train on the x_train and y_train passed to it, and on nothing else"
        )
    rows = np.arange(len(labels))
    usual_probability = probabilities[rows, labels].mean()
    others = probabilities.copy()
    others[rows, labels] = others[rows, relabelled] = np.nan
    other_probability = np.nanmean(others)  # what each of the 8 other wrong labels gets, on average
    if usual_probability > 0.05 and usual_probability > 4 * other_probability:
        raise Wrong(
            f"on 2000 test digits the check held out, the CNN gives the digits' usual labels "
            f"{usual_probability:.0%} probability on average, the other wrong labels "
            f"{other_probability:.1%} each: the digits your function was given carry other labels (the "
            "check relabels the classes), so it also learned from digits it was not given: train on "
            "x_train and y_train only (no test digits)"
        )
    if not gate(given):
        raise Wrong(
            f"the CNN classifies {given:.1%} of 2000 held-out test digits right (by the labels it was "
            f"given), below {ACCURACY:.0%}: train it on x_train, y_train, in the layout the CNN takes"
        )
    return [
        f"input 'image' [batch, 28, 28, 1], output 'logits'; {given:.1%} right on digits it never saw",
        "trained on the digits it was given, and only on them (their labels were relabelled by the check)",
        "batches of 1, 7 and 93 unseen digits give your Keras model's logits",
        "tf2onnx wraps the Conv in Transposes: ONNX's Conv is channels-first, Keras's usually channels-last",
    ]


# ------------------------------------------------------------------------------------------------ 02.2
def check_temperature(answer):
    model, _, session = _answer(answer)
    _interface(
        session,
        {"image": ("tensor(float)", [1, 28, 28]), "temperature": ("tensor(float)", [])},
        ["logits", "probabilities"],
    )
    for t, batch in zip(
        (0.25, 2.0, 7.0), _batches("nchw")
    ):  # temperatures the exercise did not name
        got = _run(session, {"image": batch, "temperature": np.array(t, np.float32)})
        what = f"a batch of {len(batch)} at temperature {t}"
        probabilities, logits, want = got["probabilities"], got["logits"], _keras(model, batch)
        for wrong, seen in (
            (softmax(want), "probabilities (the softmax of your model's output)"),
            (want / t, "your model's output divided by the temperature"),
        ):
            if _close(logits, wrong):
                raise Wrong(
                    f"on {what} the file's 'logits' are {seen}: 'logits' is your model's output as it is"
                )
        _same(logits, want, what)
        if np.allclose(probabilities, softmax(logits / t), atol=1e-5):
            continue
        for wrong, mistake in (
            (logits * t, "softmax(logits * temperature): divide by the temperature instead"),
            (
                logits,
                "softmax(logits): the temperature changes nothing; divide the logits "
                "by it before the softmax",
            ),
        ):
            if np.allclose(probabilities, softmax(wrong), atol=1e-5):
                raise Wrong(f"on {what} your probabilities are {mistake}")
        if not np.allclose(probabilities.sum(axis=1), 1, atol=1e-4):
            raise Wrong(
                f"on {what} the probabilities of an image do not sum to 1: take the softmax over the "
                "10 classes (the last axis)"
            )
        _same(probabilities, softmax(logits / t), what, "softmax(logits / temperature)")
    digits, labels = _test_digits(2000, stream=33)
    feed = {
        "image": (digits[:, None] / 255).astype(np.float32),
        "temperature": np.array(1.0, np.float32),
    }
    accuracy = _trained(_run(session, feed)["logits"], labels, "your model (and the file)")
    return [
        "two inputs ('image', a scalar 'temperature') and two named outputs: one signature, one dict",
        "'probabilities' equals softmax(logits / temperature) at temperatures you did not try",
        f"a trained model: {accuracy:.1%} of 2000 test digits right",
        "dividing by a positive number keeps the order of the logits: the predicted digit never changes",
    ]


# ------------------------------------------------------------------------------------------------ 02.3
SLIPS = (  # what a file may feed the model instead of digits / 255 (then a channel axis), described as seen
    ("the pixels 0..255 as they are, not divided by 255", lambda d: d),
    ("the pixels divided by 256, not by 255", lambda d: d / 256),
    ("the digits transposed (rows and columns swapped)", lambda d: d.transpose(0, 2, 1) / 255),
    ("the digits inverted (255 - pixel: dark digits on white)", lambda d: (255 - d) / 255),
    (
        "the pixels already normalised with the training mean and std ((x / 255 - mean) / std), which your model "
        "then normalises again",
        lambda d: (d / 255 - MNIST_MEAN) / MNIST_STD,
    ),
)


def check_uint8_input(answer):
    model, path, session = _answer(answer)
    _interface(session, {None: ("tensor(uint8)", [28, 28])}, ["logits"])
    name = session.get_inputs()[0].name
    for batch in _batches("uint8"):
        what = f"a batch of {len(batch)} raw uint8 digits"
        got = _run(session, {name: batch})["logits"]
        want = _keras(model, (batch / 255).astype(np.float32)[:, None])
        if _close(got, want):
            continue
        if _close(got, softmax(want)):
            raise Wrong(
                f"on {what} the file's 'logits' are probabilities (the softmax of your model's output): "
                "'logits' is your model's output as it is"
            )
        for seen, feed in SLIPS:
            if _close(got, _keras(model, feed(batch).astype(np.float32)[:, None])):
                raise Wrong(
                    f"on {what} the file gives your model's logits for {seen}; the model takes each "
                    "digit / 255 with a channel axis, [batch, 1, 28, 28]"
                )
        _same(got, want, what, "your Keras model given the same digits / 255 with a channel axis")
    digits, labels = _test_digits(2000, stream=34)
    accuracy = _trained(
        _run(session, {name: digits})["logits"], labels, "your model (and the file)"
    )
    ops = sorted({node.op_type for node in load_model(path).graph.node})
    return [
        f"input {name!r} uint8 [batch, 28, 28]: your model's logits on unseen raw digits",
        f"a trained model: {accuracy:.1%} of 2000 test digits right",
        f"the Cast and the division are now part of the graph (operators {ops})",
        "callers no longer scale pixels, but the file no longer follows the series' contract: a trade-off",
    ]


CHECKS = {
    "02.1": check_channels_last_cnn,
    "02.2": check_temperature,
    "02.3": check_uint8_input,
}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)
#
# 02.1's answer is a training function: the check calls it with digits of its choosing. In the notebook, 02.2 and
# 02.3 export the trained ``model`` of section 1. To stand alone (without the notebook's six epochs), these
# references export the small CNN of 02.1, trained once on the training digits and wrapped to the contract's layout:
# the checks compare the file with whichever trained Keras model is passed, so the export code is exactly the one
# the notebook's ``model`` needs.


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # read when TensorFlow's C++ library loads
    import keras
    import tensorflow as tf
    import tf2onnx

    return tf, keras, tf2onnx


def train_cnn(x_train, y_train, path):
    """02.1: a channels-last CNN trained one epoch on the digits given ([N, 1, 28, 28] in 0..1, transposed to
    channels last), exported with a channels-last TensorSpec (the dict key names the output)."""
    tf, keras, tf2onnx = _tf()
    keras.utils.set_random_seed(0)
    cnn = keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1), name="image"),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )
    cnn.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cnn.fit(x_train.transpose(0, 2, 3, 1), y_train, epochs=1, verbose=0)
    tf2onnx.convert.from_function(
        tf.function(lambda image: {"logits": cnn(image)}),
        input_signature=[tf.TensorSpec((None, 28, 28, 1), tf.float32, name="image")],
        opset=18,
        output_path=str(path),
    )
    return cnn


def solve_1(workdir: Path):
    return train_cnn


@functools.cache
def _trained_cnn():
    """02.1's CNN trained on the training digits (in the notebook, 02.2 and 02.3 use the trained ``model``)."""
    import numpy as np

    from helpers.data.mnist import load_mnist

    data = load_mnist()
    with (
        tempfile.TemporaryDirectory() as folder
    ):  # its file is not needed: 02.2 and 02.3 export it again
        return train_cnn(
            (data.x_train / 255).astype(np.float32)[:, None],
            data.y_train,
            Path(folder) / "cnn.onnx",
        )


def _contract_model():
    """A Keras model with the contract's input [batch, 1, 28, 28] (in the notebook: the trained ``model``)."""
    _, keras, _ = _tf()
    image = keras.Input(shape=(1, 28, 28), name="image")
    logits = _trained_cnn()(
        keras.layers.Permute((2, 3, 1))(image)
    )  # channels first -> channels last
    return keras.Model(image, logits)


def solve_2(workdir: Path):
    """Two TensorSpecs, two inputs; a dict of two tensors, two named outputs."""
    tf, _, tf2onnx = _tf()
    model, path = _contract_model(), Path(workdir) / "mlp_temperature.onnx"

    def serve(image, temperature):
        logits = model(image)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits / temperature)}

    tf2onnx.convert.from_function(
        tf.function(serve),
        input_signature=[
            tf.TensorSpec((None, 1, 28, 28), tf.float32, name="image"),
            tf.TensorSpec((), tf.float32, name="temperature"),
        ],
        opset=18,
        output_path=str(path),
    )
    return model, path


def solve_3(workdir: Path):
    """Any TensorFlow code in the traced function ends up in the graph, preprocessing included."""
    tf, _, tf2onnx = _tf()
    model, path = _contract_model(), Path(workdir) / "mlp_uint8.onnx"

    def serve(digits):  # uint8 [N, 28, 28] -> float32 [N, 1, 28, 28] in 0..1 -> the model
        return {"logits": model(tf.expand_dims(tf.cast(digits, tf.float32) / 255.0, axis=1))}

    tf2onnx.convert.from_function(
        tf.function(serve),
        input_signature=[tf.TensorSpec((None, 28, 28), tf.uint8, name="digits")],
        opset=18,
        output_path=str(path),
    )
    return model, path
