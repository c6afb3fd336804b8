"""The checks of notebook 05's exercises accept other right answers and name realistic mistakes."""
from __future__ import annotations

import logging
import sys
import numpy as np
import onnx
import pytest
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, StaticQuantConfig, quantize,
                                      quantize_dynamic, quantize_static)

from helpers.exercises import check
from solutions import ex05


# ---------------------------------------------------------------------------------------------- 05.1
class GeneratorReader(CalibrationDataReader):
    def __init__(self, name, digits):
        self.items = ({name: (d[None, None] / np.float32(255)).astype(np.float32)} for d in digits)

    def get_next(self):
        return next(self.items, None)


def first_input(path):
    return onnx.load(path).graph.input[0].name


def one_digit_batches_no_preprocessing(fp32_path, int8_path, train_uint8):
    quantize_static(fp32_path, int8_path, GeneratorReader(first_input(fp32_path), train_uint8),
                    quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt8)


def with_quantize_and_a_config(fp32_path, int8_path, train_uint8):
    x = train_uint8.reshape(-1, 1, 28, 28).astype(np.float32) / 255
    reader = ex05.MnistCalibrationReader(fp32_path, train_uint8, batch_size=len(x))
    quantize(fp32_path, int8_path, StaticQuantConfig(reader, quant_format=QuantFormat.QDQ, per_channel=True))


@pytest.mark.parametrize("answer", [ex05.quantize_int8, one_digit_batches_no_preprocessing, with_quantize_and_a_config])
def test_static_int8_right_answers_pass(answer):
    feedback = check("05.1", answer)
    assert feedback.ok, str(feedback)


def static(digits=None, **settings):
    def answer(fp32_path, int8_path, train_uint8):
        quantize_static(fp32_path, int8_path, ex05.MnistCalibrationReader(
            fp32_path, train_uint8 if digits is None else digits()), **{"quant_format": QuantFormat.QDQ,
                                                                         "per_channel": True, **settings})
    return answer


def _test_digits():
    from helpers.mnist import load_mnist

    return load_mnist().x_test[:300]


class Unscaled(ex05.MnistCalibrationReader):
    def get_next(self):
        item = super().get_next()
        return None if item is None else {k: v * 255 for k, v in item.items()}


def unscaled(fp32_path, int8_path, train_uint8):
    quantize_static(fp32_path, int8_path, Unscaled(fp32_path, train_uint8), quant_format=QuantFormat.QDQ,
                    per_channel=True)


def image_hard_coded(fp32_path, int8_path, train_uint8):
    quantize_static(fp32_path, int8_path, GeneratorReader("image", train_uint8), quant_format=QuantFormat.QDQ)


@pytest.mark.parametrize("answer, message", [
    (lambda f, o, d: quantize_dynamic(f, o, weight_type=QuantType.QInt8), "dynamic quantization"),
    (static(quant_format=QuantFormat.QOperator), "quant_format=QuantFormat.QDQ"),
    (static(per_channel=False), "per_channel=True"),
    (static(op_types_to_quantize=["Gemm"]), "Conv conv_0, Conv conv_2 still read float tensors"),
    (static(digits=_test_digits), "never with test digits"),
    (unscaled, "divide the uint8 digits by 255"),
    (image_hard_coded, "it raised"),
    (lambda f, o, d: None, "no file at"),
])
def test_static_int8_mistakes_are_named(answer, message):
    feedback = check("05.1", answer)
    assert not feedback.ok and message in feedback.message, feedback.message


# ---------------------------------------------------------------------------------------------- 05.2
class ListReader(CalibrationDataReader):
    """Right, written differently: a list and an index, the name from onnx.load."""

    def __init__(self, model_path, images_uint8, batch_size=100):
        name = first_input(model_path)
        self.items = [{name: (images_uint8[i:i + batch_size, None] / 255).astype(np.float32)}
                      for i in range(0, len(images_uint8), batch_size)]
        self.i = 0

    def get_next(self):
        self.i += 1
        return self.items[self.i - 1] if self.i <= len(self.items) else None


class SplitReader(ex05.MnistCalibrationReader):
    """Right: np.array_split into batches, from a generator."""

    def __init__(self, model_path, images_uint8, batch_size=100):
        super().__init__(model_path, images_uint8[:0], batch_size)
        chunks = np.array_split(images_uint8, range(batch_size, len(images_uint8), batch_size))
        self.batches = (np.expand_dims(c, 1).astype(np.float32) / 255 for c in chunks)


@pytest.mark.parametrize("answer", [ex05.MnistCalibrationReader, ListReader, SplitReader])
def test_calibration_reader_right_answers_pass(answer):
    feedback = check("05.2", answer)
    assert feedback.ok, str(feedback)


class ImageOnly(ex05.MnistCalibrationReader):
    """Writes 'image' instead of reading the input's name from the model."""

    def __init__(self, model_path, images_uint8, batch_size=100):
        super().__init__(model_path, images_uint8, batch_size)
        self.input_name = "image"


class NoChannel(ex05.MnistCalibrationReader):
    def get_next(self):
        item = super().get_next()
        return None if item is None else {k: v[:, 0] for k, v in item.items()}


class StartsOver(ListReader):
    """Rewinds when exhausted, so quantize_static would never stop."""

    def get_next(self):
        self.i %= len(self.items)
        return super().get_next()


class DropsTheLastBatch(ListReader):
    def get_next(self):
        return None if self.i == len(self.items) - 1 else super().get_next()


@pytest.mark.parametrize("answer, message", [
    (ImageOnly, "read the name from the model"),
    (NoChannel, "add the channel axis"),
    (Unscaled, "divide the uint8"),
    (StartsOver, "still returns batches"),
    (DropsTheLastBatch, "got None after 2 batches"),
    (ex05.MnistCalibrationReader.__new__(ex05.MnistCalibrationReader), "got an instance of"),
])
def test_calibration_reader_mistakes_are_named(answer, message):
    feedback = check("05.2", answer)
    assert not feedback.ok and message in feedback.message, feedback.message


def test_calibration_check_leaves_the_kernel_as_it_found_it(capsys):
    root = logging.getLogger()
    before = (root.level, list(root.handlers), sys.stdout)
    assert check("05.2", ex05.MnistCalibrationReader).ok
    assert (root.level, list(root.handlers), sys.stdout) == before
    assert capsys.readouterr().out == ""


# ---------------------------------------------------------------------------------------------- 05.3
def with_a_config(fp32_path, int4_path, block_size):
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    config = DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=True, accuracy_level=4)
    quantizer = MatMulNBitsQuantizer(ex05.gemm_to_matmul(onnx.load(fp32_path)), algo_config=config)
    quantizer.process()
    quantizer.model.save_model_to_file(str(int4_path))


def own_rewrite(fp32_path, int4_path, block_size):
    """Its own Gemm rewrite (a transposed copy under a new name, via onnx.helper), then the quantizer."""
    from onnx import helper, numpy_helper
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    model = onnx.load(fp32_path)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for i, node in enumerate(list(model.graph.node)):
        if node.op_type == "Gemm":
            transposed = node.input[1] + "_t"
            model.graph.initializer.append(numpy_helper.from_array(arrays[node.input[1]].T.copy(), transposed))
            model.graph.node.remove(node)
            model.graph.node.insert(i, helper.make_node("Add", ["mm_out", node.input[2]], node.output, name="b"))
            model.graph.node.insert(i, helper.make_node("MatMul", [node.input[0], transposed], ["mm_out"], name="mm"))
    quantizer = MatMulNBitsQuantizer(model, accuracy_level=4, is_symmetric=True, block_size=block_size)
    quantizer.process()
    onnx.save(quantizer.model.model, int4_path)


@pytest.mark.parametrize("answer", [ex05.int4_weights, with_a_config, own_rewrite])
def test_int4_right_answers_pass(answer):
    feedback = check("05.3", answer)
    assert feedback.ok, str(feedback)


def int4(rewrite=True, block=None, **settings):
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    def answer(fp32_path, int4_path, block_size):
        model = onnx.load(fp32_path)
        quantizer = MatMulNBitsQuantizer(ex05.gemm_to_matmul(model) if rewrite else model, bits=4,
                                         block_size=block or block_size,
                                         **{"is_symmetric": True, "accuracy_level": 4, **settings})
        quantizer.process()
        onnx.save(quantizer.model.model, int4_path)
    return answer


@pytest.mark.parametrize("answer, message", [
    (int4(rewrite=False), "the quantizer skips Gemm"),
    (int4(is_symmetric=False), "zero points stored"),
    (int4(accuracy_level=None), "accuracy_level="),
    (int4(block=32), "block_size=32 (expected 16)"),
])
def test_int4_mistakes_are_named(answer, message):
    feedback = check("05.3", answer)
    assert not feedback.ok and message in feedback.message, feedback.message
