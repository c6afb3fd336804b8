"""The checks of notebook 05's exercises accept other right answers and name realistic mistakes."""

from __future__ import annotations

import logging
import sys

import numpy as np
import onnx
import pytest
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    StaticQuantConfig,
    quantize,
    quantize_dynamic,
    quantize_static,
)
from tables import accepted, refused, right, rows

from helpers.data.mnist import load_mnist
from helpers.grading.checks import ex05
from helpers.grading.checks._common import seeded

MnistCalibrationReader = ex05.calibration_reader_class()  # 05.2's reference reader


# ---------------------------------------------------------------------------------------------- 05.1
class GeneratorReader(CalibrationDataReader):
    def __init__(self, name, digits):
        self.items = ({name: (d[None, None] / np.float32(255)).astype(np.float32)} for d in digits)

    def get_next(self):
        return next(self.items, None)


def first_input(path):
    return onnx.load(path).graph.input[0].name


def one_digit_batches_no_preprocessing(fp32_path, int8_path, train_uint8):
    quantize_static(
        fp32_path,
        int8_path,
        GeneratorReader(first_input(fp32_path), train_uint8),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,
    )


def with_quantize_and_a_config(fp32_path, int8_path, train_uint8):
    reader = MnistCalibrationReader(fp32_path, train_uint8, batch_size=len(train_uint8))
    quantize(
        fp32_path,
        int8_path,
        StaticQuantConfig(reader, quant_format=QuantFormat.QDQ, per_channel=True),
    )


def entropy_calibrated(
    fp32_path, int8_path, train_uint8
):  # another calibration method the task allows
    from onnxruntime.quantization import CalibrationMethod

    static(calibrate_method=CalibrationMethod.Entropy)(fp32_path, int8_path, train_uint8)


def static(digits=None, reader=MnistCalibrationReader, **settings):
    def answer(fp32_path, int8_path, train_uint8):
        images = train_uint8 if digits is None else digits(train_uint8)
        quantize_static(
            fp32_path,
            int8_path,
            reader(fp32_path, images),
            **{"quant_format": QuantFormat.QDQ, "per_channel": True, **settings},
        )

    return answer


def activation_ranges_too_wide(fp32_path, int8_path, train_uint8):
    """A constructed file: calibrated right, then every inner activation's scale 64 times too wide (2 bits left)."""
    from onnx import numpy_helper

    static()(fp32_path, int8_path, train_uint8)
    model = onnx.load(int8_path)
    inits = {t.name: t for t in model.graph.initializer}
    quantized = [
        n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in inits
    ]
    inner = {
        n.input[1] for n in quantized if n.input[0] != model.graph.input[0].name
    }  # the input's range kept
    for name in inner:
        inits[name].CopyFrom(
            numpy_helper.from_array(numpy_helper.to_array(inits[name]) * np.float32(64), name)
        )
    onnx.save(model, int8_path)


def each_batch(change):
    """The solution's reader with ``change`` applied to every batch it returns."""

    class Changed(MnistCalibrationReader):
        def get_next(self):
            item = super().get_next()
            return None if item is None else {k: change(v) for k, v in item.items()}

    return Changed


class ImageOnly(MnistCalibrationReader):
    def __init__(self, model_path, images_uint8, batch_size=100):
        super().__init__(model_path, images_uint8, batch_size)
        self.input_name = "image"


UNSCALED = each_batch(lambda v: v * np.float32(255))  # the uint8 values as float32
MEAN_STD = each_batch(
    lambda v: (v - 0.1307) / 0.3081
)  # normalized, though the model normalizes inside


def no_file(fp32_path, int8_path, train_uint8):  # returns the model instead of writing it
    return onnx.load(fp32_path)


REQUIREMENTS_05_1 = [
    (
        "a function quantize_int8(fp32_path, int8_path, train_uint8)",
        "quantize_int8.py",
        "expected your function",
    ),
    ("writes the file to int8_path", no_file, "no file at"),
    (
        "static (calibrated), not dynamic",
        lambda f, o, d: quantize_dynamic(f, o, weight_type=QuantType.QInt8),
        "expected static quantization",
    ),
    ("QDQ format", static(quant_format=QuantFormat.QOperator), "expected the QDQ format"),
    ("per-channel weight scales", static(per_channel=False), "one weight scale per output channel"),
    (
        "every Conv, Gemm and MatMul quantized",
        static(op_types_to_quantize=["Gemm"]),
        "expected every Conv, Gemm and MatMul quantized, but Conv",
    ),
    ("int8", static(weight_type=QuantType.QInt4), "expected 8-bit integers"),
    (
        "digits scaled to the contract's 0..1",
        static(reader=UNSCALED),
        "expected calibration digits in the contract's",
    ),
    (
        "the input's name read from the model",
        static(reader=ImageOnly),
        "the input name differs: read it from the model",
    ),
    (
        "calibrated on the training digits given, never test digits",
        static(digits=lambda d: np.concatenate([d, load_mnist().x_test[:300]])),
        "saw other data than the digits passed in",
    ),
    (
        "calibrated on all the training digits given",
        static(digits=lambda d: d[:1]),
        "did not see all the digits passed in",
    ),
    (
        "the int8 file classifies like the fp32 model on test digits",
        activation_ranges_too_wide,
        "picks the fp32 model's digit on only",
    ),
]

OWN_ROUND_05_1 = [
    (
        "random noise instead of the digits (one draw)",
        static(digits=lambda d: np.random.default_rng(0).integers(0, 256, d.shape, dtype=np.uint8)),
        "saw other data than the digits passed in",
    ),
    (
        "random noise instead of the digits (a new draw each call)",
        static(
            digits=lambda d: np.random.default_rng(int(d.sum())).integers(
                0, 256, d.shape, dtype=np.uint8
            )
        ),
        "saw other data than the digits passed in",
    ),
    (
        "its own training digits, the argument ignored",
        static(digits=lambda d: load_mnist().x_train[:300]),
        "saw other data than the digits passed in",
    ),
    (
        "the first batch of 100 only",
        static(digits=lambda d: d[:100]),
        "did not see all the digits passed in",
    ),
    (
        "the test digits instead",
        static(digits=lambda d: load_mnist().x_test[:300]),
        "saw other data than the digits passed in",
    ),
    (
        "int16 activations for precision",
        static(activation_type=QuantType.QUInt16),
        "expected 8-bit integers",
    ),
    (
        "normalized with MNIST's mean and std",
        static(reader=MEAN_STD),
        "expected calibration digits in the contract's 0..1",
    ),
]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_static_int8_digits_tell_what_calibrated_the_file(seed):
    with seeded(seed):
        normal, faint, mostly = (
            ex05.calibration_digits(k) for k in ("normal", "faint", "mostly faint")
        )
    assert normal.max() == 255 and faint.max() <= 127 and mostly.max() == 255
    bright = np.flatnonzero(mostly.max(axis=(1, 2)) > 127)
    assert len(bright) == 3 and bright.min() > len(mostly) // 2


# ---------------------------------------------------------------------------------------------- 05.2
class ListReader(CalibrationDataReader):
    """Right, written differently: a list and an index, the name from onnx.load."""

    def __init__(self, model_path, images_uint8, batch_size=100):
        name = first_input(model_path)
        self.items = [
            {name: (images_uint8[i : i + batch_size, None] / 255).astype(np.float32)}
            for i in range(0, len(images_uint8), batch_size)
        ]
        self.i = 0

    def get_next(self):
        self.i += 1
        return self.items[self.i - 1] if self.i <= len(self.items) else None


class SplitReader(MnistCalibrationReader):
    """Right: np.array_split into batches, from a generator."""

    def __init__(self, model_path, images_uint8, batch_size=100):
        super().__init__(model_path, images_uint8[:0], batch_size)
        chunks = np.array_split(images_uint8, range(batch_size, len(images_uint8), batch_size))
        self.batches = (np.expand_dims(c, 1).astype(np.float32) / 255 for c in chunks)


class StartsOver(ListReader):
    """Rewinds when exhausted, so quantize_static would never stop."""

    def get_next(self):
        self.i %= len(self.items)
        return super().get_next()


class DropsTheLastBatch(ListReader):
    def get_next(self):
        return None if self.i == len(self.items) - 1 else super().get_next()


class NoGetNext:
    """An iterator, not a CalibrationDataReader: quantize_static calls get_next()."""

    def __init__(self, model_path, images_uint8, batch_size=100):
        self.inner = MnistCalibrationReader(model_path, images_uint8, batch_size)

    def __next__(self):
        return self.inner.get_next()


class NoDefault(MnistCalibrationReader):
    def __init__(self, model_path, images_uint8, batch_size):
        super().__init__(model_path, images_uint8, batch_size)


class AlwaysHundred(MnistCalibrationReader):
    def __init__(self, model_path, images_uint8, batch_size=100):
        super().__init__(model_path, images_uint8, 100)


class BareArrays(MnistCalibrationReader):
    def get_next(self):
        item = super().get_next()
        return None if item is None else item[self.input_name]


class Shuffled(MnistCalibrationReader):
    def __init__(self, model_path, images_uint8, batch_size=100):
        order = np.random.default_rng(0).permutation(len(images_uint8))
        super().__init__(model_path, images_uint8[order], batch_size)


class PadsTheLastBatch(ListReader):
    def __init__(self, model_path, images_uint8, batch_size=100):
        padded = np.concatenate(
            [images_uint8, np.zeros((-len(images_uint8) % batch_size, 28, 28), np.uint8)]
        )
        super().__init__(model_path, padded, batch_size)


REQUIREMENTS_05_2 = [
    (
        "the class itself is passed",
        MnistCalibrationReader.__new__(MnistCalibrationReader),
        "got an instance of",
    ),
    ("a CalibrationDataReader (get_next)", NoGetNext, "has no get_next()"),
    ("batch_size defaults to 100", NoDefault, "batch_size left out (default 100)"),
    ("batches of batch_size", AlwaysHundred, "(of at most 64)"),
    ("the input's name read from the model", ImageOnly, "read the name from the model"),
    ("get_next() returns {input name: batch}", BareArrays, "expected dicts with the one key"),
    ("float32", each_batch(lambda v: v.astype(np.float64)), "expected float32"),
    ("[b, 1, 28, 28]", each_batch(lambda v: v[:, 0]), "add the channel axis"),
    ("pixels in 0..1", UNSCALED, "got the uint8 values themselves"),
    ("the digits given, in order", Shuffled, "in another order"),
    ("the last batch may be smaller", PadsTheLastBatch, "with batches of [64, 64, 64, 58]"),
    ("then None", DropsTheLastBatch, "got None after 3 batches"),
    ("None for good", StartsOver, "still returns batches"),
]


class TenBatches(MnistCalibrationReader):
    def __init__(self, model_path, images_uint8, batch_size=100):
        super().__init__(model_path, images_uint8, len(images_uint8))
        self.batches = iter(np.array_split(next(self.batches), 10))


class StopsWithStopIteration(MnistCalibrationReader):
    def get_next(self):
        return {self.input_name: next(self.batches)}


class SameFirstBatch(ListReader):
    def get_next(self):
        self.i += 1
        return self.items[0] if self.i <= len(self.items) else None


OWN_ROUND_05_2 = [
    ("normalized with MNIST's mean and std", MEAN_STD, "got values from -0.424 to 2.82"),
    ("uint8 integer division (0 or 1)", each_batch(np.floor), "differs"),  # images_uint8 // 255
    (
        "the notebook's 10 batches whatever batch_size",
        TenBatches,
        "expected 4 batches (of at most 64)",
    ),
    ("raises StopIteration at the end", StopsWithStopIteration, "raised StopIteration"),
    ("the first batch again and again", SameFirstBatch, "with batches of [64, 64, 64, 58], got"),
    (
        "channels last",
        each_batch(lambda v: v.transpose(0, 2, 3, 1)),
        "expected float32 numpy arrays [batch, 1, 28, 28]",
    ),
]


def test_calibration_check_leaves_the_kernel_as_it_found_it(capsys):
    root = logging.getLogger()
    before = (root.level, list(root.handlers), sys.stdout)
    accepted("05.2", MnistCalibrationReader)
    assert (root.level, list(root.handlers), sys.stdout) == before
    assert capsys.readouterr().out == ""


# ---------------------------------------------------------------------------------------------- 05.3
def with_a_config(fp32_path, int4_path, block_size):
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=block_size, is_symmetric=True, accuracy_level=4
    )
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
            transposed, w = node.input[1] + "_t", arrays[node.input[1]]
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            model.graph.initializer.append(
                numpy_helper.from_array((w.T if trans_b else w).copy(), transposed)
            )
            model.graph.node.remove(node)
            model.graph.node.insert(
                i, helper.make_node("Add", ["mm_out", node.input[2]], node.output, name="b")
            )
            model.graph.node.insert(
                i, helper.make_node("MatMul", [node.input[0], transposed], ["mm_out"], name="mm")
            )
    quantizer = MatMulNBitsQuantizer(
        model, accuracy_level=4, is_symmetric=True, block_size=block_size
    )
    quantizer.process()
    onnx.save(quantizer.model.model, int4_path)


def unchanged(model):
    return model


def int4(rewrite=ex05.gemm_to_matmul, after=unchanged, block=None, **settings):
    """The solution with a change: the Gemm rewrite before quantizing, one after, the block size, the settings."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    def answer(fp32_path, int4_path, block_size):
        quantizer = MatMulNBitsQuantizer(
            rewrite(onnx.load(fp32_path)),
            block_size=block or block_size,
            **{"bits": 4, "is_symmetric": True, "accuracy_level": 4, **settings},
        )
        quantizer.process()
        onnx.save(after(quantizer.model.model), int4_path)

    return answer


def reshaped_not_transposed(model):
    """Its own Gemm rewrite: W [out, in] reshaped to [in, out] instead of transposed (the values scrambled)."""
    from onnx import numpy_helper

    weights = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gemm":
            w = numpy_helper.to_array(weights[node.input[1]])
            weights[node.input[1]].CopyFrom(
                numpy_helper.from_array(w.reshape(w.shape[::-1]), node.input[1])
            )
            del node.attribute[:]  # no transB: the weight has the [in, out] shape now
    return ex05.gemm_to_matmul(model)


def trans_b_ignored(model):
    """A Gemm rewrite that ignores transB: every weight transposed, as if stored [out, in]."""
    for node in model.graph.node:
        if node.op_type == "Gemm":
            del node.attribute[:]
            node.attribute.append(onnx.helper.make_attribute("transB", 1))
    return ex05.gemm_to_matmul(model)


def model_returned(fp32_path, int4_path, block_size):  # returns the quantized model, writes nothing
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(
        ex05.gemm_to_matmul(onnx.load(fp32_path)),
        bits=4,
        block_size=block_size,
        is_symmetric=True,
        accuracy_level=4,
    )
    quantizer.process()
    return quantizer.model.model


REQUIREMENTS_05_3 = [
    (
        "a function int4_weights(fp32_path, int4_path, block_size)",
        "int4.py",
        "expected your function",
    ),
    ("writes the file to int4_path", model_returned, "no file at"),
    (
        "every Gemm as 4-bit blocks (rewritten first)",
        int4(rewrite=unchanged),
        "the quantizer skips Gemm",
    ),
    (
        "every MatMul as 4-bit blocks",
        int4(rewrite=unchanged, after=ex05.gemm_to_matmul),  # Gemm rewritten too late
        "found 1 MatMulNBits and ['MatMul'] float layers",
    ),
    ("bits=4", int4(bits=8), "bits=8 (expected 4)"),
    ("symmetric", int4(is_symmetric=False), "zero points stored"),
    ("accuracy_level=4", int4(accuracy_level=None), "accuracy_level=None (expected 4)"),
    ("the block_size given", int4(block=32), "block_size=32 (expected 16)"),
    ("a Gemm's weight read as its transB says", int4(rewrite=trans_b_ignored), "transB=0"),
    (
        "classifies like the fp32 model",
        int4(rewrite=reshaped_not_transposed),
        "picks the fp32 model's digit on only",
    ),
]


@pytest.mark.parametrize(
    "exercise, answer",
    [
        *right(
            "05.1",
            ex05.quantize_int8,
            one_digit_batches_no_preprocessing,
            with_quantize_and_a_config,
            entropy_calibrated,
        ),
        *right("05.2", MnistCalibrationReader, ListReader, SplitReader),
        *right("05.3", ex05.int4_weights, with_a_config, own_rewrite),
    ],
)
def test_right_answers_pass(exercise, answer):
    accepted(exercise, answer)


@pytest.mark.parametrize(
    "exercise, answer, message",
    [
        *rows("05.1 requirement", REQUIREMENTS_05_1, "05.1"),
        *rows("05.1 own round", OWN_ROUND_05_1, "05.1"),
        *rows("05.2 requirement", REQUIREMENTS_05_2, "05.2"),
        *rows("05.2 own round", OWN_ROUND_05_2, "05.2"),
        *rows("05.3 requirement", REQUIREMENTS_05_3, "05.3"),
    ],
)
def test_each_requirement_broken_alone_and_each_own_round_answer_is_refused(
    exercise, answer, message
):
    refused(exercise, answer, message)


def notebook_function(name: str):
    """The function ``name`` exactly as notebook 05 defines it (its cell's imports, then the def)."""
    import ast

    import nbformat

    from helpers.pipeline.artifacts import notebook_paths

    path = next(p for p in notebook_paths() if p.name.startswith("05_"))
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code" and f"def {name}(" in cell.source:
            tree = ast.parse(cell.source)
            keep = [
                n
                for n in tree.body
                if isinstance(n, (ast.Import, ast.ImportFrom))
                or isinstance(n, ast.FunctionDef)
                and n.name == name
            ]
            namespace = {"np": np, "onnx": onnx}
            exec(compile(ast.Module(keep, type_ignores=[]), str(path), "exec"), namespace)
            return namespace[name]
    raise AssertionError(f"notebook 05 defines no {name}()")


def test_int4_accepts_the_notebooks_own_rewrite_which_calls_check_model():
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    gemm_to_matmul = notebook_function("gemm_to_matmul")

    def int4_weights(fp32_path, int4_path, block_size):
        model = gemm_to_matmul(onnx.load(fp32_path))
        onnx.checker.check_model(model, full_check=True)
        quantizer = MatMulNBitsQuantizer(
            model, bits=4, block_size=block_size, is_symmetric=True, accuracy_level=4
        )
        quantizer.process()
        onnx.checker.check_model(quantizer.model.model)
        onnx.save(quantizer.model.model, int4_path)

    accepted("05.3", int4_weights)


def test_every_model_handed_to_the_learner_passes_check_model():
    for kind, trans_b in (("cnn", 1), ("mlp", 1), ("mlp", 0)):
        model = ex05.fresh_model(np.random.default_rng(trans_b), kind, trans_b)
        onnx.checker.check_model(model, full_check=True)
