"""Checks for notebook 05's exercises. 05.1 and 05.3 run the learner's function on a model of the check's own
and judge what it writes: operators, attributes, agreement with the fp32 model on test digits the learner's code
never sees. 05.2 runs the learner's reader class on the CNN file and on a renamed copy."""
from __future__ import annotations

import inspect
import tempfile
from pathlib import Path

import numpy as np

from helpers.checks._common import Wrong, as_model_path, contract_input, load_model, renamed_copy, require_callable
from helpers.checks._common import session as open_session

LAYERS = ("Conv", "Gemm", "MatMul")


def fresh_model(path: Path, kind: str = "cnn") -> Path:
    """A classifier unlike the series' ones, input 'pixels', output 'scores' ("cnn": 5×5 unpadded Conv (4
    channels), 3×3 stride-2 padded Conv (6), Gemm; "mlp": Gemm 784->100, MatMul + Add 100->10). The hidden
    layers are random; the last one is fitted by ridge regression on 2,000 training digits, so it classifies."""
    from onnx import TensorProto, helper, numpy_helper

    from helpers.mnist import load_mnist

    rng, node = np.random.default_rng(5), helper.make_node
    if kind == "cnn":
        weights = {"w1": rng.normal(0, 0.3, (4, 1, 5, 5)), "b1": np.zeros(4), "w2": rng.normal(0, 0.3, (6, 4, 3, 3)),
                   "b2": np.zeros(6), "flat": [-1, 864]}
        body = [node("Conv", ["pixels", "w1", "b1"], ["c1"], kernel_shape=[5, 5]), node("Relu", ["c1"], ["r1"]),
                node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                node("Relu", ["c2"], ["r2"]), node("Reshape", ["r2", "flat"], ["h"])]
    else:
        weights = {"w1": rng.normal(0, 0.1, (100, 784)), "b1": rng.normal(0, 0.5, 100), "flat": [-1, 784]}
        body = [node("Reshape", ["pixels", "flat"], ["x"]), node("Gemm", ["x", "w1", "b1"], ["g1"], transB=1),
                node("Relu", ["g1"], ["h"])]

    def model(nodes, output):
        inits = [numpy_helper.from_array(np.asarray(a, np.int64 if n == "flat" else np.float32), n)
                 for n, a in weights.items()]
        value = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
        graph = helper.make_graph(nodes, f"fresh_{kind}", [value("pixels", ["batch", 1, 28, 28])],
                                  [value(output, None)], inits)
        for i, n in enumerate(graph.node):
            n.name = f"{n.op_type.lower()}_{i}"
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    data = load_mnist()
    hidden = open_session(model(body, "h").SerializeToString()).run(
        None, {"pixels": contract_input(data.x_train[:2000])})[0]
    w = np.linalg.solve(hidden.T @ hidden + 10 * np.eye(hidden.shape[1]), hidden.T @ np.eye(10)[data.y_train[:2000]])
    if kind == "cnn":
        weights.update(w3=w.T, b3=np.zeros(10))
        head = [node("Gemm", ["h", "w3", "b3"], ["scores"], transB=1)]
    else:
        weights.update(w2=w, b2=np.zeros(10))
        head = [node("MatMul", ["h", "w2"], ["m2"]), node("Add", ["m2", "b2"], ["scores"])]
    path.write_bytes(model(body + head, "scores").SerializeToString())
    return path


def _run(answer, what: str, *args) -> Path:
    """Call the learner's function; its output file must exist and be an ONNX model."""
    try:
        answer(*map(str, args[:2]), *args[2:])
    except Exception as err:  # whatever the learner's function raises is reported
        raise Wrong(f"expected your function to run on {what}; it raised {type(err).__name__}: {err}") from err
    return as_model_path(args[1])


def _agreement(fp32: Path, small: Path, what: str, minimum: float) -> float:
    """Share of 1,000 test digits (never handed to the learner) on which both files pick the same digit."""
    from helpers.mnist import load_mnist

    x = contract_input(load_mnist().x_test[:1000])
    picks = [open_session(p).run(None, {"pixels": x})[0].argmax(1) for p in (fp32, small)]
    agreement = float((picks[0] == picks[1]).mean())
    if agreement < minimum:
        raise Wrong(f"{what}: your file picks the fp32 model's digit on only {agreement:.1%} of fresh test digits "
                    f"(expected at least {minimum:.0%})")
    return agreement


# ---------------------------------------------------------------------------------------------- 05.1
def _activation_scales(path) -> dict:
    """{tensor: scale} of every QuantizeLinear that quantizes an activation (not a stored weight)."""
    from onnx import numpy_helper

    model = load_model(path)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return {n.input[0]: inits[n.input[1]].tolist() for n in model.graph.node
            if n.op_type == "QuantizeLinear" and n.input[0] not in inits}


def check_static_int8(answer):
    from helpers.mnist import load_mnist

    require_callable(answer, "quantize_int8(fp32_path, int8_path, train_uint8)")
    train = load_mnist().x_train
    with tempfile.TemporaryDirectory() as tmp:
        fp32, what = fresh_model(Path(tmp) / "fresh_cnn.onnx"), "the check's CNN (input 'pixels')"
        files = [_run(answer, what, fp32, Path(tmp) / f"int8_{i}.onnx", train[start:start + 300].copy())
                 for i, start in enumerate((5000, 9000))]
        model = load_model(files[0])
        ops = {n.op_type for n in model.graph.node}
        if "DynamicQuantizeLinear" in ops:
            raise Wrong("expected static quantization, got DynamicQuantizeLinear (dynamic quantization): use "
                        "quantize_static with a calibration reader")
        integer = sorted(op for op in ops if op.startswith("QLinear") or op.endswith("Integer"))
        if integer or "DequantizeLinear" not in ops:
            raise Wrong(f"expected the QDQ format (QuantizeLinear/DequantizeLinear around ordinary operators), got "
                        f"{integer or 'no DequantizeLinear'}: quant_format=QuantFormat.QDQ")
        producer = {o: n for n in model.graph.node for o in n.output}
        inits = {t.name: t for t in model.graph.initializer}
        is_dq = lambda name: name in producer and producer[name].op_type == "DequantizeLinear"  # noqa: E731
        layers = [n for n in model.graph.node if n.op_type in LAYERS]
        in_float = [f"{n.op_type} {n.name or n.output[0]}" for n in layers if not all(map(is_dq, n.input[:2]))]
        if in_float:
            raise Wrong(f"expected every Conv, Gemm and MatMul quantized, but {', '.join(in_float)} still read "
                        "float tensors")
        per_tensor = [n.op_type for n in layers if np.prod(inits[producer[n.input[1]].input[1]].dims) == 1]
        if per_tensor:
            raise Wrong(f"expected one weight scale per output channel, got a single scale in {per_tensor}: "
                        "per_channel=True")
        scales = [_activation_scales(f) for f in files]
        if np.max(scales[0].get("pixels", 0)) > 0.1:
            raise Wrong("the input's quantization range spans about 0..255: the calibration digits were not "
                        "scaled to the contract's 0..1 (divide the uint8 digits by 255)")
        if scales[0] == scales[1]:
            raise Wrong("your file does not change when the calibration digits change: calibrate with train_uint8, "
                        "the training digits passed in (never with test digits)")
        agreement = _agreement(fp32, files[0], "the check's CNN", 0.97)
    return [f"QDQ format, {len(layers)} layers int8 with per-channel weight scales",
            "the activation scales follow the calibration digits passed in",
            f"the int8 file picks the fp32 model's digit on {agreement:.1%} of 1,000 test digits it never saw"]


# ---------------------------------------------------------------------------------------------- 05.2
def _batches(reader_class, model_path, digits: np.ndarray, batch_size: int, name: str, what: str) -> None:
    """Run the reader to its end; its batches must be ``{name: digits / 255}`` in order, then None for good."""
    try:
        reader = reader_class(str(model_path), digits, batch_size)
        got = [reader.get_next() for _ in range(-(-len(digits) // batch_size) + 2)]
    except Exception as err:  # whatever the learner's class raises is reported
        raise Wrong(f"expected {reader_class.__name__}(model_path, images_uint8, batch_size) and get_next() to "
                    f"work on {what}; it raised {type(err).__name__}: {err}") from err
    sizes = [len(digits[i:i + batch_size]) for i in range(0, len(digits), batch_size)]
    first_none = next((i for i, item in enumerate(got) if item is None), len(got))
    if first_none != len(sizes) or any(item is not None for item in got[len(sizes):]):
        problem = (f"got None after {first_none} batches" if first_none < len(sizes) else
                   f"get_next() still returns batches after {len(sizes)}: return None at the end, for good")
        raise Wrong(f"expected {len(sizes)} batches (of at most {batch_size}) for {len(digits)} digits, then None; "
                    f"{problem} ({what})")
    keys = [list(item) if isinstance(item, dict) else type(item).__name__ for item in got[:len(sizes)]]
    if any(k != [name] for k in keys):
        hint = " (read the name from the model: session.get_inputs()[0].name)" if name != "image" else ""
        raise Wrong(f"expected dicts with the one key {name!r}, got {keys} ({what}){hint}")
    arrays = [item[name] for item in got[:len(sizes)]]
    shapes = [np.shape(a) for a in arrays]
    if shapes != [(n, 1, 28, 28) for n in sizes] or any(getattr(a, "dtype", None) != np.float32 for a in arrays):
        hint = " (add the channel axis: images[:, None])" if shapes == [(n, 28, 28) for n in sizes] else ""
        raise Wrong(f"expected float32 numpy arrays [batch, 1, 28, 28] with batches of {sizes}, got "
                    f"{[(str(getattr(a, 'dtype', type(a).__name__)), list(np.shape(a))) for a in arrays]} ({what}){hint}")
    pixels = np.concatenate(arrays)[:, 0]
    if pixels.max() > 1.0:
        raise Wrong(f"expected pixels in 0..1, got values up to {pixels.max():g}: divide the uint8 digits by 255 ({what})")
    if not np.allclose(pixels * 255, digits, atol=1e-3):
        raise Wrong(f"expected the digits handed to the reader, divided by 255, in order; got other values ({what})")


def check_calibration_reader(answer):
    from helpers.mnist import load_mnist
    from helpers.notebooks import require_artifact

    if not inspect.isclass(answer):
        raise Wrong(f"expected your reader class itself, called as Reader(model_path, images_uint8, batch_size), "
                    f"got {'an instance of ' if hasattr(answer, 'get_next') else ''}{type(answer).__name__}")
    cnn, digits = require_artifact("mnist_cnn_pytorch.onnx"), load_mnist().x_train[:250]
    _batches(answer, cnn, digits, 100, "image", "the CNN file, 250 digits, batch_size 100")
    with tempfile.TemporaryDirectory() as tmp:
        renamed = Path(tmp) / "cnn_renamed.onnx"
        renamed.write_bytes(renamed_copy(cnn))
        _batches(answer, renamed, digits[:130], 64, "pixel", "a copy of the CNN whose input is 'pixel', batch_size 64")
    return ["250 digits in batches of 100: {'image': float32 [100|100|50, 1, 28, 28] in 0..1}, then None",
            "a copy whose input is 'pixel' gets {'pixel': ...}: the name comes from the model"]


# ---------------------------------------------------------------------------------------------- 05.3
BLOCK_SIZES = (16, 64)


def check_int4_weights(answer):
    import onnx

    require_callable(answer, "int4_weights(fp32_path, int4_path, block_size)")
    with tempfile.TemporaryDirectory() as tmp:
        fp32, what = fresh_model(Path(tmp) / "fresh_mlp.onnx", "mlp"), "the check's MLP (one Gemm, one MatMul)"
        for block in BLOCK_SIZES:
            path = _run(answer, f"{what}, block_size {block}", fp32, Path(tmp) / f"int4_{block}.onnx", block)
            nodes = load_model(path).graph.node
            left = [n.op_type for n in nodes if n.op_type in LAYERS]
            nbits = [n for n in nodes if n.op_type == "MatMulNBits"]
            if left or len(nbits) != 2:
                raise Wrong(f"block {block}: expected both layers of {what} as MatMulNBits, found {len(nbits)} "
                            f"MatMulNBits and {left or 'no'} float layers" + (
                                " (the quantizer skips Gemm: rewrite it as MatMul + Add first)" if "Gemm" in left
                                else ""))
            for node in nbits:
                attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
                problems = [f"{k}={attrs.get(k)} (expected {v})" for k, v in
                            (("bits", 4), ("block_size", block), ("accuracy_level", 4)) if attrs.get(k) != v]
                if len(node.input) > 3 and node.input[3]:
                    problems.append("zero points stored (expected is_symmetric=True: none)")
                if problems:
                    raise Wrong(f"block {block}, {node.name or node.output[0]}: {'; '.join(problems)}")
            agreement = _agreement(fp32, path, f"block {block}", 0.85)  # 4-bit random layers
    return [f"both layers as MatMulNBits with bits=4, symmetric, accuracy_level=4, block sizes {BLOCK_SIZES}",
            f"block {BLOCK_SIZES[-1]}: picks the fp32 model's digit on {agreement:.1%} of 1,000 test digits"]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "05.1": check_static_int8,
    "05.2": check_calibration_reader,
    "05.3": check_int4_weights,
}
