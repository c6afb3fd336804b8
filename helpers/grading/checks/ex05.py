"""Checks for notebook 05's exercises on models of the check's own and a renamed copy of the CNN file."""

from __future__ import annotations

import inspect
import tempfile
from pathlib import Path

import numpy as np

from helpers.data.mnist import load_mnist
from helpers.grading.checks import _common
from helpers.grading.checks._common import (
    Wrong,
    as_model_path,
    contract_input,
    load_model,
    require_callable,
    session,
    test_images,
    varied_model,
)
from helpers.pipeline.artifacts import built_artifact

LAYERS = ("Conv", "Gemm", "MatMul")


def checked_model(name: str, nodes: list, weights: dict, output: str, width: int):
    """Input 'pixels' [batch, 1, 28, 28], ``output`` [batch, width], ``weights`` ('flat' int64), nodes named."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [
        numpy_helper.from_array(np.asarray(a, np.int64 if n == "flat" else np.float32), n)
        for n, a in weights.items()
    ]
    value = lambda tensor, shape: helper.make_tensor_value_info(tensor, TensorProto.FLOAT, shape)  # noqa: E731
    graph = helper.make_graph(
        nodes,
        name,
        [value("pixels", ["batch", 1, 28, 28])],
        [value(output, ["batch", width])],
        inits,
    )
    for i, node in enumerate(graph.node):
        node.name = f"{node.op_type.lower()}_{i}"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(
        model, full_check=True
    )  # every model handed to the learner's code is valid ONNX
    return model


def cnn_nodes(kernel: int, pad: int, stride: int) -> list:
    """Conv w1 (``kernel``, ``pad``), Relu, Conv w2 (3x3, ``stride``, pad 1), Relu, reshaped by 'flat' to 'h'."""
    from onnx.helper import make_node

    return [
        make_node(
            "Conv", ["pixels", "w1", "b1"], ["c1"], kernel_shape=[kernel, kernel], pads=[pad] * 4
        ),
        make_node("Relu", ["c1"], ["r1"]),
        make_node(
            "Conv",
            ["r1", "w2", "b2"],
            ["c2"],
            kernel_shape=[3, 3],
            strides=[stride] * 2,
            pads=[1] * 4,
        ),
        make_node("Relu", ["c2"], ["r2"]),
        make_node("Reshape", ["r2", "flat"], ["h"]),
    ]


def dense(op: str, w: str, b: str) -> list:
    """'scores' from 'h': one Gemm (``w`` stored [10, in]) or a MatMul and an Add (``w`` stored [in, 10])."""
    from onnx.helper import make_node

    if op == "Gemm":
        return [make_node("Gemm", ["h", w, b], ["scores"], transB=1)]
    return [make_node("MatMul", ["h", w], ["h_" + w]), make_node("Add", ["h_" + w, b], ["scores"])]


def fresh_model(rng, kind: str = "cnn", trans_b: int = 1):
    """A classifier unlike the series' ones (``"cnn"`` or ``"mlp"``), weights drawn by ``rng``, input 'pixels',
    output 'scores', head fitted; the MLP's Gemm stores its weight [out, in] (``trans_b`` 1) or [in, out] (0)."""
    from onnx.helper import make_node

    if kind == "cnn":
        weights = {
            "w1": rng.normal(0, 0.3, (4, 1, 5, 5)),
            "b1": np.zeros(4),
            "w2": rng.normal(0, 0.3, (6, 4, 3, 3)),
            "b2": np.zeros(6),
            "flat": [-1, 864],
        }
        body, width, head = cnn_nodes(5, 0, 2), 864, "Gemm"
    else:
        w1 = rng.normal(0, 0.1, (100, 784))
        weights = {"w1": w1 if trans_b else w1.T, "b1": rng.normal(0, 0.5, 100), "flat": [-1, 784]}
        body = [
            make_node("Reshape", ["pixels", "flat"], ["x"]),
            make_node("Gemm", ["x", "w1", "b1"], ["g1"], transB=trans_b),
            make_node("Relu", ["g1"], ["h"]),
        ]
        width, head = 100, "MatMul"
    data = load_mnist()
    hidden = session(
        checked_model(f"fresh_{kind}", body, weights, "h", width).SerializeToString()
    ).run(None, {"pixels": contract_input(data.x_train[:2000])})[0]
    w = np.linalg.solve(
        hidden.T @ hidden + 10 * np.eye(width), hidden.T @ np.eye(10)[data.y_train[:2000]]
    )
    weights.update(w3=w.T if head == "Gemm" else w, b3=np.zeros(10))
    return checked_model(f"fresh_{kind}", body + dense(head, "w3", "b3"), weights, "scores", 10)


def _run(answer, what: str, source: Path, target: Path, argument) -> Path:
    """Call the learner's function; its output file must exist and be an ONNX model."""
    try:
        answer(str(source), str(target), argument)
    except Exception as err:  # whatever the learner's function raises is reported
        missing_input = "inputs" in str(err) and "missing" in str(err)
        hint = " (the input name differs: read it from the model)" if missing_input else ""
        raise Wrong(
            f"expected your function to run on {what}; it raised {type(err).__name__}: {err}{hint}"
        ) from err
    return as_model_path(target)


def _agreement(fp32: Path, small: Path, what: str, minimum: float) -> float:
    """Share of 1,000 test digits (never handed to the learner, drawn by the check's seed) on which both files
    pick the same digit."""
    x = test_images(10_000)[0][_common.rng(9).choice(10_000, 1000, replace=False)]
    try:
        sessions = [session(p) for p in (fp32, small)]
        picks = [s.run(None, {s.get_inputs()[0].name: x})[0].argmax(1) for s in sessions]
    except Wrong as wrong:
        raise Wrong(f"{what}: {wrong}") from wrong
    except Exception as err:  # onnxruntime's own errors, for a file whose shapes do not fit
        raise Wrong(
            f"{what}: your file loads but fails on test digits: {type(err).__name__}: {err}"
        ) from err
    agreement = float((picks[0] == picks[1]).mean())
    if agreement < minimum:
        raise Wrong(
            f"{what}: your file picks the fp32 model's digit on only {agreement:.1%} of fresh test digits "
            f"(expected at least {minimum:.0%})"
        )
    return agreement


# ---------------------------------------------------------------------------------------------- 05.1
# Each call gets other training digits and a model whose input has another name. The digits of CALLS["faint"]
# are at half brightness (uint8 0..127), those of CALLS["mostly faint"] too except three full-brightness ones
# at positions past the middle: the input range the int8 file keeps tells which pixels calibrated it.
CALLS = {"normal": ("pixels", 0), "faint": ("x", 1), "mostly faint": ("input_0", 2)}
N_CALIBRATION = 300


def calibration_digits(kind: str) -> np.ndarray:
    """The training digits the check hands to the learner's function for call ``kind`` (see CALLS)."""
    train, rng = load_mnist().x_train, _common.rng(10 + CALLS[kind][1])
    digits = train[rng.choice(len(train), N_CALIBRATION, replace=False)]
    if kind != "normal":
        digits = digits // 2
    if kind == "mostly faint":
        bright = rng.choice(np.arange(N_CALIBRATION // 2 + 1, N_CALIBRATION), 3, replace=False)
        digits[bright] = train[rng.choice(len(train), 3, replace=False)]
    return digits


def input_range(path) -> float:
    """The largest input the int8 file can represent: (qmax - zero point) x scale of the input QuantizeLinear."""
    from onnx import numpy_helper

    model = load_model(path)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    name = model.graph.input[0].name
    node = next(
        (n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == name), None
    )
    if (
        node is None
        or len(node.input) < 3
        or node.input[1] not in inits
        or node.input[2] not in inits
    ):
        raise Wrong(
            f"expected a QuantizeLinear with a stored scale and zero point on the input {name!r}; found "
            "none (quantize every Conv, Gemm and MatMul, their input included)"
        )
    scale, zero_point = inits[node.input[1]], inits[node.input[2]]
    return float(np.max((np.iinfo(zero_point.dtype).max - zero_point.astype(np.float64)) * scale))


def _structure(path, what: str) -> int:
    """Static, QDQ, every layer reading dequantized tensors, one weight scale per channel, 8-bit; the layer count."""
    from onnx import TensorProto

    model = load_model(path)
    ops = {n.op_type for n in model.graph.node}
    if "DynamicQuantizeLinear" in ops:
        raise Wrong(
            f"on {what}: expected static quantization, got DynamicQuantizeLinear (dynamic quantization)"
        )
    integer = sorted(op for op in ops if op.startswith("QLinear") or op.endswith("Integer"))
    if integer or "DequantizeLinear" not in ops:
        raise Wrong(
            f"on {what}: expected the QDQ format (QuantizeLinear/DequantizeLinear around ordinary "
            f"operators), got {integer or 'no DequantizeLinear'}"
        )
    producer = {o: n for n in model.graph.node for o in n.output}
    inits = {t.name: t for t in model.graph.initializer}
    is_dq = lambda name: name in producer and producer[name].op_type == "DequantizeLinear"  # noqa: E731
    layers = [n for n in model.graph.node if n.op_type in LAYERS]
    in_float = [
        f"{n.op_type} {n.name or n.output[0]}" for n in layers if not all(map(is_dq, n.input[:2]))
    ]
    if in_float:
        raise Wrong(
            f"on {what}: expected every Conv, Gemm and MatMul quantized, but {', '.join(in_float)} still "
            "read float tensors"
        )
    per_tensor = [
        n.op_type for n in layers if np.prod(inits[producer[n.input[1]].input[1]].dims) == 1
    ]
    if per_tensor:
        raise Wrong(
            f"on {what}: expected one weight scale per output channel, got a single scale in {per_tensor}"
        )
    used = {
        TensorProto.DataType.Name(inits[n.input[2]].data_type)
        for n in model.graph.node
        if n.op_type in ("QuantizeLinear", "DequantizeLinear")
        and len(n.input) > 2
        and n.input[2] in inits
    }
    other = sorted(
        used - {"INT8", "UINT8", "INT32"}
    )  # int32: the biases, as quantize_static stores them
    if other:
        raise Wrong(
            f"on {what}: expected 8-bit integers (int8 or uint8) for the weights and activations, got "
            f"{other} in QuantizeLinear/DequantizeLinear"
        )
    return len(layers)


def check_static_int8(answer):
    import onnx

    require_callable(answer, "quantize_int8(fp32_path, int8_path, train_uint8)")
    with tempfile.TemporaryDirectory() as tmp:
        cnn = fresh_model(np.random.default_rng(5))  # fixed weights; names and digits vary
        files, fp32, reach = {}, {}, {}
        for kind, (name, seed) in CALLS.items():
            fp32[kind] = Path(tmp) / f"cnn_{kind.replace(' ', '_')}.onnx"
            onnx.save(varied_model(cnn, seed, input_name=name), fp32[kind])
            what = f"the check's CNN (input {name!r}) with {N_CALIBRATION} {kind} training digits"
            files[kind] = _run(
                answer, what, fp32[kind], Path(tmp) / f"int8_{seed}.onnx", calibration_digits(kind)
            )
            layers = _structure(files[kind], what)
            reach[kind] = input_range(files[kind])
            if kind == "normal" and not 0.9 <= reach[kind] <= 1.1:
                raise Wrong(
                    f"on {what}, whose brightest pixels are 255: the int8 file's input range reaches "
                    f"{reach[kind]:.3g}; expected calibration digits in the contract's 0..1 (uint8 / 255)"
                )
            if kind == "faint" and reach[kind] > 0.55 * reach["normal"]:
                raise Wrong(
                    f"on {what} (uint8 values 0..127, so pixels at most 0.5): the int8 file's input range "
                    f"reaches {reach[kind]:.2f}, so its calibration saw other data than the digits passed "
                    "in: calibrate on train_uint8 alone"
                )
            if kind == "mostly faint" and reach[kind] < 0.9 * reach["normal"]:
                raise Wrong(
                    f"on {what}, three of them at full brightness past the middle of train_uint8: the "
                    f"int8 file's input range stops at {reach[kind]:.2f}, so its calibration did not see "
                    "all the digits passed in"
                )
        # right files agree on about 97-98.5 % of the seed's digits, miscalibrated ones on about 75 %
        agreement = _agreement(fp32["normal"], files["normal"], "the check's CNN", 0.93)
    return [
        f"QDQ format, {layers} layers int8 with per-channel weight scales, on inputs with three names",
        "calibrated on all the training digits passed in, and on nothing else",
        f"the int8 file picks the fp32 model's digit on {agreement:.1%} of 1,000 test digits it never saw",
    ]


# ---------------------------------------------------------------------------------------------- 05.2
def _batches(
    reader_class, model_path, digits: np.ndarray, batch_size: int | None, name: str, what: str
) -> None:
    """Run the reader to its end: ``{name: digits / 255}`` in order, then None for good (``batch_size`` None: 100)."""
    try:
        reader = (
            reader_class(str(model_path), digits)
            if batch_size is None
            else reader_class(str(model_path), digits, batch_size)
        )
        size = batch_size or 100
        got = [reader.get_next() for _ in range(-(-len(digits) // size) + 2)]
    except Exception as err:  # whatever the learner's class raises is reported
        call = (
            "(model_path, images_uint8)"
            if batch_size is None
            else "(model_path, images_uint8, batch_size)"
        )
        raise Wrong(
            f"expected {reader_class.__name__}{call} and get_next() to work on {what}; it raised "
            f"{type(err).__name__}: {err}"
        ) from err
    sizes = [len(digits[i : i + size]) for i in range(0, len(digits), size)]
    first_none = next((i for i, item in enumerate(got) if item is None), len(got))
    if first_none != len(sizes) or any(item is not None for item in got[len(sizes) :]):
        problem = (
            f"got None after {first_none} batches"
            if first_none < len(sizes)
            else f"get_next() still returns batches after {len(sizes)}: return None at the end, for good"
        )
        raise Wrong(
            f"expected {len(sizes)} batches (of at most {size}) for {len(digits)} digits, then None; "
            f"{problem} ({what})"
        )
    keys = [
        list(item) if isinstance(item, dict) else type(item).__name__ for item in got[: len(sizes)]
    ]
    if any(k != [name] for k in keys):
        hint = " (read the name from the model)" if name != "image" else ""
        raise Wrong(f"expected dicts with the one key {name!r}, got {keys} ({what}){hint}")
    arrays = [item[name] for item in got[: len(sizes)]]
    kinds = [(str(getattr(a, "dtype", type(a).__name__)), list(np.shape(a))) for a in arrays]
    if kinds != [("float32", [n, 1, 28, 28]) for n in sizes]:
        no_channel = [shape for _, shape in kinds] == [[n, 28, 28] for n in sizes]
        hint = " (add the channel axis: images[:, None])" if no_channel else ""
        raise Wrong(
            f"expected float32 numpy arrays [batch, 1, 28, 28] with batches of {sizes}, got {kinds} "
            f"({what}){hint}"
        )
    pixels = np.concatenate(arrays)[:, 0].astype(np.float64)
    if np.allclose(pixels, digits, atol=1e-3) and digits.max() > 1:
        raise Wrong(
            f"expected pixels in 0..1, got the uint8 values themselves, up to {pixels.max():g} ({what})"
        )
    if pixels.min() < 0 or pixels.max() > 1:
        raise Wrong(
            f"expected pixels in the contract's 0..1 (the digits / 255), got values from {pixels.min():.3g} "
            f"to {pixels.max():.3g} ({what})"
        )
    if not np.allclose(pixels * 255, digits, atol=1e-3):
        first = next(
            i
            for i, (p, d) in enumerate(zip(pixels, digits))
            if not np.allclose(p * 255, d, atol=1e-3)
        )
        order = (
            " (the same digits in another order)"
            if np.allclose(np.sort(pixels.ravel()) * 255, np.sort(digits.ravel()), atol=1e-3)
            else ""
        )
        raise Wrong(
            f"expected the digits handed to the reader, divided by 255, in order; digit {first} of "
            f"{len(digits)} differs{order} ({what})"
        )


def check_calibration_reader(answer):
    import onnx
    from onnxruntime.quantization import CalibrationDataReader

    if not inspect.isclass(answer):
        raise Wrong(
            f"expected your reader class itself, called as Reader(model_path, images_uint8, batch_size), "
            f"got {'an instance of ' if hasattr(answer, 'get_next') else ''}{type(answer).__name__}"
        )
    if not issubclass(
        answer, CalibrationDataReader
    ):  # ONNX Runtime's own test: a callable get_next
        raise Wrong(f"expected a CalibrationDataReader: {answer.__name__} has no get_next() method")
    train, rng = load_mnist().x_train, _common.rng(2)
    cnn, digits = (
        built_artifact("mnist_cnn_pytorch.onnx"),
        train[rng.choice(len(train), 250, replace=False)],
    )
    _batches(answer, cnn, digits, 64, "image", "the CNN file, 250 digits, batch_size 64")
    _batches(
        answer,
        cnn,
        digits,
        None,
        "image",
        "the CNN file, 250 digits, batch_size left out (default 100)",
    )
    with tempfile.TemporaryDirectory() as tmp:
        renamed = Path(tmp) / "cnn_renamed.onnx"
        onnx.save(
            varied_model(onnx.load(cnn), 5, input_name="digits_in", output_name="scores"), renamed
        )
        _batches(
            answer,
            renamed,
            digits[:130],
            48,
            "digits_in",
            "a copy of the CNN whose input is 'digits_in', 130 digits, batch_size 48",
        )
    return [
        "250 digits in batches of 64, then of the default 100: float32 [b, 1, 28, 28] in 0..1, then None",
        "a copy whose input is 'digits_in' gets {'digits_in': ...}: the name comes from the model",
    ]


# ---------------------------------------------------------------------------------------------- 05.3
BLOCK_SIZES = {  # block size -> input and output names, the Gemm's transB: its weight stored [out, in] or [in, out]
    16: ("pixels", "scores", 1),
    64: ("features", "class_logits", 0),
}


def check_int4_weights(answer):
    import onnx

    require_callable(answer, "int4_weights(fp32_path, int4_path, block_size)")
    with tempfile.TemporaryDirectory() as tmp:
        for block, (name_in, name_out, trans_b) in BLOCK_SIZES.items():
            mlp = fresh_model(_common.rng(3 + trans_b), "mlp", trans_b)
            what = f"the check's MLP (a Gemm with transB={trans_b}, a MatMul)"
            fp32 = Path(tmp) / f"mlp_{block}.onnx"
            onnx.save(
                varied_model(mlp, block, name_in, name_out), fp32
            )  # valid ONNX: onnx.checker passes it
            path = _run(
                answer, f"{what}, block_size {block}", fp32, Path(tmp) / f"int4_{block}.onnx", block
            )
            nodes = load_model(path).graph.node
            left = [n.op_type for n in nodes if n.op_type in LAYERS]
            nbits = [n for n in nodes if n.op_type == "MatMulNBits"]
            if left or len(nbits) != 2:
                skips = (
                    " (the quantizer skips Gemm: rewrite it as MatMul + Add first)"
                    if "Gemm" in left
                    else ""
                )
                raise Wrong(
                    f"block {block}: expected both layers of {what} as MatMulNBits, found {len(nbits)} "
                    f"MatMulNBits and {left or 'no'} float layers{skips}"
                )
            for node in nbits:
                attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
                problems = [
                    f"{k}={attrs.get(k)} (expected {v})"
                    for k, v in (("bits", 4), ("block_size", block), ("accuracy_level", 4))
                    if attrs.get(k) != v
                ]
                if len(node.input) > 3 and node.input[3]:
                    problems.append("zero points stored (expected is_symmetric=True: none)")
                if problems:
                    raise Wrong(
                        f"block {block}, {node.name or node.output[0]}: {'; '.join(problems)}"
                    )
            agreement = _agreement(
                fp32, path, f"{what}, block {block}", 0.85
            )  # 4-bit random layers
    return [
        f"both layers as MatMulNBits with bits=4, symmetric, accuracy_level=4, block sizes {list(BLOCK_SIZES)}",
        "Gemm weights stored [out, in] (transB=1) and [in, out] (transB=0) both rewritten right",
        f"block {block}: picks the fp32 model's digit on {agreement:.1%} of 1,000 test digits",
    ]


# exercise id -> checker (helpers.grading.exercises.check looks answers up here)
CHECKS = {
    "05.1": check_static_int8,
    "05.2": check_calibration_reader,
    "05.3": check_int4_weights,
}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)
# Quantization works on the .onnx file alone: onnx and onnxruntime's quantization tools, no framework. Those tools
# are imported where they are used, so that importing the checks stays quick.


def calibration_reader_class():
    """05.2's reader class: ``{input name: float32 [b, 1, 28, 28] in 0..1}`` per ``get_next()``, then None."""
    from onnxruntime.quantization import CalibrationDataReader

    class MnistCalibrationReader(CalibrationDataReader):
        """``model_path`` is read only for the name of its input, so the reader fits any file of the contract."""

        def __init__(self, model_path, images_uint8: np.ndarray, batch_size: int = 100):
            import onnxruntime as ort

            session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
            self.input_name = session.get_inputs()[0].name
            scaled = (
                np.asarray(images_uint8).astype(np.float32)[:, None] / 255.0
            )  # the contract: 0..1
            self.batches = iter(
                [scaled[i : i + batch_size] for i in range(0, len(scaled), batch_size)]
            )

        def get_next(self):
            batch = next(self.batches, None)  # stays None once the batches are used up
            return None if batch is None else {self.input_name: batch}

    return MnistCalibrationReader


def quantize_int8(fp32_path, int8_path, train_uint8):
    """Static int8, QDQ, per-channel weights, calibrated on ``train_uint8`` (training digits, never test)."""
    from onnxruntime.quantization import QuantFormat, quant_pre_process, quantize_static

    reader_class = calibration_reader_class()
    with tempfile.TemporaryDirectory() as tmp:
        preprocessed = Path(tmp) / "preprocessed.onnx"
        quant_pre_process(fp32_path, preprocessed)
        quantize_static(
            preprocessed,
            int8_path,
            reader_class(preprocessed, train_uint8),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
        )


def gemm_to_matmul(model):
    """Each ``Gemm(x, W, b)`` (alpha = beta = 1, no transA) as ``MatMul(x, W) + Add(b)``, as in notebook 05:
    ONNX Runtime's own rewrite, which adds a transposed copy of ``W`` when ``transB=1``."""
    from onnxruntime.quantization.onnx_model import ONNXModel

    ONNXModel(model).replace_gemm_with_matmul()
    return model


def int4_weights(fp32_path, int4_path, block_size):
    """Every MatMul and Gemm (rewritten first) as 4-bit blocks: MatMulNBits, symmetric, accuracy_level 4."""
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
    return calibration_reader_class()


def solve_3(workdir: Path):
    return int4_weights
