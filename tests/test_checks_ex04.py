"""The checks of notebook 04 catch realistic wrong answers and say what is wrong."""
from __future__ import annotations

import logging
import shutil
import subprocess
import sys

import numpy as np
import pytest

from helpers.exercises import check
from helpers.notebooks import require_artifact
from solutions import ex04


# ------------------------------------------------------------------------------ 04.1 ink on coloured paper
def naive_ink(rgb):  # the page's formula: darkness against white paper
    return 1 - (rgb.astype(float) @ [0.299, 0.587, 0.114]) / 255


def gray_as_ink(rgb):  # forgot that MNIST is white on black
    return (rgb.astype(float) @ [0.299, 0.587, 0.114]) / 255


def relative_but_faint(rgb):  # relative to the paper, but a full stroke is only ~0.7
    gray = rgb.astype(float) @ [0.299, 0.587, 0.114]
    paper = np.median(np.concatenate([gray[0], gray[-1]]))
    return np.clip(1 - gray / paper, 0, 1)


def uint8_ink(rgb):
    return (255 * ex04.ink(rgb)).astype(np.uint8)


@pytest.mark.parametrize("answer,message", [
    (naive_ink, "the bounding box is the whole page"),
    (gray_as_ink, "yours is inverted"),
    (relative_but_faint, "the strokes to be full ink"),
    (uint8_ink, "must be divided by 255"),
    (lambda rgb: ex04.ink(rgb)[:, :, None], "one ink value per pixel"),
    ("ink.py", "expected your function"),
], ids=["against-white", "inverted", "not-normalised", "uint8", "extra-axis", "not-a-function"])
def test_04_1_wrong_answers_are_named(answer, message):
    feedback = check("04.1", answer)
    assert not feedback.ok and message in feedback.message, feedback.message


def test_04_1_reference_is_the_painted_ink_not_the_solution():
    drawings, truths, labels = __import__("helpers.checks.ex04", fromlist=["x"]).coloured_drawings(4)
    assert drawings.dtype == np.uint8 and drawings.shape == (4, 196, 196, 3) and truths.max() == 1.0
    feedback = check("04.1", lambda rgb: ex04.ink(rgb))
    assert feedback.ok and "correlation with the true ink" in feedback.details[0]


# --------------------------------------------------------------------------------------- 04.2 ORT format
@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    return ex04.solve_2(tmp_path_factory.mktemp("ex04"))


def test_04_2_the_onnx_file_renamed_is_not_an_ort_file(tmp_path, converted):
    fake = tmp_path / "mnist_cnn_pytorch.ort"
    shutil.copy(require_artifact("mnist_cnn_pytorch.onnx"), fake)
    feedback = check("04.2", {"ort_file": fake, "operators": converted["operators"]})
    assert not feedback.ok and "is it the .onnx file" in feedback.message, feedback.message


def test_04_2_the_graph_ops_of_the_onnx_file_are_not_what_the_ort_needs(converted):
    import onnx

    graph_ops = {n.op_type for n in onnx.load(require_artifact("mnist_cnn_pytorch.onnx")).graph.node}
    feedback = check("04.2", {"ort_file": converted["ort_file"], "operators": graph_ops})
    assert not feedback.ok and "fused ops" in feedback.message and "FusedConv" in feedback.message, feedback.message


def test_04_2_another_model_converted(tmp_path, converted):
    folder = tmp_path / "mlp"
    folder.mkdir()
    shutil.copy(require_artifact("mnist_mlp_pytorch.onnx"), folder / "mnist_cnn_pytorch.onnx")  # wrong file
    subprocess.run([sys.executable, "-m", "onnxruntime.tools.convert_onnx_models_to_ort", str(folder)], check=True,
                   capture_output=True)
    feedback = check("04.2", {"ort_file": folder / "mnist_cnn_pytorch.ort", "operators": converted["operators"]})
    assert not feedback.ok and "was another model converted" in feedback.message, feedback.message


def test_04_2_shape_of_the_answer(converted):
    assert "expected a dict" in check("04.2", converted["ort_file"]).message
    feedback = check("04.2", {"ort_file": converted["ort_file"], "operators": "FusedConv,FusedGemm"})
    assert not feedback.ok and "collection of op type names" in feedback.message


def test_checks_leave_the_logging_configuration_alone(converted):
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    assert check("04.2", converted)
    assert (root.level, list(root.handlers)) == before
