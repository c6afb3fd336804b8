"""Checks for the exercises of notebook 03 (numpy and onnxruntime only).

Like the notebook, these checks use numpy and onnxruntime in the learner's kernel, not even the ``onnx`` package:
the copies of the PyTorch file that 03.1 and 03.3 try a function on are built by ``python -m helpers.checks.ex03``
in a separate process (that one uses ``onnx``). Functions run on digits the learner did not pick.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from helpers.checks._common import Wrong, contract_input, require_callable, require_keys, session as _session

SHIFTS = (0, 1, 2, 3, 4, 5, 6)
# Copies of the PyTorch file that differ from the contract: file name -> (description, input, output, dtype, shape)
LAYOUT_COPIES = {
    "fp16_pixel.onnx": ("a float16 copy whose input is 'pixel'", "pixel", "scores", "float16", ["batch", 1, 28, 28]),
    "flat_float64.onnx": ("a copy with a flat float64 input [batch, 784]", "x", "y", "float64", ["batch", 784]),
    "channels_last.onnx": ("a channels-last copy [batch, 28, 28, 1]", "input_1", "output_0", "float32",
                           ["batch", 28, 28, 1]),
}
FIXED_BATCHES = {"batch32.onnx": 32, "batch5.onnx": 5}  # copies whose batch dimension is a fixed number


def build_copies(source: Path, folder: Path) -> None:
    """Write LAYOUT_COPIES and FIXED_BATCHES in ``folder`` (needs ``onnx``): each wraps the original graph,
    new input -> Cast / Reshape / Transpose -> 'image' -> graph -> 'logits' -> Cast -> new output."""
    import onnx
    from onnx import TensorProto, helper

    types = {"float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT}
    for filename, (_, name_in, name_out, dtype, shape) in LAYOUT_COPIES.items():
        model = onnx.load(source)
        graph = model.graph
        graph.initializer.append(helper.make_tensor("chw", TensorProto.INT64, [4], [-1, 1, 28, 28]))
        to_image = helper.make_node("Transpose", ["as_float"], ["image"], perm=[0, 3, 1, 2]) if len(shape) == 4 and \
            shape[-1] == 1 else helper.make_node("Reshape", ["as_float", "chw"], ["image"])
        body = list(graph.node)
        del graph.node[:], graph.input[:], graph.output[:]
        graph.node.extend([helper.make_node("Cast", [name_in], ["as_float"], to=TensorProto.FLOAT), to_image, *body,
                           helper.make_node("Cast", ["logits"], [name_out], to=types[dtype])])
        graph.input.append(helper.make_tensor_value_info(name_in, types[dtype], shape))
        graph.output.append(helper.make_tensor_value_info(name_out, types[dtype], ["batch", 10]))
        onnx.checker.check_model(model)
        onnx.save(model, folder / filename)
    for filename, size in FIXED_BATCHES.items():
        model = onnx.load(source)
        for value in (model.graph.input[0], model.graph.output[0]):
            value.type.tensor_type.shape.dim[0].dim_value = size  # replaces the dynamic 'batch'
        onnx.save(model, folder / filename)


def _setting(filenames) -> tuple:
    """(digits, the PyTorch file's labels for them, {filename: session of a copy}); copies built in another
    process so that this kernel never imports ``onnx``."""
    from helpers.mnist import load_mnist
    from helpers.notebooks import require_artifact

    source = require_artifact("mnist_mlp_pytorch.onnx")
    digits = load_mnist().x_test[np.random.default_rng(303).choice(10_000, 999, replace=False)]  # 999 = 31*32+7
    original = _session(source)
    with tempfile.TemporaryDirectory(prefix="ex03-copies-") as folder:
        result = subprocess.run([sys.executable, "-m", "helpers.checks.ex03", str(source), folder],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"could not build the exercise's model copies:\n{result.stderr}")  # a checker bug
        sessions = {name: _session(Path(folder) / name) for name in filenames}
    return digits, _labels_of(original, digits), {"the PyTorch file": original, **sessions}


def _labels_of(session, digits, scale=1.0) -> np.ndarray:
    """The checker's own classification: the contract, on a file that follows it."""
    return session.run(None, {"image": contract_input(digits) * scale})[0].argmax(1)


def _hint(message: str) -> str:
    """What an ONNX Runtime error says about the learner's function."""
    for needle, hint in (("input name", "read the input name from session.get_inputs()[0].name"),
                         ("Required inputs", "read the input name from session.get_inputs()[0].name"),
                         ("output name", "read the output name from session.get_outputs()[0].name (or pass None)"),
                         ("data type", "read the element type from session.get_inputs()[0].type"),
                         ("Got: 32 Expected: 5", "read the batch size from session.get_inputs()[0].shape[0]"),
                         ("Got: 999 Expected", "this model takes a fixed number of images per run"),
                         ("Got: 7 Expected: 32", "the last batch has fewer images: pad it (e.g. with zeros)"),
                         ("Got: 4 Expected: 5", "the last batch has fewer images: pad it (e.g. with zeros)"),
                         ("rank", "reshape the images to the input's layout, session.get_inputs()[0].shape")):
        if needle in message:
            return hint
    return "compare your feed with session.get_inputs() and session.get_outputs()"


def _agree(function, session, digits, want, what: str, unscaled=None) -> None:
    """The learner's labels must be the file's own (ONNX Runtime's message and a hint if the function fails)."""
    try:
        got = np.asarray(function(session, digits))
    except Exception as err:  # whatever the learner's function raises is reported, not hidden
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise Wrong(f"on {what}, your function raised {type(err).__name__}: {first} ({_hint(str(err))})") from err
    if got.ndim != 1 or not np.issubdtype(got.dtype, np.integer):
        raise Wrong(f"expected one integer label per image, got {got.dtype} {list(got.shape)} (on {what}); argmax "
                    "over the classes gives them")
    if len(got) != len(want):
        extra = "labels of the padding are left in" if len(got) > len(want) else "some images got no label"
        raise Wrong(f"on {what}, expected one label for each of the {len(want)} images, got {len(got)}: {extra}")
    if (got == want).mean() < 0.995:  # float16 may flip a rare borderline digit; a wrong scale or layout many
        hint = "scale the pixels to 0..1 (uint8 / 255)" if unscaled is not None and (got == unscaled).mean() > 0.99 \
            else "compare your feed with what the session declares"
        first = int(np.flatnonzero(got != want)[0])
        raise Wrong(f"on {what}, your labels differ from the model's own on {(got != want).mean():.0%} of the "
                    f"images (first at image {first}): {hint}")


def check_classify(answer):
    require_callable(answer, "classify(session, images_uint8)")
    digits, want, sessions = _setting(LAYOUT_COPIES)
    unscaled = _labels_of(sessions["the PyTorch file"], digits, 255.0)
    descriptions = {name: LAYOUT_COPIES[name][0] if name in LAYOUT_COPIES else name for name in sessions}
    for name, session in sessions.items():
        _agree(answer, session, digits, want, descriptions[name], unscaled)
    return [f"the model's own labels on {', '.join(descriptions.values())}",
            "names, element type and layout all come from the session: nothing about the file is hard-coded"]


def shifted(digits: np.ndarray, k: int, axis: int = 2, roll: bool = False) -> np.ndarray:
    """Digits moved k pixels along ``axis`` (2 = right, 1 = down), the gap filled with black (or wrapped)."""
    if roll:
        return np.roll(digits, k, axis=axis)
    return np.pad(digits, [(0, 0)] + [(k, 0) if a == axis else (0, 0) for a in (1, 2)])[:, :28, :28]


def shift_accuracies(axis: int = 2, roll: bool = False) -> dict:
    """Accuracy of the PyTorch file on the 10,000 test digits shifted by each of SHIFTS pixels."""
    from helpers.mnist import load_mnist
    from helpers.notebooks import require_artifact

    data, session = load_mnist(), _session(require_artifact("mnist_mlp_pytorch.onnx"))
    return {k: float((_labels_of(session, shifted(data.x_test, k, axis, roll)) == data.y_test).mean()) for k in SHIFTS}


def check_shift_curve(answer):
    require_keys(answer, SHIFTS, "{shift in pixels: accuracy}")
    claimed = {k: float(answer[k]) for k in SHIFTS}
    if any(not 0.0 <= v <= 1.0 for v in claimed.values()):
        raise Wrong("expected accuracies as fractions between 0 and 1 (not percentages)")
    truth = shift_accuracies()
    if all(abs(claimed[k] - truth[k]) <= 1e-4 for k in SHIFTS):
        return [", ".join(f"{k} px: {truth[k]:.1%}" for k in SHIFTS),
                "an MLP learns each pixel position separately: a small, off-centre drawing looks like another digit"]
    for label, other in (("wrapped around with np.roll", shift_accuracies(roll=True)),
                         ("shifted down (axis 1) instead of right", shift_accuracies(axis=1))):
        if all(abs(claimed[k] - other[k]) <= 1e-4 for k in SHIFTS):
            raise Wrong(f"your numbers are those of the digits {label}; expected a shift to the right (axis 2 of "
                        "[N, 28, 28]) with the gap filled with zeros")
    wrong = [f"{k} px: too {'high' if claimed[k] > truth[k] else 'low'}, by "
             f"{'more' if abs(claimed[k] - truth[k]) > 0.1 * truth[k] else 'less'} than 10 %"
             for k in SHIFTS if abs(claimed[k] - truth[k]) > 1e-4]
    raise Wrong("not yet: " + "; ".join(wrong) + " (shift all 10,000 test digits, compare with their labels)")


def check_batches(answer):
    require_callable(answer, "classify_in_batches(session, images_uint8)")
    digits, want, sessions = _setting(FIXED_BATCHES)
    for name, session in sessions.items():
        size = FIXED_BATCHES.get(name)
        _agree(answer, session, digits, want, f"a copy whose batch is fixed to {size}" if size else
               "the PyTorch file (dynamic batch: one run is enough)")
    return [f"copies with a batch fixed to {', '.join(map(str, FIXED_BATCHES.values()))}: the original file's labels "
            f"for all {len(digits)} images, the last batch padded", "the PyTorch file (batch 'batch'): one run"]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "03.1": check_classify,
    "03.2": check_shift_curve,
    "03.3": check_batches,
}


if __name__ == "__main__":  # python -m helpers.checks.ex03 SOURCE.onnx FOLDER: build the copies (see _setting)
    build_copies(Path(sys.argv[1]), Path(sys.argv[2]))
