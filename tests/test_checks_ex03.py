"""Notebook 03's checkers: right answers written in other ways pass; realistic wrong answers are told the mistake,
never the expected values."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from tables import check, right, rows

from helpers.data.mnist import load_mnist
from helpers.grading.checks._common import session as ort_session
from helpers.grading.checks.ex03 import ORT_TO_NUMPY, classify, shift_accuracies, shifted
from helpers.pipeline.artifacts import built_artifact


def _scaled(images):
    return (images / 255.0).astype(np.float32)[:, None]


def _fed(spec, pixels):
    """``pixels`` [N, 28, 28] in the input's layout and element type (what a right answer feeds)."""
    return pixels.reshape(len(pixels), *spec.shape[1:]).astype(ORT_TO_NUMPY[spec.type])


def assert_names(feedback, *texts):
    """Refused, naming the mistake, and never listing labels."""
    assert not feedback.ok, str(feedback)
    for text in texts:
        assert text in feedback.message, feedback.message
    assert not re.search(r"\d+[, ]+\d+[, ]+\d+[, ]+\d+[, ]+\d+", feedback.message), feedback.message


# ------------------------------------------------------------------------------------------------ 03.1
def classify_by_type_name(
    session, images
):  # element type parsed from its name, layout by axis moves
    spec = session.get_inputs()[0]
    dtype = {"float": "float32", "float16": "float16", "double": "float64"}[
        spec.type[len("tensor(") : -1]
    ]
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
    dtype = np.dtype(
        {"tensor(float)": "f4", "tensor(float16)": "f2", "tensor(double)": "f8"}[spec.type]
    )
    feeds = (np.reshape(image / 255, (1, *spec.shape[1:])).astype(dtype) for image in images)
    return np.array(
        [int(session.run([out.name], {spec.name: feed})[0][0].argmax()) for feed in feeds]
    )


def hard_coded_contract(
    session, images
):  # notebook 03's section 1, names and all, written into a function
    return session.run(None, {"image": _scaled(images)})[0].argmax(1)


def names_read_dtype_hard_coded(session, images):
    return session.run(None, {session.get_inputs()[0].name: _scaled(images)})[0].argmax(1)


def output_name_hard_coded(session, images):
    spec = session.get_inputs()[0]
    return session.run(["logits"], {spec.name: _fed(spec, images / 255.0)})[0].argmax(1)


def unscaled(session, images):
    spec = session.get_inputs()[0]
    return session.run(None, {spec.name: _fed(spec, images)})[0].argmax(1)


def float32_or_float16(session, images):  # float64 not handled
    spec = session.get_inputs()[0]
    dtype = np.float16 if spec.type == "tensor(float16)" else np.float32
    feed = (images / 255.0).reshape(len(images), *spec.shape[1:]).astype(dtype)
    return session.run(None, {spec.name: feed})[0].argmax(1)


def four_dimensional_only(session, images):  # NCHW or NHWC, never flat
    spec = session.get_inputs()[0]
    pixels = (images / 255.0)[..., None] if spec.shape[-1] == 1 else (images / 255.0)[:, None]
    return session.run(None, {spec.name: pixels.astype(ORT_TO_NUMPY[spec.type])})[0].argmax(1)


def nchw_or_flat(session, images):  # a rank-4 input is always [N, 1, 28, 28]
    spec = session.get_inputs()[0]
    pixels = (
        (images / 255.0).reshape(len(images), 1, 28, 28)
        if len(spec.shape) == 4
        else (images / 255.0).reshape(len(images), 784)
    )
    return session.run(None, {spec.name: pixels.astype(ORT_TO_NUMPY[spec.type])})[0].argmax(1)


def notebook_01_file(session, images):  # the session is ignored: notebook 01's file, opened again
    return (
        ort_session(built_artifact("mnist_mlp_pytorch.onnx"))
        .run(None, {"image": _scaled(images)})[0]
        .argmax(1)
    )


REQUIREMENTS_03_1 = [
    ("a function classify(session, images_uint8)", "classify.py", "expected your function"),
    (
        "the input name read from the session",
        hard_coded_contract,
        [
            "float16 copy whose input is 'pixel'",
            "read the input name from session.get_inputs()[0].name",
        ],
    ),
    (
        "the output name read from the session",
        output_name_hard_coded,
        ["float16 copy", "get_outputs()[0].name"],
    ),
    (
        "element type tensor(float16)",
        names_read_dtype_hard_coded,
        ["float16 copy", "session.get_inputs()[0].type"],
    ),
    ("element type tensor(double)", float32_or_float16, "a float64 copy [batch, 1, 28, 28]"),
    (
        "layout flat [N, 784]",
        four_dimensional_only,
        ["a float32 copy with a flat input", "input's layout"],
    ),
    ("layout [N, 28, 28, 1]", nchw_or_flat, "a channels-last copy"),
    ("pixels scaled to 0..1", unscaled, ["differ from the model's own", "uint8 / 255"]),
    (
        "integer labels",
        lambda session, images: classify(session, images).astype(np.float32),
        "integer label",
    ),
    (
        "one label per image",
        lambda session, images: classify(session, images)[:-1],
        "some images got no label",
    ),
    ("the session given (its weights)", notebook_01_file, "labels of notebook 01's file"),
]


def swapped_axes(
    session, images
):  # channels last by swapping height and width instead of adding an axis
    spec = session.get_inputs()[0]
    pixels = images / 255.0
    if spec.shape[1:] == [28, 28, 1]:
        pixels = pixels.transpose(0, 2, 1)
    return session.run(None, {spec.name: _fed(spec, pixels)})[0].argmax(1)


def mean_std(session, images):  # notebook 01's normalization, though the file does it inside
    spec = session.get_inputs()[0]
    return session.run(None, {spec.name: _fed(spec, (images / 255.0 - 0.1307) / 0.3081)})[0].argmax(
        1
    )


def inverted(session, images):  # black digits on white
    spec = session.get_inputs()[0]
    return session.run(None, {spec.name: _fed(spec, 1 - images / 255.0)})[0].argmax(1)


def no_float16_entry(session, images):  # a type table without float16: KeyError
    spec = session.get_inputs()[0]
    dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64}[spec.type]
    feed = (images / 255.0).reshape(len(images), *spec.shape[1:]).astype(dtype)
    return session.run(None, {spec.name: feed})[0].argmax(1)


def kept_dims(session, images):  # one column of labels
    return classify(session, images)[:, None]


def argmax_axis_0(session, images):
    spec = session.get_inputs()[0]
    return session.run(None, {spec.name: _fed(spec, images / 255.0)})[0].argmax(0)


def whole_shape(session, images):  # the declared shape, 'batch' included
    spec = session.get_inputs()[0]
    feed = (images / 255.0).reshape(spec.shape).astype(ORT_TO_NUMPY[spec.type])
    return session.run(None, {spec.name: feed})[0].argmax(1)


def labels_per_run(session, images):  # runs of 100 images, their labels left in a list
    return [classify(session, images[s : s + 100]) for s in range(0, len(images), 100)]


OWN_ROUND_03_1 = [
    (
        "labels of each run of 100 left in a list",
        labels_per_run,
        ["returns a list of 10 arrays (of 99 or 100 labels)", "one integer label per image"],
    ),
    ("height and width swapped for channels last", swapped_axes, "on a channels-last copy"),
    ("normalized with MNIST's mean and std", mean_std, "differ from the model's own"),
    ("inverted pixels", inverted, "differ from the model's own"),
    ("no float16 entry in the type table", no_float16_entry, "raised KeyError"),
    ("labels as a column [N, 1]", kept_dims, "one integer label per image"),
    (
        "argmax over the images",
        argmax_axis_0,
        "expected one label for each of the 999 images, got 10",
    ),
    ("the declared shape with its 'batch'", whole_shape, "raised"),
    ("notebook 01's file instead of the session", notebook_01_file, "labels of notebook 01's file"),
]
MISTAKES_03_1 = [  # the other mistakes are rows of REQUIREMENTS_03_1, with these words
    (
        "logits, not labels",
        lambda session, images: session.run(None, {"image": _scaled(images)})[0],
        "one integer label per image",
    ),
]


def test_classify_accepts_the_solution_and_leaves_onnx_out_of_the_kernel():
    onnx_loaded_before = "onnx" in sys.modules
    feedback = check("03.1", classify)
    assert feedback.ok, str(feedback)
    if (
        not onnx_loaded_before
    ):  # notebook 03's kernel never loads onnx: the copies are built in another process
        assert "onnx" not in sys.modules


# ------------------------------------------------------------------------------------------------ 03.2
@pytest.fixture(scope="module")
def truth():
    return shift_accuracies()


def test_shift_curve_accepts_other_right_answers():
    data = load_mnist()
    session = ort_session(built_artifact("mnist_mlp_pytorch.onnx"))
    padded = np.pad(
        data.x_test, ((0, 0), (0, 0), (6, 0))
    )  # room on the left, then a window sliding left
    windows = {k: padded[:, :, 6 - k : 34 - k] for k in range(7)}
    as_numpy = {
        k: np.float32((classify(session, w) == data.y_test).mean()) for k, w in windows.items()
    }
    assert check("03.2", as_numpy).ok, str(check("03.2", as_numpy))
    as_counts = {}
    for k in range(7):  # a digit loop with integer counts, divided at the end
        moved = np.zeros_like(data.x_test)
        moved[..., k:] = data.x_test[..., : 28 - k] if k else data.x_test
        as_counts[k] = int((classify(session, moved) == data.y_test).sum()) / len(data.y_test)
    assert check("03.2", as_counts).ok


def assert_hides(feedback, truth):
    for value in truth.values():
        for text in (
            f"{value:.1%}",
            f"{value:.2%}",
            f"{value:.4f}",
            f"{value:.3f}",
            f"{100 * value:.1f}",
        ):
            assert text not in feedback.message, (text, feedback.message)


def test_shift_curve_names_the_shifts_never_which_way_nor_how_far(truth):
    left = {
        **truth,
        1: truth[1] + 0.002,
        5: truth[5] * 0.5,
    }  # a small slip at one shift, a large one at another
    feedback = check("03.2", left)
    assert_names(feedback, "at 1 px, 5 px are not the PyTorch file's", "(5 of 7 right)")
    assert "0 px" not in feedback.message and "6 px" not in feedback.message
    for direction in ("high", "low", "more", "less", "%"):
        assert direction not in feedback.message, feedback.message
    assert feedback.message == check("03.2", {**left, 1: truth[1] - 0.002}).message
    assert_hides(feedback, truth)


def _curve(
    file="mnist_mlp_pytorch.onnx", train=False, n=10_000, move=shifted, scale=255.0, agreement=False
):
    """The 03.2 curve computed some other way: a wrong answer."""
    data = load_mnist()
    session = ort_session(built_artifact(file))
    x, y = (data.x_train[:n], data.y_train[:n]) if train else (data.x_test[:n], data.y_test[:n])
    if agreement:  # compared with the unshifted digits' predictions instead of the labels
        y = session.run(None, {"image": _scaled(x)})[0].argmax(1)
    curve = {}
    for k in range(7):
        pixels = move(x, k)[:, None].astype(np.float32) / scale
        curve[k] = float((session.run(None, {"image": pixels})[0].argmax(1) == y).mean())
    return curve


# each row's answer is made from the right curve (the fixture truth) when the test runs
REQUIREMENTS_03_2 = [
    (
        "a dict {k: accuracy} for k = 0..6",
        lambda truth: {k: truth[k] for k in range(6)},
        "missing [6]",
    ),
    (
        "accuracies as fractions",
        lambda truth: {k: 100 * v for k, v in truth.items()},
        "fractions between 0 and 1",
    ),
    ("numbers", lambda truth: {k: f"{v:.4f}" for k, v in truth.items()}, "expected a number"),
    ("shifted to the right", lambda truth: shift_accuracies(axis=1), "shifted down"),
    (
        "black comes in from the left, not np.roll",
        lambda truth: shift_accuracies(roll=True),
        "np.roll",
    ),
    ("every test digit", lambda truth: _curve(n=1000), "already at 0 px"),
    ("test digits", lambda truth: _curve(train=True), "already at 0 px"),
    ("the PyTorch file", lambda truth: _curve(file="mnist_mlp_keras.onnx"), "already at 0 px"),
    (
        "each accuracy exact",
        lambda truth: {**truth, 1: truth[1] + 0.002},
        "at 1 px are not",
    ),
]

OWN_ROUND_03_2 = [
    (
        "shifted to the left",
        lambda truth: _curve(move=lambda x, k: np.pad(x, ((0, 0), (0, 0), (0, k)))[:, :, k:]),
        "at 1 px, 2 px",
    ),
    (
        "shifted right and down",
        lambda truth: _curve(move=lambda x, k: shifted(shifted(x, k), k, axis=1)),
        "at 1 px, 2 px",
    ),
    (
        "agreement with the unshifted predictions",
        lambda truth: _curve(agreement=True),
        "already at 0 px",
    ),
    ("pixels left in 0..255", lambda truth: _curve(scale=1.0), "already at 0 px"),
    (
        "error rates instead of accuracies",
        lambda truth: {k: 1 - v for k, v in truth.items()},
        "already at 0 px",
    ),
    (
        "formatted strings",
        lambda truth: {k: f"{v:.4f}" for k, v in truth.items()},
        "expected a number",
    ),
    ("shifts 1..7", lambda truth: {k + 1: v for k, v in truth.items()}, "missing [0]"),
]


@pytest.mark.parametrize(
    "requirement, answer, message",
    REQUIREMENTS_03_2 + OWN_ROUND_03_2,
    ids=[r[0] for r in REQUIREMENTS_03_2 + OWN_ROUND_03_2],
)
def test_shift_curve_each_requirement_is_checked(requirement, answer, message, truth):
    feedback = check("03.2", answer(truth))
    assert not feedback.ok and message in feedback.message, feedback.message
    assert_hides(feedback, truth)


# ------------------------------------------------------------------------------------------------ 03.3
def _size(session, images):
    """The input's batch size, or all the images where it is dynamic (a str)."""
    size = session.get_inputs()[0].shape[0]
    return size if isinstance(size, int) else len(images)


def _padded_batches(images, size):
    """``images`` padded with black images to a multiple of ``size``, in batches of ``size``."""
    padded = np.concatenate([images, np.zeros((-len(images) % size, 28, 28), np.uint8)])
    return np.split(padded, len(padded) // size)


def pad_with_last_image(session, images):
    size = session.get_inputs()[0].shape[0]
    if isinstance(size, str):
        return classify(session, images)
    missing = -len(images) % size
    padded = np.concatenate([images, np.repeat(images[-1:], missing, axis=0)])
    return np.concatenate(
        [classify(session, part) for part in np.split(padded, len(padded) // size)]
    )[: len(images)]


def fill_a_fixed_buffer(session, images):  # one reusable zero buffer of the model's batch size
    spec = session.get_inputs()[0]
    size = spec.shape[0] if isinstance(spec.shape[0], int) else len(images)
    buffer, labels = np.zeros((size, 1, 28, 28), np.float32), []
    for start in range(0, len(images), size):
        chunk = images[start : start + size]
        buffer[:] = 0
        buffer[: len(chunk), 0] = chunk / 255
        labels += list(session.run(None, {spec.name: buffer})[0].argmax(1)[: len(chunk)])
    return np.array(labels)


def chunks_of(size):  # batches of ``size``, the last one padded, whatever the session declares
    def run(session, images):
        return np.concatenate(
            [classify(session, batch) for batch in _padded_batches(images, size)]
        )[: len(images)]

    return run


def drops_last_batch(session, images):
    size = _size(session, images)
    return np.concatenate(
        [classify(session, batch) for batch in _padded_batches(images, size)[: len(images) // size]]
    )


def keeps_padding_labels(session, images):
    return np.concatenate(
        [classify(session, batch) for batch in _padded_batches(images, _size(session, images))]
    )


def no_padding(session, images):
    size = _size(session, images)
    return np.concatenate(
        [classify(session, images[s : s + size]) for s in range(0, len(images), size)]
    )


def padded_all_at_once(session, images):  # pads to a multiple of the size, then one run
    return classify(session, np.concatenate(_padded_batches(images, _size(session, images))))[
        : len(images)
    ]


def int_of_the_batch(session, images):  # int('batch') on a dynamic batch
    size = int(session.get_inputs()[0].shape[0])
    return np.concatenate(
        [classify(session, images[s : s + size]) for s in range(0, len(images), size)]
    )


def image_hard_coded_in_batches(session, images):  # the batch size read, the names not
    runs = [
        session.run(None, {"image": _scaled(b)})[0]
        for b in _padded_batches(images, _size(session, images))
    ]
    return np.concatenate(runs).argmax(1)[: len(images)]


def dynamic_by_its_name(session, images):  # only a batch named 'batch' taken as dynamic
    size = session.get_inputs()[0].shape[0]
    if size == "batch":
        return classify(session, images)
    return np.concatenate([classify(session, b) for b in _padded_batches(images, size)])[
        : len(images)
    ]


def labels_per_batch(session, images):  # each batch's labels, left in a list
    return [classify(session, b) for b in _padded_batches(images, _size(session, images))]


REQUIREMENTS_03_3 = [
    (
        "a dynamic batch is a str, whatever its name",
        dynamic_by_its_name,
        ["a copy whose batch is dynamic and named 'unk__", "raised TypeError"],
    ),
    (
        "a function classify_in_batches(session, images_uint8)",
        "batches.py",
        "expected your function",
    ),
    (
        "the batch size read from the session",
        chunks_of(32),
        [
            "fixed to 5",
            "this model takes exactly 5 images per run, read from session.get_inputs()[0].shape[0]",
        ],
    ),
    ("batches of exactly that size", padded_all_at_once, "a run had 1024"),
    (
        "the last batch padded",
        no_padding,
        ["fixed to 32", "the last batch has fewer images: pad it"],
    ),
    (
        "one label per image (no padding labels)",
        keeps_padding_labels,
        ["999 images, got 1024", "padding are left"],
    ),
    ("every image labelled", drops_last_batch, ["999 images, got 992", "some images got no label"]),
    ("a dynamic batch (a str) works", int_of_the_batch, "the PyTorch file (dynamic batch"),
    (
        "names read from the session, like classify",
        image_hard_coded_in_batches,
        "read the input name",
    ),
    ("the session given (its weights)", notebook_01_file, "labels of notebook 01's file"),
]


def reversed_batches(session, images):
    runs = [classify(session, batch) for batch in _padded_batches(images, _size(session, images))]
    return np.concatenate(runs[::-1])[: len(images)]


def last_batch_only(session, images):  # the result overwritten in the loop
    for batch in _padded_batches(images, _size(session, images)):
        labels = classify(session, batch)
    return labels


def shape_one_as_size(session, images):  # the wrong axis of the shape
    batches = _padded_batches(images, session.get_inputs()[0].shape[1])
    return np.concatenate([classify(session, batch) for batch in batches])[: len(images)]


def fixed_size_for_dynamic_too(session, images):  # batches of 32 even where the batch is dynamic
    size = session.get_inputs()[0].shape[0]
    size = size if isinstance(size, int) else 32
    return chunks_of(size)(session, images)


OWN_ROUND_03_3 = [
    (
        "each batch's labels left in a list",
        labels_per_batch,
        ["returns a list of 1 array (of 999 labels)", "one integer label per image"],
    ),
    ("everything padded, one run", padded_all_at_once, "a run had 1024"),
    ("int() of a dynamic batch", int_of_the_batch, "raised ValueError"),
    ("notebook 01's file instead of the session", notebook_01_file, "labels of notebook 01's file"),
    ("batches concatenated in reverse", reversed_batches, "differ from the model's own"),
    (
        "only the last batch's labels kept",
        last_batch_only,
        "expected one label for each of the 999 images, got 32",
    ),
    (
        "shape[1] read as the batch size",
        shape_one_as_size,
        "this model takes exactly 32 images per run",
    ),
    ("the input name hard-coded", image_hard_coded_in_batches, "read the input name"),
]
MISTAKES_03_3 = [  # the other mistakes are rows of REQUIREMENTS_03_3, with these words
    ("classify unbatched", classify, ["fixed to 32", "exactly 32 images per run", "a run had 999"]),
]


@pytest.mark.parametrize(
    "exercise, answer, named",
    [
        *rows("03.1 requirement", REQUIREMENTS_03_1, "03.1"),
        *rows("03.1 own round", OWN_ROUND_03_1, "03.1"),
        *rows("03.1 mistake", MISTAKES_03_1, "03.1"),
        *rows("03.3 requirement", REQUIREMENTS_03_3, "03.3"),
        *rows("03.3 own round", OWN_ROUND_03_3, "03.3"),
        *rows("03.3 mistake", MISTAKES_03_3, "03.3"),
    ],
)
def test_classify_and_batches_name_the_mistake(exercise, answer, named):
    assert_names(check(exercise, answer), *([named] if isinstance(named, str) else named))


@pytest.mark.parametrize(
    "exercise, answer",
    [
        *right("03.1", classify_by_type_name, classify_one_at_a_time),
        *right("03.3", pad_with_last_image, fill_a_fixed_buffer, fixed_size_for_dynamic_too),
    ],
)
def test_other_right_answers_pass(exercise, answer):
    feedback = check(exercise, answer)
    assert feedback.ok, str(feedback)
