"""What notebook 00's exercises as data (helpers/grading/checks/ex00.py) cannot say of themselves: each test here
is about a check's side effects or an answer the data cannot hold, not an answer's verdict."""

from __future__ import annotations

import numpy as np
import onnx

from helpers.grading.checks.ex00 import _with_onnxruntime, linear_classifier
from helpers.grading.exercises import check
from helpers.pipeline.artifacts import existing_artifact


def test_a_model_saved_to_a_file_is_checked_from_its_path(tmp_path):
    """00.1 also takes the path of the learner's .onnx file: a file on disk, which the module's data (made at
    import, never writing files) cannot hold."""
    onnx.save(linear_classifier(), tmp_path / "classifier.onnx")
    assert check("00.1", tmp_path / "classifier.onnx").ok
    assert check("00.1", str(tmp_path / "classifier.onnx")).ok


def test_onnx_runtime_works_again_after_a_check_refused_it():
    """00.2 forbids ONNX Runtime while the interpreter runs by patching Session.run: the learner's kernel keeps a
    working runtime after the check, which no verdict shows."""
    assert not check("00.2", _with_onnxruntime, seed=7).ok
    model = onnx.load(existing_artifact("mnist_mlp_pytorch.onnx"))
    assert _with_onnxruntime(model, np.zeros((1, 1, 28, 28), np.float32)).shape == (1, 10)
