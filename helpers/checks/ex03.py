"""Checks for the exercises of notebook 03 (numpy and onnxruntime only).

Like the notebook, these checks use numpy and onnxruntime and nothing else: not even the ``onnx`` package.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers.checks._common import renamed_copy
from helpers.checks._common import contract_input, require_callable, require_keys, session as _session
from helpers.exercises import Wrong

SHIFTS = (0, 1, 2, 3, 4, 5, 6)
SPINNING = "session.intra_op.allow_spinning"


def _model_paths() -> dict:
    from helpers.notebooks import require_artifact

    return {"PyTorch": require_artifact("mnist_mlp_pytorch.onnx"), "Keras": require_artifact("mnist_mlp_keras.onnx")}


def _contract_predictions(session, digits: np.ndarray) -> np.ndarray:
    """The checker's own classification: the contract, with the names of the notebook's files."""
    return session.run(None, {session.get_inputs()[0].name: contract_input(digits)})[0].argmax(1)


def _labels(answer, session, digits, what: str) -> np.ndarray:
    try:
        got = answer(session, digits)
    except Exception as err:  # whatever the learner's function raises is reported, not hidden
        raise Wrong(f"expected classify to run on {what}; it raised {type(err).__name__}: {err}") from err
    got = np.asarray(got)
    if got.shape != (len(digits),) or not np.issubdtype(got.dtype, np.integer):
        raise Wrong(f"expected {len(digits)} integer labels, shape ({len(digits)},), got {got.dtype} {got.shape} "
                    f"(on {what}); argmax over the classes gives them")
    return got


def check_classify(answer):
    from helpers.mnist import load_mnist

    require_callable(answer, "classify(session, images_uint8)")
    data = load_mnist()
    digits, labels = data.x_test, data.y_test
    details = []
    for name, path in _model_paths().items():
        session = _session(path)
        got = _labels(answer, session, digits, f"the {name} file, 10,000 test digits")
        want = _contract_predictions(session, digits)
        agree, accuracy = float((got == want).mean()), float((got == labels).mean())
        if agree < 0.999:
            hint = " (scale the pixels to 0..1: uint8 / 255)" if accuracy < 0.97 else ""
            raise Wrong(f"on the {name} file expected the model's own predictions, got labels that agree with them "
                        f"on only {agree:.2%} of the test digits (accuracy {accuracy:.2%}){hint}")
        details.append(f"{name} file: accuracy {accuracy:.2%} on 10,000 digits")
        single = _labels(answer, session, digits[:1], f"the {name} file, one digit [1, 28, 28]")
        if single[0] != want[0]:
            raise Wrong(f"expected label {want[0]} for the first test digit alone, got {single[0]}")
    path = _model_paths()["PyTorch"]
    renamed = _session(renamed_copy(path))
    got = _labels(answer, renamed, digits[:500],
                  "a copy of the PyTorch file whose input is 'pixel' and output 'scores'")
    want = _contract_predictions(_session(path), digits[:500])
    if (got != want).any():
        raise Wrong(f"expected the same labels from a copy whose input is 'pixel' and output 'scores', got "
                    f"{int((got != want).sum())} different labels out of 500")
    details.append("works on a copy named 'pixel' -> 'scores': nothing about the names is hard-coded")
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


def check_single_thread_options(answer):
    import onnxruntime as ort

    from helpers.mnist import load_mnist
    from helpers.timing import measure

    if not isinstance(answer, ort.SessionOptions):
        raise Wrong(f"expected an onnxruntime.SessionOptions object, got {type(answer).__name__}")
    if answer.intra_op_num_threads != 1:
        raise Wrong(f"expected intra_op_num_threads = 1, got {answer.intra_op_num_threads}"
                    + (" (0 means 'onnxruntime chooses')" if answer.intra_op_num_threads == 0 else ""))
    if answer.execution_mode != ort.ExecutionMode.ORT_SEQUENTIAL:
        raise Wrong(f"expected execution_mode ORT_SEQUENTIAL (one operator at a time), got {answer.execution_mode}")
    try:
        spinning = answer.get_session_config_entry(SPINNING)
    except RuntimeError:  # onnxruntime raises RuntimeError for a key that was never set
        spinning = None
    if spinning != "0":
        raise Wrong(f"expected the config entry {SPINNING!r} set to '0' with add_session_config_entry, "
                    f"got {spinning!r}")
    path = _model_paths()["PyTorch"]
    mine = _session(path, answer)
    two = ort.SessionOptions()
    two.intra_op_num_threads = 2
    default = _session(path, two)
    images = contract_input(load_mnist().x_test[:1000])
    got, want = mine.run(None, {"image": images})[0], default.run(None, {"image": images})[0]
    if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        raise Wrong(f"expected the same logits as a default session, got a max difference of "
                    f"{np.abs(got - want).max():.3g}; did you change the graph optimization level on purpose?")
    details = [f"intra_op_num_threads 1, {answer.execution_mode.name}, {SPINNING} = '0'; same logits as 2 threads"]
    for batch in (1, 1000):
        t1 = measure(lambda: mine.run(None, {"image": images[:batch]}), min_time_s=0.2)["p50_us"]
        t2 = measure(lambda: default.run(None, {"image": images[:batch]}), min_time_s=0.2)["p50_us"]
        details.append(f"batch {batch}: median {t1:.0f} µs with 1 thread, {t2:.0f} µs with 2 threads "
                       f"(measured now, ratio {t1 / t2:.2f}; noisy on a shared machine)")
    return details


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "03.1": check_classify,
    "03.2": check_shift_curve,
    "03.3": check_single_thread_options,
}
