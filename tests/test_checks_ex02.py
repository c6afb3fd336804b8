"""Notebook 02's checks (real tf2onnx exports): right answers pass; a *_REQUIREMENTS row breaks one, named."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
import tables
from onnx import helper
from tables import accepted

from helpers.data.mnist import load_mnist

keras = tf = tf2onnx = NCHW = NHWC = TEMPERATURE = None  # set by the fixture below


@pytest.fixture(scope="module", autouse=True)
def tensorflow():
    """TensorFlow imported as the tests run, not at collection: before PyTorch's exporter it segfaults (conftest.py)."""
    global keras, tf, tf2onnx, NCHW, NHWC, TEMPERATURE
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    keras, tf = pytest.importorskip("keras"), pytest.importorskip("tensorflow")
    tf2onnx = pytest.importorskip("tf2onnx")
    NCHW = tf.TensorSpec((None, 1, 28, 28), tf.float32, name="image")
    NHWC = tf.TensorSpec((None, 28, 28, 1), tf.float32, name="image")
    TEMPERATURE = tf.TensorSpec((), tf.float32, name="temperature")


def export(function, signature, path):
    onnx_model, _ = tf2onnx.convert.from_function(
        tf.function(function), input_signature=signature, opset=18
    )
    onnx.save(onnx_model, path)
    return path


def refused(exercise, answer, *texts):
    """Refused, naming what differs (never a guessed cause), with no number but the tolerance, temperatures, %."""
    feedback = tables.refused(exercise, answer, *texts)
    assert "nothing changed in between" not in feedback.message, feedback.message
    assert set(re.findall(r"\d+\.\d+(?! ?%)", feedback.message)) <= {
        "0.001",
        "0.25",
        "2.0",
        "7.0",
    }, feedback.message


def cnn(functional=False):
    """An untrained channels-last CNN (the exercise's example, or another one written with the functional API)."""
    keras.utils.set_random_seed(0)
    if functional:
        image = keras.Input((28, 28, 1))
        x = keras.layers.Conv2D(12, 5, padding="same", activation="relu")(image)
        x = keras.layers.AveragePooling2D(2)(x)
        return keras.Model(image, keras.layers.Dense(10)(keras.layers.Flatten()(x)))
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )


def fit(model, x, y):
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    model.fit(x, y, epochs=1, verbose=0)
    return model


_TRAINED: dict = {}


def trained(x_train, y_train, kind="cnn"):
    """The CNN trained one epoch on these digits, once per test session (the check always gives the same)."""
    key = kind, hashlib.sha256(x_train[::97].tobytes() + y_train.tobytes()).digest()
    if key not in _TRAINED:
        model = (
            cnn(kind == "functional")
            if kind != "dense"
            else keras.Sequential(
                [keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)]
            )
        )
        _TRAINED[key] = fit(model, x_train.transpose(0, 2, 3, 1), y_train)
    return _TRAINED[key]


# ------------------------------------------------------------------------------------------------ 02.1
def train_functional_with_a_decorated_function(x_train, y_train, path):
    """A right answer: another architecture, the function decorated, the file written by output_path."""
    model = fit(cnn(functional=True), np.moveaxis(x_train, 1, -1), y_train)

    @tf.function(input_signature=[NHWC])
    def serve(image):
        return dict(logits=model(image, training=False))

    tf2onnx.convert.from_function(serve, input_signature=[NHWC], output_path=str(path))
    return model


def train_then_keras_export_renamed_and_checked(x_train, y_train, path):
    """A right answer: Keras's own export, its output renamed with onnx, checked as the notebook does."""
    model = trained(x_train, y_train)
    model.export(
        Path(path).with_suffix(".keras.onnx"), format="onnx", input_signature=[NHWC], verbose=False
    )
    proto = onnx.load(Path(path).with_suffix(".keras.onnx"))
    proto.graph.node.append(helper.make_node("Identity", [proto.graph.output[0].name], ["logits"]))
    proto.graph.output[0].name = "logits"
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, path)
    return model


@pytest.mark.parametrize(
    "answer",
    [train_functional_with_a_decorated_function, train_then_keras_export_renamed_and_checked],
)
def test_cnn_right_answers_written_differently_pass(answer):
    accepted("02.1", answer)


def trainer(mistake=None):
    """A learner's train_cnn(x_train, y_train, path), right but for ``mistake``."""

    def train_cnn(x_train, y_train, path):
        mnist = load_mnist()
        if mistake == "trains on the notebook's digits":
            model = trained((mnist.x_train / 255).astype(np.float32)[:, None], mnist.y_train)
        elif mistake == "adds the test digits":
            model = trained(
                np.concatenate([x_train, (mnist.x_test / 255).astype(np.float32)[:, None]]),
                np.concatenate([y_train, mnist.y_test]),
            )
        elif mistake == "no convolution":
            model = trained(x_train, y_train, kind="dense")
        elif mistake == "softmax":
            model = keras.Sequential([trained(x_train, y_train), keras.layers.Softmax()])
        elif mistake == "untrained":
            model = cnn()
        else:
            model = trained(x_train, y_train)
        exported, signature, target = model, [NHWC], path
        if mistake == "exports before training":
            exported = cnn(functional=True)
        if mistake == "writes its own file":
            target = Path(path).parent / "cnn_channels_last.onnx"
        function = lambda image: {"logits": exported(image)}  # noqa: E731
        if mistake == "channels first":
            signature, function = (
                [NCHW],
                lambda image: {"logits": exported(tf.transpose(image, [0, 2, 3, 1]))},
            )
        elif mistake == "float64 input":
            signature = [tf.TensorSpec((None, 28, 28, 1), tf.float64, name="image")]
            function = lambda image: {"logits": exported(tf.cast(image, tf.float32))}  # noqa: E731
        elif mistake == "fixed batch":
            signature = [tf.TensorSpec((32, 28, 28, 1), tf.float32, name="image")]
        elif mistake == "tensor output":
            function = lambda image: exported(image)  # noqa: E731
        export(function, signature, target)
        return Path(path) if mistake == "returns the path" else model

    return train_cnn


CNN_REQUIREMENTS = {
    "the answer is train_cnn(x_train, y_train, path)": (
        lambda: (cnn(), "cnn.onnx"),
        ["expected your function train_cnn(x_train, y_train, path)"],
    ),
    "the file written to path": (
        trainer("writes its own file"),
        ["wrote no file at the path it was given"],
    ),
    "returns the trained Keras model": (
        trainer("returns the path"),
        ["return the trained Keras model"],
    ),
    "input image [batch, 28, 28, 1]": (
        trainer("channels first"),
        ["[batch, 28, 28, 1]", "1, 28, 28]"],
    ),
    "input float32": (trainer("float64 input"), ["of type tensor(float), got tensor(double)"]),
    "any batch size": (trainer("fixed batch"), ["fixed batch of 32", "None"]),
    "output logits": (
        trainer("tensor output"),
        ["expected the output(s) ['logits']", "return a dict"],
    ),
    "logits, not probabilities": (trainer("softmax"), ["'logits' are probabilities", "no softmax"]),
    "a CNN (Conv2D)": (trainer("no convolution"), ["no Conv operator"]),
    "the file is the model trained": (
        trainer("exports before training"),
        ["differs from the Keras model your function returned", "first at image 0"],
    ),
    "trained on the digits given": (
        trainer("trains on the notebook's digits"),
        ["predictions are the digits' usual labels", "nothing else"],
    ),
    "no test digits in its training data": (
        trainer("adds the test digits"),
        ["also learned from digits it was not given", "no test digits"],
    ),
    "at least 90 % test accuracy": (trainer("untrained"), ["below 90%", "train it"]),
}


@pytest.mark.parametrize("requirement", list(CNN_REQUIREMENTS))
def test_cnn_requirement_broken_alone_is_named(requirement):
    answer, words = CNN_REQUIREMENTS[requirement]
    refused("02.1", answer() if requirement.startswith("the answer is") else answer, *words)


def test_cnn_accuracy_bound_is_checked_at_the_bound():
    from helpers.grading.checks.ex02 import gate

    assert gate(0.9) and gate(0.95) and not gate(np.nextafter(0.9, 0))


def test_cnn_training_digits_are_relabelled_training_digits():
    from helpers.grading.checks._common import seeded
    from helpers.grading.checks.ex02 import relabelling, training_data

    with seeded(tables.SEED):
        x_train, y_train = training_data()
        order = relabelling()
    assert (
        x_train.dtype == np.float32
        and x_train.shape[1:] == (1, 28, 28)
        and 0 <= x_train.min() <= x_train.max() <= 1
    )
    assert (order != np.arange(10)).all() and sorted(order) == list(range(10))
    assert sorted(np.unique(y_train)) == list(range(10))


# ------------------------------------------------------------------------------------------------ 02.2
@pytest.fixture(scope="module")
def model():
    """A trained Keras model with the contract's input (the notebook's `model` plays this role)."""
    mnist = load_mnist()
    keras.utils.set_random_seed(1)
    mlp = keras.Sequential(
        [
            keras.Input((1, 28, 28)),
            keras.layers.Rescaling(1 / 0.3081, -0.1307 / 0.3081),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    return fit(
        mlp, (mnist.x_train[:30000] / 255).astype(np.float32)[:, None], mnist.y_train[:30000]
    )


@pytest.fixture(scope="module")
def untrained():
    keras.utils.set_random_seed(2)
    return keras.Sequential(
        [keras.Input((1, 28, 28)), keras.layers.Flatten(), keras.layers.Dense(10)]
    )


def test_temperature_accepts_a_logsumexp_softmax(model, tmp_path):
    @tf.function(input_signature=[NCHW, TEMPERATURE])
    def serve(image, temperature):
        logits = model(image)
        scaled = tf.math.divide(logits, temperature)
        return {
            "probabilities": tf.exp(scaled - tf.reduce_logsumexp(scaled, axis=-1, keepdims=True)),
            "logits": logits,
        }

    tf2onnx.convert.from_function(
        serve, input_signature=[NCHW, TEMPERATURE], output_path=str(tmp_path / "t.onnx")
    )
    accepted("02.2", (model, tmp_path / "t.onnx"))


def test_temperature_accepts_multiplying_by_the_inverse_checked_as_the_notebook_does(
    model, tmp_path
):
    onnx_model, _ = tf2onnx.convert.from_function(
        tf.function(
            lambda image, temperature: {
                "logits": model(image),
                "probabilities": keras.ops.softmax(model(image) * (1.0 / temperature)),
            }
        ),
        input_signature=[NCHW, TEMPERATURE],
        opset=18,
    )
    for value in (
        onnx_model.graph.input[0],
        *onnx_model.graph.output,
    ):  # the notebook's renaming of the batch
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.checker.check_model(onnx_model, full_check=True)
    onnx.save(onnx_model, tmp_path / "t.onnx")
    accepted("02.2", (model, tmp_path / "t.onnx"))


def temperature_answer(mistake=None, keras_model="model"):
    def build(models, path):
        m = models[keras_model]
        probabilities = {
            "multiply": lambda z, t: tf.nn.softmax(z * t),
            "ignored": lambda z, t: tf.nn.softmax(z),
            "softmax over the batch": lambda z, t: tf.nn.softmax(z / t, axis=0),
            "log_softmax": lambda z, t: tf.nn.log_softmax(z / t),
        }.get(mistake, lambda z, t: tf.nn.softmax(z / t))
        logits = {
            "softmax as logits": lambda z, t: tf.nn.softmax(z),
            "scaled logits": lambda z, t: z / t,
        }.get(mistake, lambda z, t: z)
        outputs = lambda image, t: {  # noqa: E731
            "logits": logits(m(image), t),
            "probabilities": probabilities(m(image), t),
        }
        signature, function = [NCHW, TEMPERATURE], outputs
        if mistake == "no temperature input":
            signature, function = (
                [NCHW],
                lambda image: {"logits": m(image), "probabilities": tf.nn.softmax(m(image))},
            )
        elif mistake == "channels-last image":
            signature = [NHWC, TEMPERATURE]
            function = lambda image, t: outputs(tf.transpose(image, [0, 3, 1, 2]), t)  # noqa: E731
        elif mistake == "fixed batch":
            signature = [tf.TensorSpec((1, 1, 28, 28), tf.float32, name="image"), TEMPERATURE]
        elif mistake == "temperature of shape [1]":
            signature = [NCHW, tf.TensorSpec((1,), tf.float32, name="temperature")]
        elif mistake == "float64 temperature":
            signature = [NCHW, tf.TensorSpec((), tf.float64, name="temperature")]
            function = lambda image, t: outputs(image, tf.cast(t, tf.float32))  # noqa: E731
        elif mistake == "tuple":
            function = lambda image, t: (m(image), tf.nn.softmax(m(image) / t))  # noqa: E731
        return m, export(function, signature, path)

    return build


TEMPERATURE_REQUIREMENTS = {
    "inputs image and temperature": (
        temperature_answer("no temperature input"),
        ["2 input(s) ['image', 'temperature']", "got ['image']"],
    ),
    "image as in the contract, [batch, 1, 28, 28]": (
        temperature_answer("channels-last image"),
        ["'image' of shape [batch, 1, 28, 28]"],
    ),
    "image of any batch size": (temperature_answer("fixed batch"), ["fixed batch of 1", "None"]),
    "temperature one number, shape []": (
        temperature_answer("temperature of shape [1]"),
        ["'temperature' to be one number", "shape []"],
    ),
    "temperature float32": (
        temperature_answer("float64 temperature"),
        ["'temperature' of type tensor(float)"],
    ),
    "outputs logits and probabilities (a dict)": (
        temperature_answer("tuple"),
        ["'logits', 'probabilities'", "return a dict"],
    ),
    "logits: the model's output": (
        temperature_answer("scaled logits"),
        ["'logits' are your model's output divided"],
    ),
    "probabilities divide by the temperature": (
        temperature_answer("multiply"),
        ["softmax(logits * temperature)"],
    ),
    "the temperature used": (
        temperature_answer("ignored"),
        ["softmax(logits): the temperature changes nothing"],
    ),
    "softmax over the 10 classes": (
        temperature_answer("softmax over the batch"),
        ["do not sum to 1", "10 classes"],
    ),
    "the trained model": (
        temperature_answer(keras_model="untrained"),
        ["test digits right, below 90%", "trained `model`"],
    ),
}
TEMPERATURE_OWN_ROUND = {
    "probabilities returned as logits": (
        temperature_answer("softmax as logits"),
        ["'logits' are probabilities"],
    ),
    "log-probabilities": (temperature_answer("log_softmax"), ["do not sum to 1"]),
}


@pytest.mark.parametrize(
    "requirement", list(TEMPERATURE_REQUIREMENTS) + list(TEMPERATURE_OWN_ROUND)
)
def test_temperature_requirement_broken_alone_is_named(model, untrained, tmp_path, requirement):
    build, words = {**TEMPERATURE_REQUIREMENTS, **TEMPERATURE_OWN_ROUND}[requirement]
    keras_model, path = build(
        {"model": model, "untrained": untrained}, tmp_path / "temperature.onnx"
    )
    refused("02.2", (keras_model, path), *words)


# ------------------------------------------------------------------------------------------------ 02.3
def test_uint8_accepts_a_reshape_and_a_multiplication(model, tmp_path):
    spec = tf.TensorSpec((None, 28, 28), tf.uint8, name="pixels")
    path = export(
        lambda pixels: {
            "logits": model(tf.reshape(tf.cast(pixels, tf.float32) * (1 / 255), [-1, 1, 28, 28]))
        },
        [spec],
        tmp_path / "u.onnx",
    )
    accepted("02.3", (model, path))


def test_uint8_accepts_convert_image_dtype(model, tmp_path):
    spec = tf.TensorSpec((None, 28, 28), tf.uint8, name="raw")
    path = export(
        lambda raw: {"logits": model(tf.image.convert_image_dtype(raw, tf.float32)[:, tf.newaxis])},
        [spec],
        tmp_path / "u.onnx",
    )
    accepted("02.3", (model, path))


def uint8_answer(mistake=None, keras_model="model"):
    def build(models, path):
        m = models[keras_model]
        spec = tf.TensorSpec((None, 28, 28), tf.uint8, name="digits")
        pixels = {
            "no division": lambda d: tf.cast(d, tf.float32),
            "divided by 256": lambda d: tf.cast(d, tf.float32) / 256,
            "transposed": lambda d: tf.transpose(tf.cast(d, tf.float32), [0, 2, 1]) / 255,
            "inverted": lambda d: (255 - tf.cast(d, tf.float32)) / 255,
            "normalised twice": lambda d: (tf.cast(d, tf.float32) / 255 - 0.1307) / 0.3081,
            "integer division": lambda d: tf.cast(d // 255, tf.float32),
        }.get(mistake, lambda d: tf.cast(d, tf.float32) / 255)
        function = lambda d: {"logits": m(pixels(d)[:, None])}  # noqa: E731
        if mistake == "float input":
            spec, function = (
                tf.TensorSpec((None, 28, 28), tf.float32),
                lambda d: {"logits": m(d[:, None] / 255)},
            )
        elif mistake == "channel axis in the input":
            spec = tf.TensorSpec((None, 1, 28, 28), tf.uint8, name="digits")
            function = lambda d: {"logits": m(tf.cast(d, tf.float32) / 255)}  # noqa: E731
        elif mistake == "fixed batch":
            spec = tf.TensorSpec((8, 28, 28), tf.uint8, name="digits")
        elif mistake == "tensor output":
            function = lambda d: m(pixels(d)[:, None])  # noqa: E731
        elif mistake == "softmax":
            function = lambda d: {"logits": tf.nn.softmax(m(pixels(d)[:, None]))}  # noqa: E731
        return m, export(function, [spec], path)

    return build


UINT8_REQUIREMENTS = {
    "one input, uint8": (
        uint8_answer("float input"),
        ["of type tensor(uint8)", "got tensor(float)"],
    ),
    "raw pixels [batch, 28, 28]": (
        uint8_answer("channel axis in the input"),
        ["[batch, 28, 28]", "1, 28, 28]"],
    ),
    "any batch size": (uint8_answer("fixed batch"), ["fixed batch of 8", "None"]),
    "output logits (a dict)": (
        uint8_answer("tensor output"),
        ["expected the output(s) ['logits']", "return a dict"],
    ),
    "divided by 255": (
        uint8_answer("divided by 256"),
        ["logits for the pixels divided by 256, not by 255"],
    ),
    "divided inside the function": (uint8_answer("no division"), ["the pixels 0..255 as they are"]),
    "the digits as they are (not transposed)": (
        uint8_answer("transposed"),
        ["logits for the digits transposed"],
    ),
    "the digits as they are (not inverted)": (
        uint8_answer("inverted"),
        ["logits for the digits inverted"],
    ),
    "no normalisation but the model's own": (
        uint8_answer("normalised twice"),
        ["logits for the pixels already normalised", "normalises again"],
    ),
    "logits, not probabilities": (uint8_answer("softmax"), ["'logits' are probabilities"]),
    "the trained model": (uint8_answer(keras_model="untrained"), ["test digits right, below 90%"]),
}
UINT8_OWN_ROUND = {
    "integer division": (
        uint8_answer("integer division"),
        ["differs from your Keras model given the same digits / 255 with a channel axis"],
    ),
}


@pytest.mark.parametrize("requirement", list(UINT8_REQUIREMENTS) + list(UINT8_OWN_ROUND))
def test_uint8_requirement_broken_alone_is_named(model, untrained, tmp_path, requirement):
    build, words = {**UINT8_REQUIREMENTS, **UINT8_OWN_ROUND}[requirement]
    refused(
        "02.3", build({"model": model, "untrained": untrained}, tmp_path / "uint8.onnx"), *words
    )
