"""Notebook 03's checkers: right answers written in other ways pass; realistic wrong answers are told the mistake,
never the expected values."""
from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from helpers.checks.ex03 import shift_accuracies
from helpers.exercises import check
from solutions.ex03 import classify


def _scaled(images):
    return (images / 255.0).astype(np.float32)[:, None]


def assert_names(feedback, *texts):
    """Refused, naming the mistake, and never listing labels."""
    assert not feedback.ok, str(feedback)
    for text in texts:
        assert text in feedback.message, feedback.message
    assert not re.search(r"\d+[, ]+\d+[, ]+\d+[, ]+\d+[, ]+\d+", feedback.message), feedback.message


# ------------------------------------------------------------------------------------------------ 03.1
def classify_by_type_name(session, images):  # element type parsed from its name, layout by axis moves
    spec = session.get_inputs()[0]
    dtype = {"float": "float32", "float16": "float16", "double": "float64"}[spec.type[len("tensor("):-1]]
    pixels = images.astype(dtype) / np.array(255, dtype)
    if spec.shape[1:] == [28, 28, 1]:
        pixels = pixels[..., np.newaxis]
    elif len(spec.shape) == 2:
        pixels = pixels.reshape(len(images), -1)
    else:
        pixels = pixels[:, np.newaxis]
    scores = session.run(None, {spec.name: pixels})
    return np.argmax(scores[0], axis=-1)


def classify_one_at_a_time(session, images):  # one image per run; output name read, not None
    spec, out = session.get_inputs()[0], session.get_outputs()[0]
    dtype = np.dtype({"tensor(float)": "f4", "tensor(float16)": "f2", "tensor(double)": "f8"}[spec.type])
    feeds = (np.reshape(image / 255, (1, *spec.shape[1:])).astype(dtype) for image in images)
    return np.array([int(session.run([out.name], {spec.name: feed})[0][0].argmax()) for feed in feeds])


@pytest.mark.parametrize("answer", [classify_by_type_name, classify_one_at_a_time])
def test_classify_accepts_other_right_answers(answer):
    feedback = check("03.1", answer)
    assert feedback.ok, str(feedback)


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
    (names_read_dtype_hard_coded, ["float16 copy", "session.get_inputs()[0].type"]),
    (layout_hard_coded, ["flat float64 input", "layout"]),
    (output_name_hard_coded, ["float16 copy", "session.get_outputs()[0].name"]),
    (unscaled, ["differ from the model's own", "uint8 / 255"]),
    (lambda session, images: classify(session, images).astype(np.float32), ["integer label"]),
    (lambda session, images: session.run(None, {"image": _scaled(images)})[0], ["one integer label per image"]),
])
def test_classify_names_the_mistake(answer, named):
    assert_names(check("03.1", answer), *named)


def test_classify_accepts_the_solution_and_leaves_onnx_out_of_the_kernel():
    onnx_loaded_before = "onnx" in sys.modules
    feedback = check("03.1", classify)
    assert feedback.ok, str(feedback)
    if not onnx_loaded_before:  # notebook 03's kernel never loads onnx: the copies are built in another process
        assert "onnx" not in sys.modules


# ------------------------------------------------------------------------------------------------ 03.2
@pytest.fixture(scope="module")
def truth():
    return shift_accuracies()


def test_shift_curve_accepts_other_right_answers():
    import onnxruntime as ort

    from helpers.mnist import load_mnist
    from helpers.notebooks import require_artifact

    data = load_mnist()
    session = ort.InferenceSession(require_artifact("mnist_mlp_pytorch.onnx"))
    padded = np.pad(data.x_test, ((0, 0), (0, 0), (6, 0)))  # room on the left, then a window sliding left
    windows = {k: padded[:, :, 6 - k:34 - k] for k in range(7)}
    as_numpy = {k: np.float32((classify(session, w) == data.y_test).mean()) for k, w in windows.items()}
    assert check("03.2", as_numpy).ok, str(check("03.2", as_numpy))
    as_counts = {}
    for k in range(7):  # a digit loop with integer counts, divided at the end
        moved = np.zeros_like(data.x_test)
        moved[..., k:] = data.x_test[..., :28 - k] if k else data.x_test
        as_counts[k] = int((classify(session, moved) == data.y_test).sum()) / len(data.y_test)
    assert check("03.2", as_counts).ok


def assert_hides(feedback, truth):
    for value in truth.values():
        for text in (f"{value:.1%}", f"{value:.2%}", f"{value:.4f}", f"{value:.3f}", f"{100 * value:.1f}"):
            assert text not in feedback.message, (text, feedback.message)


def test_shift_curve_names_roll_axis_and_percent(truth):
    feedback = check("03.2", shift_accuracies(roll=True))
    assert_names(feedback, "np.roll")
    assert_hides(feedback, truth)
    assert_names(check("03.2", shift_accuracies(axis=1)), "shifted down")
    assert_names(check("03.2", {k: 100 * v for k, v in truth.items()}), "fractions between 0 and 1")
    missing = check("03.2", {k: 0.5 for k in range(6)})
    assert not missing.ok and "missing [6]" in missing.message, missing.message


def test_shift_curve_says_direction_and_coarse_size_only(truth):
    left = {k: truth[k] + (0.002 if k == 1 else 0) for k in truth}  # a small slip at one shift
    left[5] = truth[5] * 0.5
    feedback = check("03.2", left)
    assert_names(feedback, "1 px: too high, by less than 10 %", "5 px: too low, by more than 10 %")
    assert "0 px" not in feedback.message and "6 px" not in feedback.message
    assert_hides(feedback, truth)


# ------------------------------------------------------------------------------------------------ 03.3
def pad_with_last_image(session, images):
    size = session.get_inputs()[0].shape[0]
    if isinstance(size, str):
        return classify(session, images)
    missing = -len(images) % size
    padded = np.concatenate([images, np.repeat(images[-1:], missing, axis=0)])
    return np.concatenate([classify(session, part) for part in np.split(padded, len(padded) // size)])[:len(images)]


def fill_a_fixed_buffer(session, images):  # one reusable zero buffer of the model's batch size
    spec = session.get_inputs()[0]
    size = spec.shape[0] if isinstance(spec.shape[0], int) else len(images)
    buffer, labels = np.zeros((size, 1, 28, 28), np.float32), []
    for start in range(0, len(images), size):
        chunk = images[start:start + size]
        buffer[:] = 0
        buffer[:len(chunk), 0] = chunk / 255
        labels += list(session.run(None, {spec.name: buffer})[0].argmax(1)[:len(chunk)])
    return np.array(labels)


@pytest.mark.parametrize("answer", [pad_with_last_image, fill_a_fixed_buffer])
def test_batches_accepts_other_right_answers(answer):
    feedback = check("03.3", answer)
    assert feedback.ok, str(feedback)


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
    (classify, ["fixed to 32", "fixed number of images per run"]),
    (chunks_of(32), ["fixed to 5", "read the batch size from session.get_inputs()[0].shape[0]"]),
    (drops_last_batch, ["999 images, got 992", "some images got no label"]),
    (keeps_padding_labels, ["999 images, got 1024", "labels of the padding"]),
    (no_padding, ["fixed to 32", "the last batch has fewer images: pad it"]),
])
def test_batches_names_the_mistake(answer, named):
    assert_names(check("03.3", answer), *named)
