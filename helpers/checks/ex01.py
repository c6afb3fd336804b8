"""Checks for the exercises of notebook 01 (PyTorch export). Each reference comes from the published
``artifacts/mnist_mlp_pytorch.onnx`` run by ONNX Runtime, the exercise's extra step written in numpy."""
from __future__ import annotations

import functools

import numpy as np

from helpers.checks._common import Wrong, as_model_path, reference_logits, session as _session, test_images
from helpers.predict import softmax

_reference_logits = functools.partial(reference_logits, "mnist_mlp_pytorch.onnx")  # the notebook's own file


def _fresh_images(n: int, seed: int):  # test digits picked at random, not the first ones a learner tries
    images, _ = test_images(10_000)
    return images[np.random.default_rng(seed).choice(len(images), n, replace=False)]


def _opened(answer, inputs: list, outputs: list):  # a session for the file: tensors named, batch dynamic
    session = _session(as_model_path(answer))
    found_in, found_out = [i.name for i in session.get_inputs()], [o.name for o in session.get_outputs()]
    if found_in != inputs:
        raise Wrong(f"expected the inputs {inputs}, found {found_in}: input_names takes one name per argument "
                    "of forward, in order" + (" (no input at all: the dynamo=False fallback records the loop and "
                                              "the `if` for the dummy only)" if not found_in else ""))
    if found_out != outputs:
        raise Wrong(f"expected the outputs {outputs}, found {found_out}: set output_names={outputs}")
    fixed = {i.name: i.shape[0] for i in session.get_inputs() if not isinstance(i.shape[0], str)}
    if fixed:
        raise Wrong(f"the batch dimension is fixed ({fixed}): dynamic_shapes needs an entry {{0: 'batch'}} "
                    "for each input")
    return session


def _run(session, feeds: dict, hint: str = ""):  # the first output, or a Wrong with what ONNX Runtime says
    try:
        return session.run(None, feeds)[0]
    except Exception as err:  # InvalidArgument, Fail, ... from onnxruntime
        raise Wrong(f"expected the file to run on float32 inputs {({k: list(v.shape) for k, v in feeds.items()})}"
                    f"{hint}; ONNX Runtime says: {str(err).splitlines()[0][:200]}") from err


def _first_row(got, want) -> int:
    return int(np.argmax(~np.isclose(got, want, rtol=1e-4, atol=1e-4).all(axis=1)))


def check_flat_input(answer):
    session = _opened(answer, ["pixels"], ["logits"])
    if session.get_inputs()[0].shape[1:] != [784]:
        raise Wrong(f"expected the input pixels [batch, 784], one flat row per image; found "
                    f"{session.get_inputs()[0].shape}")
    images = _fresh_images(37, seed=11)
    for n in (3, 37):  # batch sizes and digits the learner never tried
        rows, want = images[:n].reshape(n, 784) * 255, _reference_logits(images[:n])
        got = _run(session, {"pixels": rows})
        if got.shape != want.shape:
            raise Wrong(f"expected logits [{n}, 10] for {n} rows, got {list(got.shape)}")
        if np.allclose(got, want, rtol=1e-4, atol=1e-4):
            continue
        if np.allclose(got, _reference_logits(rows.reshape(n, 1, 28, 28)), rtol=1e-4, atol=1e-4):
            raise Wrong("the file gives the MLP the 0..255 values; it was trained on 0..1: divide by 255 inside")
        if np.allclose(got, _reference_logits(images[:n].transpose(0, 1, 3, 2).copy()), rtol=1e-4, atol=1e-4):
            raise Wrong("the file reads each row's 784 values column by column; a row holds the image row after "
                        "row: reshape to [batch, 1, 28, 28], no transpose")
        raise Wrong(f"on a batch of {n} fresh rows, the logits differ from the trained MLP's, first in row "
                    f"{_first_row(got, want)}")
    return ["input pixels [batch, 784] in 0..255, output logits: the trained MLP's logits on fresh rows"]


def check_two_inputs(answer):
    session = _opened(answer, ["image", "temperature"], ["probabilities"])
    if session.get_inputs()[1].shape[1:] != [1]:
        raise Wrong(f"expected temperature float32 [batch, 1], found {session.get_inputs()[1].shape}")
    images = _fresh_images(6, seed=12)
    temperature = np.random.default_rng(12).uniform(0.2, 5, (6, 1)).astype(np.float32)
    got, logits = _run(session, {"image": images, "temperature": temperature}), _reference_logits(images)
    if got.shape != (6, 10):
        raise Wrong(f"expected probabilities [6, 10] for 6 images, got {list(got.shape)}")
    if not np.allclose(got.sum(axis=1), 1.0, atol=1e-4):
        raise Wrong(f"each image's probabilities should sum to 1 (softmax over the 10 classes, dim=-1); the sums "
                    f"are {np.round(got.sum(axis=1), 3).tolist()}")
    if np.allclose(got, softmax(logits / temperature), atol=1e-5):
        return ["two inputs, each with a dynamic batch; probabilities = softmax(logits / temperature)"]
    for wrong, why in ((logits * temperature, "multiplies the logits by the temperature; divide them"),
                       (logits, "ignores the temperature: divide the logits by it before softmax")):
        if np.allclose(got, softmax(wrong), atol=1e-5):
            raise Wrong(f"the file {why} (a higher temperature should flatten the probabilities)")
    raise Wrong(f"the probabilities differ from softmax(logits / temperature) of the trained MLP, first in row "
                f"{_first_row(got, softmax(logits / temperature))}")


THRESHOLD = 0.9


def check_abstain(answer):
    session = _opened(answer, ["image"], ["logits"])
    images, _ = test_images(10_000)
    _run(session, {"image": images[:2]}, " (a loop over the batch unrolled for the dummy's batch size, as the "
         "dynamo=False fallback does, fails: write it with tensor operations and export with dynamo=True)")
    got, logits = _run(session, {"image": images}), _reference_logits(images)
    if got.shape != (10_000, 10):
        raise Wrong(f"expected logits [10000, 10] for 10000 images, got {list(got.shape)}")
    top = softmax(logits).max(axis=1)
    clear = np.abs(top - THRESHOLD) > 1e-5  # rows too close to the threshold may round either way
    unsure, zero_rows = top < THRESHOLD, (got == 0).all(axis=1)
    if not np.allclose(got[~zero_rows], logits[~zero_rows], rtol=1e-4, atol=1e-4):
        raise Wrong("in the rows it does not zero, the file's logits differ from artifacts/mnist_mlp_pytorch.onnx: "
                    "wrap the trained `model` of the notebook (if you trained it again, run sections 3 and 4 again)")
    if (zero_rows == unsure)[clear].all():
        return [f"{unsure.sum()} of 10000 test images have a top probability below {THRESHOLD}: all zeros",
                "every other row is the MLP's logits, for any batch size"]
    if not zero_rows.any():
        raise Wrong(f"no row is all zeros, but some test images have a top softmax probability below {THRESHOLD}: "
                    "compare the probability (not the largest logit, almost always above 0.9), and keep the decision "
                    "in the graph")
    if (zero_rows == ~unsure)[clear].all():
        raise Wrong("the file zeroes the confident rows and keeps the unsure ones: the condition is reversed")
    raise Wrong(f"{int((zero_rows != unsure)[clear].sum())} of 10000 rows are zeroed (or kept) wrongly: zero a row "
                f"exactly when its top softmax probability is below {THRESHOLD}")


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {"01.1": check_flat_input, "01.2": check_two_inputs, "01.3": check_abstain}
