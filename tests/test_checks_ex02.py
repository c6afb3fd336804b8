"""Notebook 02's checkers: realistic wrong answers get feedback that names the mistake; right ones pass.

The learner's files are made here by editing notebook 02's file with the ``onnx`` package (no TensorFlow needed):
each edit is the graph a learner's `tf.function` would give, mistake included.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.exercises import check
from helpers.notebooks import require_artifact


@pytest.fixture
def keras_file():
    return onnx.load(require_artifact("mnist_mlp_keras.onnx"))


def save(model, tmp_path, name="answer.onnx"):
    path = tmp_path / name
    onnx.save(model, path)
    return path


def fixed_batch(model, size=32):
    for value in (model.graph.input[0], *model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_value = size
    return model


def untrained(model):
    rng = np.random.default_rng(0)
    for i, tensor in enumerate(model.graph.initializer):
        array = numpy_helper.to_array(tensor)
        if array.ndim == 2 and array.dtype == np.float32:  # the Dense kernels: fresh random weights
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(
                rng.normal(0, 0.05, array.shape).astype(np.float32), tensor.name))
    return model


def new_input(model, name, elem_type, shape, nodes, initializers=()):
    """Replace the graph input 'image' by ``name``; ``nodes`` compute 'image' from it (the traced preprocessing)."""
    graph = model.graph
    body = list(graph.node)
    del graph.node[:]
    graph.node.extend([*nodes, *body])
    graph.initializer.extend(initializers)
    del graph.input[:]
    graph.input.append(helper.make_tensor_value_info(name, elem_type, shape))
    return model


def raw_pixels(model, dtype=TensorProto.UINT8, shape=("batch", 28, 28), divide=True):
    """The 02.3 export: `digits` -> Cast -> (/ 255) -> add the channel axis -> the model."""
    nodes = [helper.make_node("Cast", ["digits"], ["as_float"], to=TensorProto.FLOAT)]
    scaled = "as_float"
    if divide:
        nodes.append(helper.make_node("Div", ["as_float", "c255"], ["scaled"]))
        scaled = "scaled"
    if len(shape) == 3:
        nodes.append(helper.make_node("Unsqueeze", [scaled, "axis1"], ["image"]))
    else:
        nodes.append(helper.make_node("Identity", [scaled], ["image"]))
    initializers = [numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    if divide:
        initializers.append(numpy_helper.from_array(np.array(255, np.float32), "c255"))
    return new_input(model, "digits", dtype, list(shape), nodes, initializers)


def with_temperature(model, op="Div", temperature_shape=(), tf_names=False):
    """The 02.2 export: a second input 'temperature' and a second output softmax(logits op temperature)."""
    graph = model.graph
    graph.input.append(helper.make_tensor_value_info("temperature", TensorProto.FLOAT, list(temperature_shape)))
    source = "logits"
    if op:
        graph.node.append(helper.make_node(op, ["logits", "temperature"], ["scaled"]))
        source = "scaled"
    names = ("Identity:0", "Identity_1:0") if tf_names else ("logits", "probabilities")
    graph.node.append(helper.make_node("Softmax", [source], [names[1]], axis=-1))
    if tf_names:
        graph.node.append(helper.make_node("Identity", ["logits"], [names[0]]))
    del graph.output[:]
    graph.output.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 10]) for n in names])
    return model


def assert_names(feedback, *texts):
    assert not feedback.ok, str(feedback)
    for text in texts:
        assert text in feedback.message, feedback.message


# ------------------------------------------------------------------------------------------------ 02.1
def test_fixed_batch_accepts_a_fixed_batch_of_32(keras_file, tmp_path):
    assert check("02.1", save(fixed_batch(keras_file), tmp_path)).ok


def test_fixed_batch_names_a_dynamic_batch(keras_file, tmp_path):
    assert_names(check("02.1", save(keras_file, tmp_path)), "[32, 1, 28, 28]", "got ['batch', 1, 28, 28]")


def test_fixed_batch_names_a_channel_axis_left_out(keras_file, tmp_path):
    squeezed = new_input(keras_file, "image_3d", TensorProto.FLOAT, [32, 28, 28],
                         [helper.make_node("Unsqueeze", ["image_3d", "axis1"], ["image"])],
                         [numpy_helper.from_array(np.array([1], np.int64), "axis1")])
    assert_names(check("02.1", save(squeezed, tmp_path)), "[32, 1, 28, 28]", "got [32, 28, 28]")


def test_fixed_batch_names_an_untrained_model(keras_file, tmp_path):
    assert_names(check("02.1", save(untrained(fixed_batch(keras_file)), tmp_path)), "trained `model`")


# ------------------------------------------------------------------------------------------------ 02.2
def test_temperature_accepts_softmax_of_logits_over_temperature(keras_file, tmp_path):
    feedback = check("02.2", save(with_temperature(keras_file), tmp_path))
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("edit, named", [
    (dict(tf_names=True), ["'logits' and 'probabilities'", "Identity:0", "return a dict"]),
    (dict(op="Mul"), ["softmax(logits * 0.5)", "divide the logits by the temperature"]),
    (dict(op=None), ["temperature 0.5 changes nothing", "divide the logits"]),
    (dict(temperature_shape=("n",)), ["'temperature' to be one float32 number", "shape []"]),
])
def test_temperature_names_the_mistake(keras_file, tmp_path, edit, named):
    assert_names(check("02.2", save(with_temperature(keras_file, **edit), tmp_path)), *named)


def test_temperature_names_a_missing_input(keras_file, tmp_path):
    assert_names(check("02.2", save(keras_file, tmp_path)), "'image' and 'temperature'", "got ['image']")


# ------------------------------------------------------------------------------------------------ 02.3
def test_uint8_input_accepts_the_raw_pixels(keras_file, tmp_path):
    assert check("02.3", save(raw_pixels(keras_file), tmp_path)).ok


@pytest.mark.parametrize("edit, named", [
    (dict(divide=False), ["you feed 0..255", "divide by 255"]),
    (dict(dtype=TensorProto.FLOAT), ["tensor(uint8)", "got tensor(float)"]),
    (dict(shape=("batch", 1, 28, 28)), ["[batch, 28, 28]", "got ['batch', 1, 28, 28]"]),
])
def test_uint8_input_names_the_mistake(keras_file, tmp_path, edit, named):
    assert_names(check("02.3", save(raw_pixels(keras_file, **edit), tmp_path)), *named)
