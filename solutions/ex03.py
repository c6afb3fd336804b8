"""Solutions for notebook 03's exercises: numpy and onnxruntime only, like the notebook."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
