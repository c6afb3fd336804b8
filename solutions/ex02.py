"""Solutions for notebook 02's exercises (they need TensorFlow, like the notebook).

02.1's answer is a training function: the check calls it with digits of its choosing. In the notebook, 02.2 and
02.3 export the trained ``model`` of section 1. To stand alone (without the notebook's six epochs), these
solutions export the small CNN of 02.1, trained once on the training digits and wrapped to the contract's layout:
the checks compare the file with whichever trained Keras model is passed, so the export code is exactly the one
the notebook's ``model`` needs.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path


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
