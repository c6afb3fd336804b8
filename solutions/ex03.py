"""Solutions for notebook 03's exercises: numpy and onnxruntime only, like the notebook."""
from __future__ import annotations

from pathlib import Path

import numpy as np

ORT_TO_NUMPY = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}


def classify(session, images_uint8: np.ndarray) -> np.ndarray:
    """Predicted class per uint8 [N, 28, 28] image; every name, dtype and shape comes from the session."""
    (image_input,) = session.get_inputs()
    output = session.get_outputs()[0]
    fixed_dims = tuple(image_input.shape[1:])  # (1, 28, 28) for the MNIST files
    if not all(isinstance(d, int) for d in fixed_dims):
        raise ValueError(f"expected a model with a dynamic batch and fixed image dims, got {image_input.shape}")
    feed = (images_uint8.reshape(-1, *fixed_dims).astype(np.float32) / 255.0).astype(ORT_TO_NUMPY[image_input.type])
    (logits,) = session.run([output.name], {image_input.name: feed})
    return logits.argmax(axis=1)


def solve_1(workdir: Path):
    return classify


def solve_2(workdir: Path):
    import onnxruntime as ort

    from helpers.mnist import load_mnist
    from helpers.notebooks import require_artifact

    data = load_mnist()
    session = ort.InferenceSession(require_artifact("mnist_mlp_pytorch.onnx"), providers=["CPUExecutionProvider"])
    accuracy = {}
    for k in range(7):
        moved = np.zeros_like(data.x_test)
        moved[:, :, k:] = data.x_test[:, :, :28 - k]  # k pixels to the right, black comes in from the left
        accuracy[k] = float((classify(session, moved) == data.y_test).mean())
    return accuracy


def solve_3(workdir: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1                             # one thread inside each operator
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL    # one operator at a time (the default)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle threads sleep, not spin
    return options
