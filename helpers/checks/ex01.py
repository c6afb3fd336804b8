"""Checks for the exercises of notebook 01 (PyTorch export).

Each reference answer comes from the published ``artifacts/mnist_mlp_pytorch.onnx`` run by ONNX Runtime, with the
exercise's extra step (temperature, abstaining) written in numpy; the worked solutions use PyTorch instead.
"""
from __future__ import annotations

import functools

import numpy as np

from helpers.checks._common import as_model_path, dims, load_model, reference_logits, session as _session, test_images
from helpers.checks._common import Wrong
from helpers.predict import softmax as _softmax

_reference_logits = functools.partial(reference_logits, "mnist_mlp_pytorch.onnx")  # the notebook's own file

RETRAINED = ("the file's logits differ from artifacts/mnist_mlp_pytorch.onnx: wrap the trained `model` of the notebook "
             "(if you trained it again, run the export cells of sections 3 and 4 again too)")


def _run(session, feeds: dict):
    """The first output for ``feeds``, or a Wrong that repeats what ONNX Runtime says."""
    try:
        return session.run(None, feeds)[0]
    except Exception as err:  # InvalidArgument, Fail, ... from onnxruntime
        shapes = {name: list(value.shape) for name, value in feeds.items()}
        raise Wrong(f"expected the file to run on float32 inputs {shapes}; ONNX Runtime says: "
                    f"{str(err).splitlines()[0][:200]}") from err


def check_static_export(answer):
    path = as_model_path(answer)
    shape = dims(load_model(path).graph.input[0])
    if shape and isinstance(shape[0], str):
        raise Wrong(f"the batch dimension is still dynamic ({shape[0]!r}): export without dynamic_shapes, and the "
                    "exporter fixes every dimension to the dummy's size")
    if shape == [1, 1, 28, 28]:
        raise Wrong("the input is fixed to [1, 1, 28, 28], the shape of a dummy batch of 1; the exercise asks for a "
                    "dummy batch of 7: torch.zeros(7, 1, 28, 28)")
    if shape != [7, 1, 28, 28]:
        raise Wrong(f"expected the input fixed to the dummy's shape [7, 1, 28, 28], found {shape}")
    session = _session(path)
    images, _ = test_images(7)
    name = session.get_inputs()[0].name
    if not np.allclose(_run(session, {name: images}), _reference_logits(images), rtol=1e-4, atol=1e-4):
        raise Wrong(RETRAINED)
    try:
        session.run(None, {name: images[:1]})
    except Exception:  # onnxruntime raises its InvalidArgument type here: the expected outcome
        pass
    else:
        raise Wrong("a batch of 1 ran, so the batch dimension is not fixed")
    return ["input fixed to [7, 1, 28, 28], the dummy's shape, and ONNX Runtime refuses a batch of 1"]


def check_two_inputs(answer):
    path = as_model_path(answer)
    session = _session(path)
    names = [i.name for i in session.get_inputs()]
    if names != ["image", "temperature"]:
        raise Wrong(f"expected the inputs ['image', 'temperature'], in forward's order, found {names}: "
                    "input_names takes one name per argument of forward")
    if [o.name for o in session.get_outputs()] != ["probabilities"]:
        raise Wrong(f"expected one output 'probabilities', found {[o.name for o in session.get_outputs()]}")
    shapes = {i.name: i.shape for i in session.get_inputs()}
    if len(shapes["temperature"]) != 2 or shapes["temperature"][1] != 1:
        raise Wrong(f"expected temperature float32 [batch, 1], found {shapes['temperature']}")
    fixed = [name for name, shape in shapes.items() if not isinstance(shape[0], str)]
    if fixed:
        raise Wrong(f"the batch dimension of {fixed} is fixed to {[shapes[n][0] for n in fixed]}: dynamic_shapes "
                    "needs one entry per input, e.g. ({0: 'batch'}, {0: 'batch'})")
    images, _ = test_images(6)
    temperature = np.array([[1.0], [2.0], [0.5], [1.0], [4.0], [0.25]], dtype=np.float32)
    got = _run(session, {"image": images, "temperature": temperature})
    if got.shape != (6, 10):
        raise Wrong(f"expected probabilities [6, 10] for 6 images, got {list(got.shape)}")
    if not np.allclose(got.sum(axis=1), 1.0, atol=1e-4):
        raise Wrong(f"each image's probabilities should sum to 1 (softmax over the 10 classes, dim=-1); the sums "
                    f"are {np.round(got.sum(axis=1), 3).tolist()}")
    logits = _reference_logits(images)
    want = _softmax(logits / temperature)
    if np.allclose(got, want, atol=1e-5):
        return ["two inputs, each with a dynamic batch; probabilities = softmax(logits / temperature)"]
    if np.allclose(got, _softmax(logits * temperature), atol=1e-5):
        raise Wrong("the file multiplies the logits by the temperature; divide them: a higher temperature should "
                    "flatten the probabilities")
    if np.allclose(got, _softmax(logits), atol=1e-5):
        raise Wrong("the temperature has no effect on the probabilities: divide the logits by it before softmax")
    if (got.argmax(axis=1) != logits.argmax(axis=1)).any():
        raise Wrong(RETRAINED)
    raise Wrong(f"the probabilities differ from softmax(logits / temperature) by up to {np.abs(got - want).max():.3g}")


THRESHOLD = 0.9


def check_abstain(answer):
    path = as_model_path(answer)
    session = _session(path)
    inputs = [(i.name, i.shape) for i in session.get_inputs()]
    if not inputs:
        raise Wrong("the file has no input at all: its output does not depend on the image. The dynamo=False "
                    "fallback does this: it records the loop and the `if` for the dummy only")
    if [name for name, _ in inputs] != ["image"] or [o.name for o in session.get_outputs()] != ["logits"]:
        raise Wrong(f"expected input 'image' and output 'logits', found inputs {[n for n, _ in inputs]} and outputs "
                    f"{[o.name for o in session.get_outputs()]}")
    if not isinstance(inputs[0][1][0], str):
        raise Wrong(f"the batch dimension is fixed to {inputs[0][1][0]}: export with dynamic_shapes=({{0: 'batch'}},)"
                    " (a loop over the batch can only be exported once it is written with tensor operations)")
    images, _ = test_images(10_000)
    try:
        session.run(None, {"image": images[:2]})
    except Exception as err:  # onnxruntime's Fail or InvalidArgument
        raise Wrong("the file fails on a batch of 2: the loop over the batch was unrolled for the dummy's batch size, "
                    "as the dynamo=False fallback does; write it with tensor operations and export with dynamo=True "
                    f"(ONNX Runtime says: {str(err).splitlines()[0][:120]})") from err
    got = _run(session, {"image": images})
    if got.shape != (10_000, 10):
        raise Wrong(f"expected logits [10000, 10] for 10000 images, got {list(got.shape)}")
    logits = _reference_logits(images)
    top = _softmax(logits).max(axis=1)
    clear = np.abs(top - THRESHOLD) > 1e-5  # rows too close to the threshold may round either way
    unsure = top < THRESHOLD
    zero_rows = (got == 0).all(axis=1)
    kept = ~zero_rows
    if not np.allclose(got[kept], logits[kept], rtol=1e-4, atol=1e-4):
        raise Wrong(RETRAINED + " (in the rows it does not zero)")
    if (zero_rows == unsure)[clear].all():
        return [f"{unsure.sum()} of 10000 test images have a top probability below {THRESHOLD}: all zeros",
                "every other row is the MLP's logits, for any batch size"]
    if not zero_rows.any():
        raise Wrong(f"no row is all zeros, but {unsure.sum()} of the 10000 test images have a top softmax "
                    f"probability below {THRESHOLD}: compare the probability (not the largest logit, which is almost "
                    "always above 0.9), and keep the decision in the graph")
    if (zero_rows == ~unsure)[clear].all():
        raise Wrong("the file zeroes the confident rows and keeps the unsure ones: the condition is reversed")
    wrong = int((zero_rows != unsure)[clear].sum())
    raise Wrong(f"{wrong} of 10000 rows are zeroed (or kept) wrongly: zero a row exactly when its top softmax "
                f"probability is below {THRESHOLD}")


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "01.1": check_static_export,
    "01.2": check_two_inputs,
    "01.3": check_abstain,
}
