"""Notebook 02's checkers: right answers written in other ways pass; realistic wrong answers are told the mistake,
never the expected values. Every answer is a real tf2onnx export of a real Keras model."""
from __future__ import annotations

import os
import re

import numpy as np
import onnx
import pytest
from onnx import helper

from helpers.exercises import check
from helpers.mnist import load_mnist

keras = tf = tf2onnx = NCHW = NHWC = TEMPERATURE = None  # set by the fixture below


@pytest.fixture(scope="module", autouse=True)
def tensorflow():
    """TensorFlow is imported when these tests run, never when pytest collects them: loaded before PyTorch's
    exporter it crashes the process (a segfault as torch imports triton), so conftest.py runs them last."""
    global keras, tf, tf2onnx, NCHW, NHWC, TEMPERATURE
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    keras, tf = pytest.importorskip("keras"), pytest.importorskip("tensorflow")
    tf2onnx = pytest.importorskip("tf2onnx")
    NCHW = tf.TensorSpec((None, 1, 28, 28), tf.float32, name="image")
    NHWC = tf.TensorSpec((None, 28, 28, 1), tf.float32, name="image")
    TEMPERATURE = tf.TensorSpec((), tf.float32, name="temperature")


def export(function, signature, path):
    onnx_model, _ = tf2onnx.convert.from_function(tf.function(function), input_signature=signature, opset=18)
    onnx.save(onnx_model, path)
    return path


def cnn(functional=False, train=True, seed=0):
    keras.utils.set_random_seed(seed)
    if functional:  # another architecture, written with the functional API
        image = keras.Input((28, 28, 1))
        x = keras.layers.Conv2D(12, 5, padding="same", activation="relu")(image)
        x = keras.layers.AveragePooling2D(2)(x)
        model = keras.Model(image, keras.layers.Dense(10)(keras.layers.Flatten()(x)))
    else:
        model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(8, 3, activation="relu"),
                                  keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)])
    if train:
        data = load_mnist()
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit((data.x_train[:20000, ..., None] / 255).astype(np.float32), data.y_train[:20000], epochs=1,
                  batch_size=64, verbose=0)
    return model


@pytest.fixture(scope="module")
def trained():
    return cnn()


@pytest.fixture(scope="module")
def mlp():
    """A Keras model with the contract's input (the notebook's `model` plays this role)."""
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((1, 28, 28)), keras.layers.Flatten(),
                             keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10)])


def assert_names(feedback, *texts):
    """Refused, naming the mistake, with no number but the tolerance, the temperatures tried and the learner's
    own accuracy."""
    assert not feedback.ok, str(feedback)
    for text in texts:
        assert text in feedback.message, feedback.message
    assert set(re.findall(r"\d+\.\d+(?! ?%)", feedback.message)) <= {"0.001", "0.25", "2.0", "7.0"}, feedback.message


# ------------------------------------------------------------------------------------------------ 02.1
def test_cnn_accepts_a_functional_model_exported_through_a_decorated_function(tmp_path):
    model = cnn(functional=True)

    @tf.function(input_signature=[NHWC])
    def serve(image):
        return dict(logits=model(image, training=False))

    tf2onnx.convert.from_function(serve, input_signature=[NHWC], output_path=str(tmp_path / "a.onnx"))
    feedback = check("02.1", (model, tmp_path / "a.onnx"))
    assert feedback.ok, str(feedback)


def test_cnn_accepts_keras_export_with_the_output_renamed(trained, tmp_path):
    trained.export(tmp_path / "k.onnx", format="onnx", input_signature=[NHWC], verbose=False)
    model = onnx.load(tmp_path / "k.onnx")
    model.graph.node.append(helper.make_node("Identity", [model.graph.output[0].name], ["logits"]))
    model.graph.output[0].name = "logits"
    onnx.save(model, tmp_path / "renamed.onnx")
    feedback = check("02.1", (trained, tmp_path / "renamed.onnx"))
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("mistake, named", [
    ("tensor output", ["expected the output(s) ['logits']", "return a dict"]),
    ("fixed batch", ["fixed batch of 32", "None"]),
    ("channels first", ["[batch, 28, 28, 1]", "1, 28, 28]"]),
    ("another model passed", ["differs from your Keras model", "first at image 0"]),
])
def test_cnn_names_the_mistake(trained, tmp_path, mistake, named):
    path, model = tmp_path / "answer.onnx", trained
    if mistake == "tensor output":
        export(lambda image: trained(image), [NHWC], path)
    elif mistake == "fixed batch":
        export(lambda image: {"logits": trained(image)}, [tf.TensorSpec((32, 28, 28, 1), tf.float32, name="image")],
               path)
    elif mistake == "channels first":
        export(lambda image: {"logits": trained(tf.transpose(image, [0, 2, 3, 1]))}, [NCHW], path)
    else:
        export(lambda image: {"logits": trained(image)}, [NHWC], path)
        model = cnn(train=False, seed=3)
    assert_names(check("02.1", (model, path)), *named)


def test_cnn_names_an_untrained_model_and_a_model_without_convolution(tmp_path):
    untrained = cnn(train=False)
    export(lambda image: {"logits": untrained(image)}, [NHWC], tmp_path / "untrained.onnx")
    assert_names(check("02.1", (untrained, tmp_path / "untrained.onnx")), "below 90 %", "train the CNN")
    dense = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
    export(lambda image: {"logits": dense(image)}, [NHWC], tmp_path / "dense.onnx")
    assert_names(check("02.1", (dense, tmp_path / "dense.onnx")), "no Conv operator")


def test_cnn_answer_must_be_a_model_and_a_path(trained, tmp_path):
    assert_names(check("02.1", str(tmp_path / "a.onnx")), "expected a pair (keras_model, path")


# ------------------------------------------------------------------------------------------------ 02.2
def test_temperature_accepts_a_logsumexp_softmax(mlp, tmp_path):
    @tf.function(input_signature=[NCHW, TEMPERATURE])
    def serve(image, temperature):
        logits = mlp(image)
        scaled = tf.math.divide(logits, temperature)
        return {"probabilities": tf.exp(scaled - tf.reduce_logsumexp(scaled, axis=-1, keepdims=True)),
                "logits": logits}

    tf2onnx.convert.from_function(serve, input_signature=[NCHW, TEMPERATURE], output_path=str(tmp_path / "t.onnx"))
    assert check("02.2", (mlp, tmp_path / "t.onnx")).ok


def test_temperature_accepts_multiplying_by_the_inverse(trained, tmp_path):
    model = keras.Sequential([keras.Input((1, 28, 28)), keras.layers.Permute((2, 3, 1)), trained])
    path = export(lambda image, temperature: {"logits": model(image), "probabilities": keras.ops.softmax(
        model(image) * (1.0 / temperature))}, [NCHW, TEMPERATURE], tmp_path / "t.onnx")
    feedback = check("02.2", (model, path))
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("mistake, named", [
    ("multiply", ["softmax(logits * temperature)", "divide"]),
    ("softmax over the batch", ["do not sum to 1", "10 classes"]),
    ("tuple", ["'logits', 'probabilities'", "return a dict"]),
    ("temperature of shape [1]", ["'temperature' to be one number", "shape []"]),
    ("no temperature input", ["2 input(s) ['image', 'temperature']", "got ['image']"]),
])
def test_temperature_names_the_mistake(mlp, tmp_path, mistake, named):
    path, signature = tmp_path / "answer.onnx", [NCHW, TEMPERATURE]
    probabilities = {"multiply": lambda z, t: tf.nn.softmax(z * t),
                     "softmax over the batch": lambda z, t: tf.nn.softmax(z / t, axis=0)}.get(
        mistake, lambda z, t: tf.nn.softmax(z / t))
    if mistake == "tuple":
        export(lambda image, t: (mlp(image), tf.nn.softmax(mlp(image) / t)), signature, path)
    elif mistake == "temperature of shape [1]":
        signature = [NCHW, tf.TensorSpec((1,), tf.float32, name="temperature")]
        export(lambda image, t: {"logits": mlp(image), "probabilities": tf.nn.softmax(mlp(image) / t)}, signature,
               path)
    elif mistake == "no temperature input":
        export(lambda image: {"logits": mlp(image), "probabilities": tf.nn.softmax(mlp(image))}, [NCHW], path)
    else:
        export(lambda image, t: {"logits": mlp(image), "probabilities": probabilities(mlp(image), t)}, signature,
               path)
    assert_names(check("02.2", (mlp, path)), *named)


# ------------------------------------------------------------------------------------------------ 02.3
def test_uint8_accepts_a_reshape_and_a_multiplication(mlp, tmp_path):
    spec = tf.TensorSpec((None, 28, 28), tf.uint8, name="pixels")
    path = export(lambda pixels: {"logits": mlp(tf.reshape(tf.cast(pixels, tf.float32) * (1 / 255), [-1, 1, 28, 28]))},
                  [spec], tmp_path / "u.onnx")
    feedback = check("02.3", (mlp, path))
    assert feedback.ok, str(feedback)


def test_uint8_accepts_convert_image_dtype(trained, tmp_path):
    spec = tf.TensorSpec((None, 28, 28), tf.uint8, name="raw")
    model = keras.Sequential([keras.Input((1, 28, 28)), keras.layers.Permute((2, 3, 1)), trained])
    path = export(lambda raw: {"logits": model(tf.image.convert_image_dtype(raw, tf.float32)[:, tf.newaxis])},
                  [spec], tmp_path / "u.onnx")
    feedback = check("02.3", (model, path))
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("mistake, named", [
    ("no division", ["pixels 0..255", "divide by 255"]),
    ("float input", ["of type tensor(uint8)", "got tensor(float)"]),
    ("channel axis in the input", ["[batch, 28, 28]", "1, 28, 28]"]),
    ("tensor output", ["expected the output(s) ['logits']", "return a dict"]),
])
def test_uint8_names_the_mistake(mlp, tmp_path, mistake, named):
    path = tmp_path / "answer.onnx"
    uint8 = tf.TensorSpec((None, 28, 28), tf.uint8, name="digits")
    if mistake == "no division":
        export(lambda d: {"logits": mlp(tf.cast(d, tf.float32)[:, None])}, [uint8], path)
    elif mistake == "float input":
        export(lambda d: {"logits": mlp(d[:, None] / 255)}, [tf.TensorSpec((None, 28, 28), tf.float32)], path)
    elif mistake == "channel axis in the input":
        export(lambda d: {"logits": mlp(tf.cast(d, tf.float32) / 255)},
               [tf.TensorSpec((None, 1, 28, 28), tf.uint8, name="digits")], path)
    else:
        export(lambda d: mlp(tf.cast(d, tf.float32)[:, None] / 255), [uint8], path)
    assert_names(check("02.3", (mlp, path)), *named)
