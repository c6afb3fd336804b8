"""Small pieces shared by the checkers: answer shapes, ONNX models and sessions, the test digits.

Only the standard library at import time (notebook 03's checks must not load the ``onnx`` package).
"""
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


def require_callable(answer, signature: str):
    """The answer must be the learner's function ``signature``."""
    if not callable(answer):
        raise Wrong(f"expected your function {signature}, got {type(answer).__name__}")
    return answer


def require_keys(answer, keys, shape: str) -> dict:
    """The answer must be a dict (described by ``shape``) holding every key in ``keys``."""
    if not isinstance(answer, dict):
        raise Wrong(f"expected a dict {shape}, got {type(answer).__name__}")
    missing = [k for k in keys if k not in answer]
    if missing:
        raise Wrong(f"expected the keys {list(keys)}, missing {missing} (got keys {list(answer)})")
    return answer


def session(model, options=None):
    """An ONNX Runtime CPU session for a path or serialized bytes; a Wrong if it cannot be loaded."""
    import onnxruntime as ort

    source = model if isinstance(model, bytes) else str(model)
    name = "the model" if isinstance(model, bytes) else Path(model).name
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for unloadable models
        raise Wrong(f"expected a file ONNX Runtime can load; {name} fails: {type(err).__name__}: {err}") from err


def contract_input(digits_uint8):
    """uint8 digits [N, 28, 28] -> the contract's input: float32 [N, 1, 28, 28] in 0..1."""
    import numpy as np

    return (np.asarray(digits_uint8).astype(np.float32) / 255.0)[:, None]


def dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_images(n: int):
    """The first ``n`` MNIST test images in the contract's layout, and their labels."""
    import numpy as np

    from helpers.mnist import load_mnist

    data = load_mnist()
    return contract_input(data.x_test[:n]), data.y_test[:n].astype(np.int64)
