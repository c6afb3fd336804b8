"""Checks for the exercises of notebook 03 (numpy and onnxruntime only).

Like the notebook, these checks use numpy and onnxruntime in the learner's kernel, not even the ``onnx`` package:
the copies of the PyTorch file that 03.1 and 03.3 try a function on are built by ``python -m helpers.checks.ex03``
in a separate process (that one uses ``onnx``).
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from helpers.checks._common import contract_input, require_callable, require_keys, session as _session
from helpers.checks._common import Wrong

SHIFTS = (0, 1, 2, 3, 4, 5, 6)

# Copies of the PyTorch file that differ from the contract: file name -> (description, input, output, dtype, shape)
LAYOUT_COPIES = {
    "fp16_pixel.onnx": ("a float16 copy whose input is 'pixel' and output 'scores'", "pixel", "scores",
                        "float16", ["batch", 1, 28, 28]),
    "flat_float64.onnx": ("a copy with a flat float64 input 'x' [batch, 784] and output 'y'", "x", "y",
                          "float64", ["batch", 784]),
    "channels_last.onnx": ("a copy with a channels-last input 'input_1' [batch, 28, 28, 1] and output 'output_0'",
                           "input_1", "output_0", "float32", ["batch", 28, 28, 1]),
}
FIXED_BATCHES = {"batch32.onnx": 32, "batch5.onnx": 5}  # copies whose batch dimension is a fixed number


def _model_paths() -> dict:
    from helpers.notebooks import require_artifact

    return {"PyTorch": require_artifact("mnist_mlp_pytorch.onnx"), "Keras": require_artifact("mnist_mlp_keras.onnx")}


def _contract_predictions(session, digits: np.ndarray) -> np.ndarray:
    """The checker's own classification: the contract, on a file that follows it."""
    return session.run(None, {session.get_inputs()[0].name: contract_input(digits)})[0].argmax(1)


def build_copies(source: Path, folder: Path) -> None:
    """Write the copies of LAYOUT_COPIES and FIXED_BATCHES next to each other in ``folder`` (needs ``onnx``).

    Each copy wraps the original graph: new input -> Cast / Reshape / Transpose -> 'image' -> graph -> 'logits'
    -> Cast or Identity -> new output, so its answers are the original's on the same pixels.
    """
    import onnx
    from onnx import TensorProto, helper

    types = {"float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT}
    for filename, (_, name_in, name_out, dtype, shape) in LAYOUT_COPIES.items():
        model = onnx.load(source)
        graph = model.graph
        nodes = [helper.make_node("Cast", [name_in], ["as_float"], to=TensorProto.FLOAT)]
        if shape == ["batch", 784]:
            graph.initializer.append(helper.make_tensor("chw", TensorProto.INT64, [4], [-1, 1, 28, 28]))
            nodes.append(helper.make_node("Reshape", ["as_float", "chw"], ["image"]))
        elif shape == ["batch", 28, 28, 1]:
            nodes.append(helper.make_node("Transpose", ["as_float"], ["image"], perm=[0, 3, 1, 2]))
        else:
            nodes.append(helper.make_node("Identity", ["as_float"], ["image"]))
        nodes_out = [helper.make_node("Cast", ["logits"], [name_out], to=types[dtype])]
        body = list(graph.node)
        del graph.node[:]
        graph.node.extend(nodes + body + nodes_out)
        del graph.input[:]
        graph.input.append(helper.make_tensor_value_info(name_in, types[dtype], shape))
        del graph.output[:]
        graph.output.append(helper.make_tensor_value_info(name_out, types[dtype], ["batch", 10]))
        onnx.checker.check_model(model)
        onnx.save(model, folder / filename)
    for filename, size in FIXED_BATCHES.items():
        model = onnx.load(source)
        for value in (model.graph.input[0], model.graph.output[0]):
            value.type.tensor_type.shape.dim[0].dim_value = size  # replaces the dynamic 'batch'
        onnx.checker.check_model(model)
        onnx.save(model, folder / filename)


@contextlib.contextmanager
def _copies():
    """A temporary folder holding the copies, built in another process so this kernel never imports ``onnx``."""
    with tempfile.TemporaryDirectory(prefix="ex03-copies-") as tmp:
        yield _build_in_subprocess(Path(tmp))


def _build_in_subprocess(folder: Path) -> Path:
    result = subprocess.run([sys.executable, "-m", "helpers.checks.ex03", str(_model_paths()["PyTorch"]), str(folder)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"could not build the exercise's model copies:\n{result.stderr}")  # a checker bug
    return folder


def _hint(message: str) -> str:
    """What an ONNX Runtime error says about the learner's function."""
    if "Required inputs" in message or "Invalid input name" in message:
        return "read the input name from session.get_inputs()[0].name"
    if "output name" in message.lower():
        return "read the output name from session.get_outputs()[0].name (or pass None to get every output)"
    if "data type" in message:
        return "read the element type from session.get_inputs()[0].type and convert the pixels with .astype(...)"
    if "Invalid rank" in message or "Got:" in message:
        return "reshape the images to the input's layout, session.get_inputs()[0].shape (the batch first)"
    return "look at what the session declares: session.get_inputs() and session.get_outputs()"


def _labels(function, session, digits, what: str) -> np.ndarray:
    try:
        got = function(session, digits)
    except Exception as err:  # whatever the learner's function raises is reported, not hidden
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
        raise Wrong(f"on {what}, your function raised {type(err).__name__}: {first} ({_hint(str(err))})") from err
    return _as_labels(got, what)


def _as_labels(got, what: str) -> np.ndarray:
    got = np.asarray(got)
    if got.ndim != 1 or not np.issubdtype(got.dtype, np.integer):
        raise Wrong(f"expected one integer label per image, got {got.dtype} {got.shape} (on {what}); argmax over "
                    "the classes gives them")
    return got


def _compare(got, want, labels, what: str, unscaled=None) -> float:
    """Fraction of ``got`` equal to the model's own labels ``want``; a Wrong naming the mistake when too few are.

    ``unscaled``: the model's labels for pixels fed as 0..255, the usual reason for a low agreement.
    """
    if got.shape != want.shape:
        raise Wrong(f"expected {len(want)} labels on {what}, got {len(got)}")
    agree = float((got == want).mean())
    if agree < 0.995:  # float16 pixels may flip a rare borderline digit; a wrong scale or layout flips many
        hint = ""
        if unscaled is not None and (got == unscaled).mean() >= 0.995:
            hint = ": these are the labels of pixels fed as 0..255; scale them to 0..1 (uint8 / 255)"
        raise Wrong(f"on {what} expected the model's own predictions, got labels that agree with them on only "
                    f"{agree:.1%} of the digits (accuracy {(got == labels).mean():.1%}){hint}")
    return agree


def check_classify(answer):
    from helpers.mnist import load_mnist

    require_callable(answer, "classify(session, images_uint8)")
    data = load_mnist()
    digits, labels = data.x_test[:2000], data.y_test[:2000]
    original = _session(_model_paths()["PyTorch"])
    want = _contract_predictions(original, digits)
    unscaled = original.run(None, {"image": contract_input(digits) * 255})[0].argmax(1)
    _compare(_labels(answer, original, digits, "the PyTorch file"), want, labels, "the PyTorch file", unscaled)
    details = ["the PyTorch file: the model's own labels"]
    with _copies() as folder:
        sessions = {filename: _session(folder / filename) for filename in LAYOUT_COPIES}
    for filename, (what, *_rest) in LAYOUT_COPIES.items():
        agree = _compare(_labels(answer, sessions[filename], digits, what), want, labels, what, unscaled)
        details.append(f"{what}: {agree:.2%} of the labels equal the original file's")
    details.append("names, element type and layout all come from the session: nothing about the file is hard-coded")
    return details


def shifted(digits: np.ndarray, k: int, axis: int = 2, roll: bool = False) -> np.ndarray:
    """Digits moved k pixels along ``axis`` (2 = right, 1 = down), the gap filled with black (or wrapped)."""
    if roll:
        return np.roll(digits, k, axis=axis)
    out = np.zeros_like(digits)
    index = [slice(None)] * digits.ndim
    source = list(index)
    index[axis], source[axis] = slice(k, None), slice(0, digits.shape[axis] - k)
    out[tuple(index)] = digits[tuple(source)]
    return out


def shift_accuracies(axis: int = 2, roll: bool = False) -> dict:
    """Accuracy of the PyTorch file on the 10,000 test digits shifted by each of SHIFTS pixels."""
    from helpers.mnist import load_mnist

    data = load_mnist()
    session = _session(_model_paths()["PyTorch"])
    return {k: float((_contract_predictions(session, shifted(data.x_test, k, axis, roll)) == data.y_test).mean())
            for k in SHIFTS}


def check_shift_curve(answer):
    require_keys(answer, SHIFTS, "{shift in pixels: accuracy}")
    claimed = {k: float(answer[k]) for k in SHIFTS}
    if any(not 0.0 <= v <= 1.0 for v in claimed.values()):
        raise Wrong(f"expected accuracies as fractions between 0 and 1, got {claimed}")
    truth = shift_accuracies()
    if all(abs(claimed[k] - truth[k]) <= 1e-4 for k in SHIFTS):
        ratio = truth[4] / truth[0]
        return [", ".join(f"{k} px: {truth[k]:.1%}" for k in SHIFTS),
                f"4 pixels to the right keep {ratio:.0%} of the accuracy: an MLP learns each pixel position "
                "separately, so a small, off-centre drawing looks like another digit to it"]
    for label, other in (("wrapped around with np.roll", shift_accuracies(roll=True)),
                         ("shifted down (axis 1) instead of right", shift_accuracies(axis=1))):
        if all(abs(claimed[k] - other[k]) <= 1e-4 for k in SHIFTS):
            raise Wrong(f"your numbers are the digits {label}; expected a shift to the right (axis 2 of "
                        "[N, 28, 28]) with the gap filled with zeros")
    wrong = [f"{k} px: expected {truth[k]:.4f}, got {claimed[k]:.4f}" for k in SHIFTS
             if abs(claimed[k] - truth[k]) > 1e-4]
    raise Wrong("not quite: " + "; ".join(wrong))


def check_batches(answer):
    from helpers.mnist import load_mnist

    require_callable(answer, "classify_in_batches(session, images_uint8)")
    data = load_mnist()
    digits, labels = data.x_test[:999], data.y_test[:999]  # 999 = 31 x 32 + 7 = 199 x 5 + 4: a partial last batch
    original = _session(_model_paths()["PyTorch"])
    want = _contract_predictions(original, digits)
    with _copies() as folder:
        sessions = {filename: _session(folder / filename) for filename in FIXED_BATCHES}
    details = []
    for filename, size in FIXED_BATCHES.items():
        what = f"a copy whose batch is fixed to {size}"
        try:
            got = answer(sessions[filename], digits)
        except Exception as err:  # the learner's function: report what ONNX Runtime said, and what it means
            message = str(err)
            if f"Got: {len(digits)} Expected: {size}" in message:
                hint = f"you sent all {len(digits)} images at once; this model takes exactly {size} per run"
            elif f"Got: 32 Expected: {size}" in message:
                hint = f"batches of 32 on a model that takes {size}: read the size from session.get_inputs()[0].shape[0]"
            elif f"Expected: {size}" in message:
                hint = (f"the last batch has {len(digits) % size} images: pad it to {size} (e.g. with zeros) and "
                        "drop the padding's labels")
            else:
                hint = f"{type(err).__name__}: {message.strip().splitlines()[0][:200] if message.strip() else ''}"
            raise Wrong(f"on {what}: {hint}") from err
        got = _as_labels(got, what)
        if len(got) == len(digits) - len(digits) % size:
            raise Wrong(f"on {what} expected {len(digits)} labels, got {len(got)}: the last, partial batch of "
                        f"{len(digits) % size} images is missing (pad it to {size})")
        if len(got) == len(digits) + (-len(digits)) % size:
            raise Wrong(f"on {what} expected {len(digits)} labels, got {len(got)}: drop the labels of the padding")
        _compare(got, want, labels, what)
        details.append(f"{what}: {int(np.ceil(len(digits) / size))} runs, the original file's labels for all "
                       f"{len(digits)} images")
    got = _labels(answer, original, digits, "the PyTorch file (dynamic batch)")
    _compare(got, want, labels, "the PyTorch file (dynamic batch)")
    details.append("the PyTorch file, whose batch dimension is the string 'batch': one run is enough")
    return details


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "03.1": check_classify,
    "03.2": check_shift_curve,
    "03.3": check_batches,
}


if __name__ == "__main__":  # python -m helpers.checks.ex03 SOURCE.onnx FOLDER: build the copies (see _copies)
    build_copies(Path(sys.argv[1]), Path(sys.argv[2]))
