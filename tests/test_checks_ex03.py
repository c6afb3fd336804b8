"""Notebook 03's checkers: realistic wrong answers get feedback that names the mistake; right ones pass."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from helpers.checks.ex03 import shift_accuracies
from helpers.exercises import check
from solutions.ex03 import classify, classify_in_batches


def _scaled(images):
    return (images / 255.0).astype(np.float32)[:, None]


# ------------------------------------------------------------------------------------------------ 03.1
def hard_coded_contract(session, images):  # notebook 03's section 1, names and all, written into a function
    return session.run(None, {"image": _scaled(images)})[0].argmax(1)


def names_read_dtype_hard_coded(session, images):
    return session.run(None, {session.get_inputs()[0].name: _scaled(images)})[0].argmax(1)


def layout_hard_coded(session, images):
    spec = session.get_inputs()[0]
    dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}[spec.type]
    return session.run(None, {spec.name: (images / 255.0).astype(dtype)[:, None]})[0].argmax(1)


def output_name_hard_coded(session, images):
    spec = session.get_inputs()[0]
    dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}[spec.type]
    feed = (images / 255.0).reshape(len(images), *spec.shape[1:]).astype(dtype)
    return session.run(["logits"], {spec.name: feed})[0].argmax(1)


def unscaled(session, images):
    spec = session.get_inputs()[0]
    dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}[spec.type]
    return session.run(None, {spec.name: images.reshape(len(images), *spec.shape[1:]).astype(dtype)})[0].argmax(1)


@pytest.mark.parametrize("answer, named", [
    (hard_coded_contract, ["float16 copy whose input is 'pixel'", "session.get_inputs()[0].name"]),
    (names_read_dtype_hard_coded, ["float16 copy", "element type", "session.get_inputs()[0].type"]),
    (layout_hard_coded, ["flat float64 input", "layout"]),
    (output_name_hard_coded, ["float16 copy", "output name", "session.get_outputs()[0].name"]),
    (unscaled, ["agree with them on only", "uint8 / 255"]),
    (lambda session, images: classify(session, images).astype(np.float32), ["integer label"]),
])
def test_classify_names_the_mistake(answer, named):
    feedback = check("03.1", answer)
    assert not feedback.ok
    for text in named:
        assert text in feedback.message, feedback.message


def test_classify_accepts_the_solution_and_leaves_onnx_out_of_the_kernel():
    onnx_loaded_before = "onnx" in sys.modules
    feedback = check("03.1", classify)
    assert feedback.ok, str(feedback)
    if not onnx_loaded_before:  # notebook 03's kernel never loads onnx: the copies are built in another process
        assert "onnx" not in sys.modules


# ------------------------------------------------------------------------------------------------ 03.2
def test_shift_curve_names_roll_axis_and_percent():
    rolled = shift_accuracies(roll=True)
    assert "np.roll" in check("03.2", rolled).message
    down = shift_accuracies(axis=1)
    assert "shifted down" in check("03.2", down).message
    percent = {k: 100 * v for k, v in shift_accuracies().items()}
    assert "fractions between 0 and 1" in check("03.2", percent).message
    assert "missing [6]" in check("03.2", {k: 0.5 for k in range(6)}).message


# ------------------------------------------------------------------------------------------------ 03.3
def all_at_once(session, images):
    return classify(session, images)


def chunks_of(size):
    def run(session, images):
        labels = []
        for start in range(0, len(images), size):
            chunk = images[start:start + size]
            if len(chunk) < size:
                chunk = np.concatenate([chunk, np.zeros((size - len(chunk), 28, 28), np.uint8)])
            labels.append(classify(session, chunk))
        return np.concatenate(labels)[:len(images)]
    return run


def drops_last_batch(session, images):
    size = session.get_inputs()[0].shape[0]
    size = size if isinstance(size, int) else len(images)
    full = len(images) - len(images) % size
    return np.concatenate([classify(session, images[s:s + size]) for s in range(0, full, size)])


def keeps_padding_labels(session, images):
    size = session.get_inputs()[0].shape[0]
    if not isinstance(size, int):
        return classify(session, images)
    padded = np.concatenate([images, np.zeros(((-len(images)) % size, 28, 28), np.uint8)])
    return np.concatenate([classify(session, padded[s:s + size]) for s in range(0, len(padded), size)])


def no_padding(session, images):
    size = session.get_inputs()[0].shape[0]
    size = size if isinstance(size, int) else len(images)
    return np.concatenate([classify(session, images[s:s + size]) for s in range(0, len(images), size)])


@pytest.mark.parametrize("answer, named", [
    (all_at_once, ["fixed to 32", "all 999 images at once"]),
    (chunks_of(32), ["fixed to 5", "read the size from session.get_inputs()[0].shape[0]"]),
    (drops_last_batch, ["got 992", "partial batch of 7 images is missing"]),
    (keeps_padding_labels, ["got 1024", "drop the labels of the padding"]),
    (no_padding, ["last batch has 7 images", "pad it to 32"]),
])
def test_batches_names_the_mistake(answer, named):
    feedback = check("03.3", answer)
    assert not feedback.ok
    for text in named:
        assert text in feedback.message, feedback.message


def test_batches_accepts_the_solution():
    assert check("03.3", classify_in_batches).ok
