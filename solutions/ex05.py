"""Solutions for notebook 05's exercises (onnx, onnxruntime and its quantization tools, like the notebook).

Quantization works on the ``.onnx`` file alone: no framework is needed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from onnxruntime.quantization import CalibrationDataReader


class MnistCalibrationReader(CalibrationDataReader):
    """Calibration batches for ``quantize_static``: ``{input name: float32 [b, 1, 28, 28] in 0..1}``, then None.

    ``model_path`` is read only for the name of its input, so the reader fits any file of the contract.
    """

    def __init__(self, model_path, images_uint8: np.ndarray, batch_size: int = 100):
        import onnxruntime as ort

        session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        self.input_name = session.get_inputs()[0].name
        scaled = np.asarray(images_uint8).astype(np.float32)[:, None] / 255.0  # the contract: 0..1
        self.batches = iter([scaled[i : i + batch_size] for i in range(0, len(scaled), batch_size)])

    def get_next(self):
        batch = next(self.batches, None)  # stays None once the batches are used up
        return None if batch is None else {self.input_name: batch}


def quantize_int8(fp32_path, int8_path, train_uint8):
    """Static int8, QDQ, per-channel weights, calibrated on ``train_uint8`` (training digits, never test)."""
    from onnxruntime.quantization import QuantFormat, quant_pre_process, quantize_static

    with tempfile.TemporaryDirectory() as tmp:
        preprocessed = Path(tmp) / "preprocessed.onnx"
        quant_pre_process(fp32_path, preprocessed)
        quantize_static(
            preprocessed,
            int8_path,
            MnistCalibrationReader(preprocessed, train_uint8),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
        )


def gemm_to_matmul(model):
    """Each ``Gemm(x, W, b)`` (alpha = beta = 1, no transA) as ``MatMul(x, W) + Add(b)``, as in notebook 05."""
    from onnx import helper, numpy_helper

    weights = {t.name: t for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type != "Gemm":
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        w = numpy_helper.to_array(weights[node.input[1]])
        weights[node.input[1]].CopyFrom(
            numpy_helper.from_array(
                np.ascontiguousarray(w.T if attrs.get("transB") else w), node.input[1]
            )
        )
        nodes += [
            helper.make_node(
                "MatMul", node.input[:2], [node.output[0] + "_mm"], name=node.name + "_mm"
            ),
            helper.make_node(
                "Add", [node.output[0] + "_mm", node.input[2]], node.output, name=node.name + "_b"
            ),
        ]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def int4_weights(fp32_path, int4_path, block_size):
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(
        gemm_to_matmul(onnx.load(fp32_path)),
        bits=4,
        block_size=block_size,
        is_symmetric=True,
        accuracy_level=4,
    )
    quantizer.process()
    onnx.save(quantizer.model.model, int4_path)


def solve_1(workdir: Path):
    return quantize_int8


def solve_2(workdir: Path):
    return MnistCalibrationReader


def solve_3(workdir: Path):
    return int4_weights
