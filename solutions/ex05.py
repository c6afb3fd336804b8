"""Solutions for notebook 05's exercises (onnx, onnxruntime and its quantization tools, like the notebook).

They start from the fp32 files the series writes (``require_artifact`` rebuilds a missing one), so no
framework is needed: quantization works on the ``.onnx`` file alone.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from onnxruntime.quantization import CalibrationDataReader


def _calibration_images(n: int = 1000) -> np.ndarray:
    """``n`` training digits (uint8 [n, 28, 28]), never test digits, chosen as in the notebook."""
    from helpers.mnist import load_mnist

    x_train = load_mnist().x_train
    return x_train[np.random.default_rng(0).choice(len(x_train), n, replace=False)]


class MnistCalibrationReader(CalibrationDataReader):
    """Calibration batches for ``quantize_static``: ``{input name: float32 [b, 1, 28, 28] in 0..1}``, then None.

    ``model_path`` is read only for the name of its input, so the reader fits any file of the contract.
    """

    def __init__(self, model_path, images_uint8: np.ndarray, batch_size: int = 100):
        import onnxruntime as ort

        session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        self.input_name = session.get_inputs()[0].name
        images = np.asarray(images_uint8)
        if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
            raise ValueError(f"expected uint8 digits [N, 28, 28], got {images.dtype} {list(images.shape)}")
        scaled = images.astype(np.float32)[:, None] / 255.0  # the contract: [N, 1, 28, 28] in 0..1
        self.batches = iter([scaled[i:i + batch_size] for i in range(0, len(scaled), batch_size)])

    def get_next(self):
        batch = next(self.batches, None)  # stays None once the batches are used up
        return None if batch is None else {self.input_name: batch}


def solve_1(workdir: Path):
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from helpers.notebooks import require_artifact

    workdir = Path(workdir)
    preprocessed = workdir / "cnn.preprocessed.onnx"
    quant_pre_process(require_artifact("mnist_cnn_pytorch.onnx"), preprocessed)
    images = _calibration_images()
    answer = {}
    for name, op_types in (("all", None), ("gemm_only", ["Gemm"])):
        answer[name] = workdir / f"cnn.int8-static.{name}.onnx"
        quantize_static(preprocessed, answer[name], MnistCalibrationReader(preprocessed, images),
                        quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax,
                        op_types_to_quantize=op_types)  # None: every supported op; no nodes_to_exclude
    answer["accuracy"] = {name: _accuracy(answer[name]) for name in ("all", "gemm_only")}
    return answer


def _accuracy(path) -> float:
    """Test accuracy on the 10,000 MNIST test digits, as the notebook's accuracy(path)."""
    import onnxruntime as ort

    from helpers.mnist import load_mnist

    data = load_mnist()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits = session.run(None, {"image": data.x_test[:, None].astype(np.float32) / 255.0})[0]
    return float((logits.argmax(1) == data.y_test).mean())


def solve_2(workdir: Path):
    return MnistCalibrationReader


def solve_3(workdir: Path):
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    from helpers.notebooks import require_artifact

    source = require_artifact("mnist_mlp_keras.onnx")  # tf2onnx writes MatMul + Add: no Gemm to rewrite
    answer = {}
    for block_size in (16, 32, 128):
        quantizer = MatMulNBitsQuantizer(onnx.load(source), bits=4, block_size=block_size, is_symmetric=True,
                                         accuracy_level=4)
        quantizer.process()
        answer[block_size] = Path(workdir) / f"mlp_keras.int4-block{block_size}.onnx"
        onnx.save(quantizer.model.model, answer[block_size])
    return answer
