"""Solutions for notebook 02's exercises (they need TensorFlow, like the notebook).

In the notebook you would export the trained ``model`` of section 1. To stand alone, these solutions rebuild
that model and copy its trained weights out of ``artifacts/mnist_mlp_keras.onnx`` (no training needed).
"""
from __future__ import annotations

import os
from pathlib import Path

MEAN, STD = 0.1307, 0.3081
OPSET = 18


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # read when TensorFlow's C++ library loads
    import keras
    import tensorflow as tf
    import tf2onnx

    return tf, keras, tf2onnx


def _trained_model():
    """Notebook 02's Keras MLP with the weights of the file that notebook wrote."""
    import onnx
    from onnx import numpy_helper

    from helpers.notebooks import require_artifact

    _, keras, _ = _tf()
    model = keras.Sequential([
        keras.Input(shape=(1, 28, 28), name="image"),
        keras.layers.Rescaling(scale=1.0 / STD, offset=-MEAN / STD, name="normalize"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(256, activation="relu", name="hidden1"),
        keras.layers.Dense(128, activation="relu", name="hidden2"),
        keras.layers.Dense(10, name="logits"),
    ], name="mnist_mlp")
    weights = {init.name: numpy_helper.to_array(init)
               for init in onnx.load(require_artifact("mnist_mlp_keras.onnx")).graph.initializer}
    for layer in ("hidden1", "hidden2", "logits"):  # tf2onnx keeps TensorFlow's variable names
        kernel = next(v for k, v in weights.items() if f"/{layer}_1/" in k and v.ndim == 2)
        bias = next(v for k, v in weights.items() if f"/{layer}_1/" in k and v.ndim == 1)
        model.get_layer(layer).set_weights([kernel, bias])
    return model


def _from_function(serve, signature, path: Path) -> Path:
    """tf2onnx's conversion of a traced function, saved to ``path``: the call notebook 02 teaches."""
    import onnx

    _, _, tf2onnx = _tf()
    onnx_model, _ = tf2onnx.convert.from_function(serve, input_signature=signature, opset=OPSET)
    onnx.save(onnx_model, path)
    return path


def solve_1(workdir: Path):
    """A fixed batch of 32 in the TensorSpec becomes dim_value 32 in the file."""
    tf, _, _ = _tf()
    model = _trained_model()
    signature = (tf.TensorSpec(shape=(32, 1, 28, 28), dtype=tf.float32, name="image"),)
    serve = tf.function(lambda image: model(image, training=False), input_signature=signature)
    return _from_function(serve, signature, Path(workdir) / "mlp_batch32.onnx")


def solve_2(workdir: Path):
    """Two TensorSpecs, two inputs; a dict of two tensors, two named outputs."""
    tf, _, _ = _tf()
    model = _trained_model()
    signature = (tf.TensorSpec(shape=(None, 1, 28, 28), dtype=tf.float32, name="image"),
                 tf.TensorSpec(shape=(), dtype=tf.float32, name="temperature"))

    @tf.function(input_signature=signature)
    def serve(image, temperature):
        logits = model(image, training=False)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits / temperature)}

    return _from_function(serve, signature, Path(workdir) / "mlp_temperature.onnx")


def solve_3(workdir: Path):
    """Any TensorFlow code in the traced function ends up in the graph, preprocessing included."""
    tf, _, _ = _tf()
    model = _trained_model()
    signature = (tf.TensorSpec(shape=(None, 28, 28), dtype=tf.uint8, name="digits"),)

    @tf.function(input_signature=signature)
    def serve(digits):
        image = tf.expand_dims(tf.cast(digits, tf.float32) / 255.0, axis=1)  # uint8 [N, 28, 28] -> [N, 1, 28, 28]
        return model(image, training=False)

    return _from_function(serve, signature, Path(workdir) / "mlp_uint8.onnx")
