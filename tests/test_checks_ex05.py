"""The checks of notebook 05's exercises name realistic mistakes and leave the kernel as they found it."""
from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from helpers.exercises import check
from helpers.notebooks import require_artifact
from solutions import ex05


@pytest.fixture(scope="module")
def layers_answer(tmp_path_factory):
    return ex05.solve_1(tmp_path_factory.mktemp("ex05_1"))


def test_which_layers_mistakes_are_named(layers_answer):
    notebook_file = require_artifact("quantized/mnist_cnn_pytorch.int8-static.onnx")  # first Conv kept in float
    feedback = check("05.1", {**layers_answer, "all": notebook_file})
    assert not feedback.ok and "the first convolution: drop nodes_to_exclude" in feedback.message
    feedback = check("05.1", {**layers_answer, "gemm_only": layers_answer["all"]})
    assert not feedback.ok and "use op_types_to_quantize=['Gemm']" in feedback.message
    acc = layers_answer["accuracy"]
    if acc["all"] != acc["gemm_only"]:
        swapped = {"all": acc["gemm_only"], "gemm_only": acc["all"]}
        feedback = check("05.1", {**layers_answer, "accuracy": swapped})
        assert not feedback.ok and "swapped" in feedback.message, feedback.message
    percent = {k: 100 * v for k, v in acc.items()}
    feedback = check("05.1", {**layers_answer, "accuracy": percent})
    assert not feedback.ok and "(a percentage)" in feedback.message


def test_which_layers_passes_and_measures_nothing_it_was_not_asked(layers_answer):
    feedback = check("05.1", layers_answer)
    assert feedback.ok, str(feedback)
    assert not any(" ms" in d for d in feedback.details)  # no timings: the learner measures those


class ImageOnly(ex05.MnistCalibrationReader):
    """Writes 'image' instead of reading the input's name from the model."""

    def __init__(self, model_path, images_uint8, batch_size=100):
        super().__init__(model_path, images_uint8, batch_size)
        self.input_name = "image"


class NoChannel(ex05.MnistCalibrationReader):
    def get_next(self):
        item = super().get_next()
        return None if item is None else {k: v[:, 0] for k, v in item.items()}


class NotScaled(ex05.MnistCalibrationReader):
    def get_next(self):
        item = super().get_next()
        return None if item is None else {k: v * 255 for k, v in item.items()}


class StartsOver(ex05.MnistCalibrationReader):
    """Rewinds when exhausted, so quantize_static would never stop."""

    def __init__(self, model_path, images_uint8, batch_size=100):
        super().__init__(model_path, images_uint8, batch_size)
        self.args = (model_path, images_uint8, batch_size)

    def get_next(self):
        item = super().get_next()
        if item is None:
            super().__init__(*self.args)
            item = super().get_next()
        return item


@pytest.mark.parametrize("answer, message", [
    (ImageOnly, "read the name from the model"),
    (NoChannel, "add the channel axis"),
    (NotScaled, "divide the uint8 digits by 255"),
    (StartsOver, "still returns batches"),
    (ex05.MnistCalibrationReader.__new__(ex05.MnistCalibrationReader), "expected the class itself"),
])
def test_calibration_reader_mistakes_are_named(answer, message):
    feedback = check("05.2", answer)
    assert not feedback.ok and message in feedback.message, feedback.message


def test_calibration_check_leaves_the_kernel_as_it_found_it(capsys):
    root = logging.getLogger()
    before = (root.level, list(root.handlers), sys.stdout)
    feedback = check("05.2", ex05.MnistCalibrationReader)
    assert feedback.ok, str(feedback)
    assert (root.level, list(root.handlers), sys.stdout) == before
    assert "accuracy" not in str(feedback)  # the calibration-size results are the learner's to find
    assert capsys.readouterr().out == ""


@pytest.fixture(scope="module")
def block_answer(tmp_path_factory):
    return ex05.solve_3(tmp_path_factory.mktemp("ex05_3"))


def test_block_sizes_mistakes_are_named(block_answer, tmp_path):
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    mixed = {16: block_answer[32], 32: block_answer[32], 128: block_answer[128]}
    feedback = check("05.3", mixed)
    assert not feedback.ok and "expected bits=4 and block_size=16" in feedback.message
    # the pre-processed file: MatMul + Add fused into Gemm, which the 4-bit quantizer skips
    quantizer = MatMulNBitsQuantizer(onnx.load(require_artifact("quantized/mnist_mlp_keras.fp32-preprocessed.onnx")),
                                     bits=4, block_size=16, is_symmetric=True)
    quantizer.process()
    onnx.save(quantizer.model.model, tmp_path / "gemm.onnx")
    feedback = check("05.3", {**block_answer, 16: tmp_path / "gemm.onnx"})
    assert not feedback.ok and "which the 4-bit quantizer skips" in feedback.message
    assert not check("05.3", {16: block_answer[16], 32: block_answer[32]}).ok  # a block size missing


def test_block_sizes_pass(block_answer):
    feedback = check("05.3", block_answer)
    assert feedback.ok, str(feedback)
    assert np.all(["block_size=" in d for d in feedback.details[:3]])
