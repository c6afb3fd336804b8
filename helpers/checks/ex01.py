"""Checks for the exercises of notebook 01 (PyTorch export)."""
from __future__ import annotations

import numpy as np

from helpers.checks._common import as_model_path, dims, load_model, session as _session, test_images
from helpers.exercises import Wrong



def _run(session, images):
    """Logits for ``images``, or a Wrong that says what the file expects."""
    name = session.get_inputs()[0].name
    try:
        return session.run(None, {name: images})[0]
    except Exception as err:  # InvalidArgument, Fail, ... from onnxruntime
        raise Wrong(f"expected the file to take float32 images {list(images.shape)} on input {name!r}; "
                    f"ONNX Runtime says: {str(err).splitlines()[0][:200]}") from err


def check_static_export(answer):
    path = as_model_path(answer)
    model = load_model(path)
    shape = dims(model.graph.input[0])
    if shape != [1, 1, 28, 28]:
        raise Wrong(f"expected the input shape fixed to the dummy's [1, 1, 28, 28], found {shape}; "
                    "did you leave dynamic_shapes out?")
    session = _session(path)
    images, _ = test_images(7)
    _run(session, images[:1])
    try:
        session.run(None, {session.get_inputs()[0].name: images})
    except Exception as err:  # onnxruntime raises its InvalidArgument type here
        message = str(err)
    else:
        raise Wrong("a batch of 7 ran, so the batch dimension is not fixed")
    return ["input fixed to [1, 1, 28, 28]", f"ONNX Runtime on a batch of 7 says: {message.splitlines()[0][:160]}"]


def check_external_data(answer):
    import onnx

    path = as_model_path(answer)
    side = [p for p in path.parent.iterdir() if p.name.startswith(path.name) and p != path]
    model_no_weights = onnx.load(path, load_external_data=False)
    locations = {e.value for init in model_no_weights.graph.initializer for e in init.external_data
                 if e.key == "location"}
    if not locations:
        raise Wrong("no initializer points to external data; export with external_data=True")
    missing = [loc for loc in locations if not (path.parent / loc).is_file()]
    if missing:
        raise Wrong(f"the weights file(s) {missing} are not next to {path.name}")
    try:
        onnx.checker.check_model(path)  # takes the path, so it can follow the external reference
    except Exception as err:  # ValidationError, or an error reading the side file
        raise Wrong(f"expected onnx.checker to accept {path.name}; it says: {err}") from err
    images, _ = test_images(3)
    logits = _run(_session(path), images)
    if logits.shape != (3, 10):
        raise Wrong(f"expected logits [3, 10], got {list(logits.shape)}")
    sizes = {p.name: p.stat().st_size for p in [path] + side}
    if path.stat().st_size > 100_000:
        raise Wrong(f"{path.name} is {path.stat().st_size} bytes: the weights still seem to be inside it")
    return [f"{name}: {size:,} bytes" for name, size in sizes.items()] + \
        ["copy only the .onnx elsewhere and loading fails: it refers to the side file by relative name"]


def check_one_epoch(answer):
    if not (isinstance(answer, tuple) and len(answer) == 2):
        raise Wrong("expected a pair (path, accuracy)")
    path, claimed = answer
    path = as_model_path(path)
    if not isinstance(claimed, (float, np.floating)) or not 0.0 <= claimed <= 1.0:
        raise Wrong(f"accuracy should be a fraction between 0 and 1, got {claimed!r}")
    images, labels = test_images(10_000)
    logits = _run(_session(path), images)
    if logits.shape != (10_000, 10):
        raise Wrong(f"expected logits [10000, 10], got {list(logits.shape)}")
    measured = float((logits.argmax(1) == labels).mean())
    if abs(measured - claimed) > 1e-4:
        raise Wrong(f"ONNX Runtime measures {measured:.4f} on the test set, you said {claimed:.4f}")
    if measured < 0.90:
        raise Wrong(f"accuracy {measured:.2%} is too low for one epoch of this MLP (expect about 95-97 %)")
    return f"one epoch gives {measured:.2%}; six epochs gave about 98 %"


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "01.1": check_static_export,
    "01.2": check_external_data,
    "01.3": check_one_epoch,
}
