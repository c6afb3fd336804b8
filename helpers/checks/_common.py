"""Small pieces shared by the checkers (loading an answer that should be an ONNX model)."""
from __future__ import annotations

import os
from pathlib import Path

from helpers.exercises import Wrong


def as_model_path(answer) -> Path:
    """The answer must be a path to an existing .onnx file."""
    if not isinstance(answer, (str, os.PathLike)):
        raise Wrong(f"expected the path of your .onnx file (a str or Path), got {type(answer).__name__}")
    path = Path(answer)
    if not path.is_file():
        raise Wrong(f"expected an existing .onnx file, but there is no file at {path}")
    return path


def load_model(answer):
    """Accept a ModelProto or a path to one; return the ModelProto (weights loaded)."""
    import onnx

    if isinstance(answer, onnx.ModelProto):
        return answer
    path = as_model_path(answer)
    try:
        return onnx.load(path)
    except Exception as err:  # protobuf raises DecodeError and others for a non-ONNX file
        raise Wrong(f"{path.name} is not a readable ONNX model: {type(err).__name__}: {err}") from err


def dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_images(n: int):
    """The first ``n`` MNIST test images in the contract's layout, and their labels."""
    import numpy as np

    from helpers.mnist import load_mnist

    data = load_mnist()
    return (data.x_test[:n].astype(np.float32) / 255.0)[:, None], data.y_test[:n].astype(np.int64)
