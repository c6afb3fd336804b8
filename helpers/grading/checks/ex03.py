"""Checks for notebook 03's exercises with numpy and onnxruntime only (the copies are built in another process)."""

from __future__ import annotations

import functools
import numbers
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from helpers.data.mnist import load_mnist
from helpers.grading.checks._common import (
    Wrong,
    contract_input,
    require_callable,
    require_keys,
    rng,
    seed,
)
from helpers.grading.checks._common import (
    session as _session,
)
from helpers.pipeline.artifacts import built_artifact

SHIFTS = (0, 1, 2, 3, 4, 5, 6)
# Copies of the PyTorch file, each with weights of its own (see NOISE): file name -> (description, input, output,
# dtype, shape); 03.1 tries LAYOUT_COPIES in this order (each new one differs in one more way), 03.3 FIXED_BATCHES
LAYOUT_COPIES = {
    "fp16_pixel.onnx": (
        "a float16 copy whose input is 'pixel'",
        "pixel",
        "scores",
        "float16",
        ["batch", 1, 28, 28],
    ),
    "float64.onnx": (
        "a float64 copy [batch, 1, 28, 28]",
        "input",
        "output",
        "float64",
        ["batch", 1, 28, 28],
    ),
    "flat.onnx": (
        "a float32 copy with a flat input [batch, 784]",
        "digits",
        "class_scores",
        "float32",
        ["batch", 784],
    ),
    "channels_last.onnx": (
        "a channels-last copy [batch, 28, 28, 1]",
        "input_1",
        "output_0",
        "float32",
        ["batch", 28, 28, 1],
    ),
    "flat_float64.onnx": (
        "a copy with a flat float64 input [batch, 784]",
        "x",
        "y",
        "float64",
        ["batch", 784],
    ),
}
FIXED_BATCHES = {
    "batch32.onnx": (
        "a copy whose batch is fixed to 32 (input 'input_32')",
        "input_32",
        "probs_32",
        "float32",
        [32, 1, 28, 28],
    ),
    "batch5.onnx": (
        "a copy whose batch is fixed to 5 (input 'x5')",
        "x5",
        "y5",
        "float32",
        [5, 1, 28, 28],
    ),
    "dynamic_unk.onnx": (  # a dynamic batch is a str whatever its name: tf2onnx writes unk__N
        "a copy whose batch is dynamic and named {batch!r} (input 'input_1')",
        "input_1",
        "output_0",
        "float32",
        ["{batch}", 1, 28, 28],
    ),
}
NOISE = 0.8  # each copy's weights move by 0.8 x their own spread: another classifier (a few % of labels differ)


def named(copies: dict, seed: int) -> dict:
    """``copies`` with this seed's name for a dynamic batch (``{batch}`` in a description or shape)."""
    batch = f"unk__{seed % 1000}"
    return {
        filename: (
            description.format(batch=batch),
            name_in,
            name_out,
            dtype,
            [batch if d == "{batch}" else d for d in shape],
        )
        for filename, (description, name_in, name_out, dtype, shape) in copies.items()
    }


def build_copies(source: Path, folder: Path, seed: int) -> None:
    """Write LAYOUT_COPIES and FIXED_BATCHES into ``folder`` (needs ``onnx``), each beside its reference labels."""
    import onnx
    from onnx import TensorProto, helper

    from helpers.grading.checks._common import varied_model

    types = {
        "float16": TensorProto.FLOAT16,
        "float64": TensorProto.DOUBLE,
        "float32": TensorProto.FLOAT,
    }
    copies = named({**LAYOUT_COPIES, **FIXED_BATCHES}, seed)
    for k, (filename, (_, name_in, name_out, dtype, shape)) in enumerate(copies.items()):
        model = varied_model(onnx.load(source), seed * 16 + k, relative_noise=NOISE)
        # the reference: the copy's weights under the contract's names and layout (float32 'image' -> 'logits')
        onnx.save(model, folder / f"reference_{filename}")
        graph = model.graph
        if shape[-1] == 1:
            to_image = helper.make_node("Transpose", ["as_float"], ["image"], perm=[0, 3, 1, 2])
        else:
            graph.initializer.append(
                helper.make_tensor("chw", TensorProto.INT64, [4], [-1, 1, 28, 28])
            )
            to_image = helper.make_node("Reshape", ["as_float", "chw"], ["image"])
        body = list(graph.node)
        del graph.node[:], graph.input[:], graph.output[:]
        graph.node.extend(
            [
                helper.make_node("Cast", [name_in], ["as_float"], to=TensorProto.FLOAT),
                to_image,
                *body,
                helper.make_node("Cast", ["logits"], [name_out], to=types[dtype]),
            ]
        )
        graph.input.append(helper.make_tensor_value_info(name_in, types[dtype], shape))
        graph.output.append(helper.make_tensor_value_info(name_out, types[dtype], [shape[0], 10]))
        onnx.checker.check_model(model)
        onnx.save(model, folder / filename)


def _setting(copies: dict) -> tuple:
    """(digits, the PyTorch file's labels, {description: (session, labels)}); the copies built in another process."""
    source, copies = built_artifact("mnist_mlp_pytorch.onnx"), named(copies, seed())
    digits = load_mnist().x_test[rng().choice(10_000, 999, replace=False)]  # 999 = 31*32+7
    original = _session(source)
    labels = _labels_of(original, digits)
    runs = {"the PyTorch file": (original, labels)}
    with tempfile.TemporaryDirectory(prefix="ex03-copies-") as folder:
        result = subprocess.run(
            [sys.executable, "-m", "helpers.grading.checks.ex03", str(source), folder, str(seed())],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"could not build the exercise's model copies:\n{result.stderr}"
            )  # a checker bug
        for name, (description, *_) in copies.items():
            reference = _labels_of(_session(Path(folder) / f"reference_{name}"), digits)
            runs[description] = (_session(Path(folder) / name), reference)
    return digits, labels, runs


def _labels_of(session, digits, scale=1.0) -> np.ndarray:
    """The checker's own classification: the contract, on a file that follows it."""
    return session.run(None, {"image": contract_input(digits) * scale})[0].argmax(1)


_ERROR_HINTS = (
    ("input name|Required inputs", "read the input name from session.get_inputs()[0].name"),
    ("output name", "read the output name from session.get_outputs()[0].name (or pass None)"),
    ("data type", "read the element type from session.get_inputs()[0].type"),
    ("rank|dimensions", "reshape the images to the input's layout, session.get_inputs()[0].shape"),
)


def _hint(message: str) -> str:
    """What an ONNX Runtime error says about the learner's function (_ERROR_HINTS: error text -> hint)."""
    batch = re.search(r"index: 0 Got: (\d+) Expected: (\d+)", message)
    if batch:  # a fixed batch dimension: what came against what the session declares
        got, size = map(int, batch.groups())
        return (
            f"this model takes exactly {size} images per run, read from session.get_inputs()[0].shape[0]; "
            + (
                "the last batch has fewer images: pad it (e.g. with zeros)"
                if got < size
                else f"a run had {got}"
            )
        )
    for pattern, hint in _ERROR_HINTS:
        if re.search(pattern, message):
            return hint
    return "compare your feed with session.get_inputs() and session.get_outputs()"


def _agree(function, session, digits, want, what: str, unscaled=None, original=None) -> None:
    """``Wrong`` unless the learner's labels are the file's own (``original``: notebook 01's file's labels)."""
    try:
        result = function(session, digits)
    except Exception as err:  # whatever the learner's function raises is reported, not hidden
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise Wrong(
            f"on {what}, your function raised {type(err).__name__}: {first} ({_hint(str(err))})"
        ) from err
    if isinstance(result, (list, tuple)) and any(np.ndim(part) > 0 for part in result):
        lengths = sorted({len(np.atleast_1d(part)) for part in result})
        raise Wrong(
            f"on {what}, your function returns a {type(result).__name__} of {len(result)} "
            f"array{'' if len(result) == 1 else 's'} (of "
            f"{' or '.join(map(str, lengths))} labels); expected one array with one integer label per "
            "image, all runs joined"
        )
    got = np.asarray(result)
    if got.ndim != 1 or not np.issubdtype(got.dtype, np.integer):
        raise Wrong(
            f"expected one integer label per image, got {got.dtype} {list(got.shape)} (on {what}); argmax "
            "over the classes gives them"
        )
    if len(got) != len(want):
        extra = (
            "labels of the padding are left in"
            if len(got) > len(want)
            else "some images got no label"
        )
        raise Wrong(
            f"on {what}, expected one label for each of the {len(want)} images, got {len(got)}: {extra}"
        )
    if (
        got == want
    ).mean() < 0.995:  # float16 may flip a rare borderline digit; a wrong scale or layout many
        hint = (
            "scale the pixels to 0..1 (uint8 / 255)"
            if unscaled is not None and (got == unscaled).mean() > 0.99
            else "compare your feed with what the session declares"
        )
        if original is not None and (got == original).mean() >= 0.995:
            hint = (
                "they are the labels of notebook 01's file, and this copy has other weights: classify with the "
                "session passed in"
            )
        first = int(np.flatnonzero(got != want)[0])
        raise Wrong(
            f"on {what}, your labels differ from the model's own on {(got != want).mean():.0%} of the "
            f"images (first at image {first}): {hint}"
        )


def check_classify(answer):
    require_callable(answer, "classify(session, images_uint8)")
    digits, original, runs = _setting(LAYOUT_COPIES)
    unscaled = _labels_of(runs["the PyTorch file"][0], digits, 255.0)
    for description, (session, want) in runs.items():
        _agree(answer, session, digits, want, description, unscaled, original)
    return [
        f"each model's own labels on {', '.join(runs)}",
        "names, element type, layout and weights all come from the session: nothing about the file is hard-coded",
    ]


def shifted(digits: np.ndarray, k: int, axis: int = 2, roll: bool = False) -> np.ndarray:
    """Digits moved k pixels along ``axis`` (2 = right, 1 = down), the gap filled with black (or wrapped)."""
    if roll:
        return np.roll(digits, k, axis=axis)
    return np.pad(digits, [(0, 0)] + [(k, 0) if a == axis else (0, 0) for a in (1, 2)])[:, :28, :28]


@functools.lru_cache(maxsize=4)  # a pure function of its arguments: computed once per kernel
def _shift_accuracies(axis: int, roll: bool) -> tuple:
    data, session = load_mnist(), _session(built_artifact("mnist_mlp_pytorch.onnx"))
    return tuple(
        float((_labels_of(session, shifted(data.x_test, k, axis, roll)) == data.y_test).mean())
        for k in SHIFTS
    )


def shift_accuracies(axis: int = 2, roll: bool = False) -> dict:
    """Accuracy of the PyTorch file on the 10,000 test digits shifted by each of SHIFTS pixels."""
    return dict(zip(SHIFTS, _shift_accuracies(axis, roll)))


def check_shift_curve(answer):
    require_keys(answer, SHIFTS, "{shift in pixels: accuracy}")
    not_numbers = [
        f"{k}: {type(answer[k]).__name__}"
        for k in SHIFTS
        if not isinstance(answer[k], numbers.Real) or isinstance(answer[k], bool)
    ]
    if not_numbers:
        raise Wrong(f"expected a number (a fraction) for each shift, got {', '.join(not_numbers)}")
    claimed = {k: float(answer[k]) for k in SHIFTS}
    if any(not 0.0 <= v <= 1.0 for v in claimed.values()):
        raise Wrong("expected accuracies as fractions between 0 and 1 (not percentages)")
    truth = shift_accuracies()
    if all(abs(claimed[k] - truth[k]) <= 1e-4 for k in SHIFTS):
        return [
            ", ".join(f"{k} px: {truth[k]:.1%}" for k in SHIFTS),
            "an MLP learns each pixel position separately: a small, off-centre drawing looks like another digit",
        ]
    for label, other in (
        ("wrapped around with np.roll", shift_accuracies(roll=True)),
        ("shifted down (axis 1) instead of right", shift_accuracies(axis=1)),
    ):
        if all(abs(claimed[k] - other[k]) <= 1e-4 for k in SHIFTS):
            raise Wrong(
                f"your numbers are those of the digits {label}; expected a shift to the right (axis 2 of "
                "[N, 28, 28]) with the gap filled with zeros"
            )
    # which shifts are off, never which way nor by how much: a direction would let a guess converge
    wrong = [f"{k} px" for k in SHIFTS if abs(claimed[k] - truth[k]) > 1e-4]
    if wrong[0] == "0 px":
        raise Wrong(
            "not yet: already at 0 px (no shift) your accuracy is not the PyTorch file's on the test "
            "digits; get that one right first: all 10,000 test digits, scaled to 0..1, each prediction "
            "compared with its label"
        )
    raise Wrong(
        f"not yet: your accuracies at {', '.join(wrong)} are not the PyTorch file's ({len(SHIFTS) - len(wrong)} "
        f"of {len(SHIFTS)} right): move each of the 10,000 test digits k pixels to the right, the gap black, "
        "and compare each prediction with its label"
    )


def check_batches(answer):
    require_callable(answer, "classify_in_batches(session, images_uint8)")
    digits, original, runs = _setting(FIXED_BATCHES)
    for description, (session, want) in runs.items():
        if description == "the PyTorch file":
            description += " (dynamic batch: one run is enough)"
        _agree(answer, session, digits, want, description, original=original)
    sizes = ", ".join(str(s[0]) for *_, s in FIXED_BATCHES.values() if isinstance(s[0], int))
    return [
        f"copies with a batch fixed to {sizes}: each copy's own labels for all {len(digits)} images, the last "
        "batch padded",
        "the PyTorch file and a copy whose dynamic batch has another name: one run each",
    ]


# exercise id -> checker (helpers.grading.exercises.check looks answers up here)
CHECKS = {
    "03.1": check_classify,
    "03.2": check_shift_curve,
    "03.3": check_batches,
}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)


# ONNX Runtime's element type names -> numpy dtypes (the ones an image input may have)
ORT_TO_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
}


def classify(session, images_uint8: np.ndarray) -> np.ndarray:
    """Predicted class per uint8 [N, 28, 28] image; every name, dtype and layout comes from the session."""
    image_input = session.get_inputs()[0]
    output_name = session.get_outputs()[0].name
    layout = image_input.shape[
        1:
    ]  # [1, 28, 28], [28, 28, 1] or [784]: the same pixels in another order
    pixels = (images_uint8 / 255.0).reshape(len(images_uint8), *layout)
    feed = pixels.astype(ORT_TO_NUMPY[image_input.type])
    logits = session.run([output_name], {image_input.name: feed})[0]
    return logits.argmax(axis=1)


def classify_in_batches(session, images_uint8: np.ndarray) -> np.ndarray:
    """Like ``classify``, in runs of exactly the model's batch size when that size is fixed (an int)."""
    size = session.get_inputs()[0].shape[0]
    if not isinstance(size, int):  # a named dynamic dimension such as 'batch': any number at once
        return classify(session, images_uint8)
    labels = []
    for start in range(0, len(images_uint8), size):
        chunk = images_uint8[start : start + size]
        padding = np.zeros(
            (size - len(chunk), *chunk.shape[1:]), chunk.dtype
        )  # black images fill the last run
        labels.append(classify(session, np.concatenate([chunk, padding]))[: len(chunk)])
    return np.concatenate(labels)


def solve_1(workdir: Path):
    return classify


def solve_2(workdir: Path):
    import onnxruntime as ort

    from helpers.data.mnist import load_mnist
    from helpers.pipeline.artifacts import built_artifact

    data = load_mnist()
    session = ort.InferenceSession(
        built_artifact("mnist_mlp_pytorch.onnx"), providers=["CPUExecutionProvider"]
    )
    accuracy = {}
    for k in range(7):
        moved = np.zeros_like(data.x_test)
        moved[:, :, k:] = data.x_test[
            :, :, : 28 - k
        ]  # k pixels to the right, black comes in from the left
        accuracy[k] = float((classify(session, moved) == data.y_test).mean())
    return accuracy


def solve_3(workdir: Path):
    return classify_in_batches


if (
    __name__ == "__main__"
):  # python -m helpers.grading.checks.ex03 SOURCE.onnx FOLDER SEED: build the copies (see _setting)
    build_copies(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
