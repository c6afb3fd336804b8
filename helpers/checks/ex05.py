"""Checks for the exercises of notebook 05 (quantization).

Every verdict comes from measuring the learner's files against the notebook's fp32 files: which layers read
``DequantizeLinear`` outputs, file sizes, accuracy on all 10,000 test digits. A check confirms what the learner
found; it does not run the exercise's experiment (calibration sizes, timings) for them, and it leaves the
kernel as it found it (no logging or output changes).
"""
from __future__ import annotations

import functools
import inspect
import tempfile
from pathlib import Path

import numpy as np

from helpers.checks._common import as_model_path, load_model, require_keys, test_images
from helpers.checks._common import session as open_session
from helpers.checks._common import Wrong

MAX_SIZE_RATIO = 0.30   # the notebook's gate for int8 files (and easily met by 4-bit ones)
MAX_DROP_PP = 1.0       # the notebook's gate for static int8 and 4-bit files, in percentage points
DENSE = ("Gemm", "MatMul")


@functools.lru_cache(maxsize=1)
def _test_set():
    """The 10,000 test digits in the contract's form, loaded (and hash-checked) once per kernel."""
    return test_images(10_000)


def _accuracy(path) -> float:
    images, labels = _test_set()
    session = open_session(path)
    name = session.get_inputs()[0].name
    logits = np.concatenate([session.run(None, {name: images[i:i + 1000]})[0] for i in range(0, len(images), 1000)])
    if logits.shape != (10_000, 10):
        raise Wrong(f"expected logits [10000, 10] for the 10,000 test digits, got {list(logits.shape)} "
                    f"from {Path(path).name}")
    return float((logits.argmax(1) == labels).mean())


def _fp32(filename: str) -> tuple[Path, int, float]:
    """(path, size in bytes, test accuracy) of one of the series' fp32 files (measured each time: a rerun of the
    notebook retrains the CNN)."""
    from helpers.notebooks import require_artifact

    path = require_artifact(filename)
    return path, path.stat().st_size, _accuracy(path)


def _gates(what: str, path: Path, fp32: tuple[Path, int, float]) -> dict:
    """Size and accuracy of ``path`` against its fp32 file, with the notebook's gates."""
    _, fp32_size, fp32_accuracy = fp32
    size = path.stat().st_size
    ratio = size / fp32_size
    if ratio > MAX_SIZE_RATIO:
        raise Wrong(f"{what}: expected a file at most {MAX_SIZE_RATIO:.2f}x the fp32 file, got {ratio:.3f}x "
                    f"({size:,} vs {fp32_size:,} bytes)")
    accuracy = _accuracy(path)
    drop = 100 * (fp32_accuracy - accuracy)
    if drop > MAX_DROP_PP:
        raise Wrong(f"{what}: expected an accuracy drop of at most {MAX_DROP_PP} percentage points, got {drop:.2f} "
                    f"({accuracy:.2%} vs {fp32_accuracy:.2%} for fp32)")
    return {"size": size, "ratio": ratio, "accuracy": accuracy, "drop": drop}


# ---------------------------------------------------------------------------------------------- 05.1

def _layers(model) -> list[tuple[str, str, bool]]:
    """(op type, node name, quantized?) of each Conv/Gemm/MatMul, in graph order.

    In the QDQ format a quantized layer is an ordinary float operator whose activation and weight inputs are
    both outputs of DequantizeLinear nodes; a layer left in float reads plain tensors.
    """
    producer = {out: node.op_type for node in model.graph.node for out in node.output}
    return [(node.op_type, node.name or node.output[0],
             all(producer.get(name) == "DequantizeLinear" for name in node.input[:2]))
            for node in model.graph.node if node.op_type in ("Conv",) + DENSE]


def _qdq_layers(key: str, path: Path):
    model = load_model(path)
    ops = {node.op_type for node in model.graph.node}
    operator_format = sorted(op for op in ops if op.startswith("QLinear") or op in ("ConvInteger", "MatMulInteger"))
    if operator_format:
        raise Wrong(f"{key!r}: expected the QDQ format (QuantizeLinear/DequantizeLinear around ordinary Conv and "
                    f"Gemm), got integer operators {operator_format}; use quantize_static(..., "
                    "quant_format=QuantFormat.QDQ)")
    if not {"QuantizeLinear", "DequantizeLinear"} <= ops:
        raise Wrong(f"{key!r}: expected QuantizeLinear and DequantizeLinear nodes, found none: is {path.name} "
                    "quantized at all?")
    layers = _layers(model)
    kinds = [op for op, _, _ in layers]
    if kinds.count("Conv") != 2 or sum(op in DENSE for op in kinds) != 2:
        raise Wrong(f"{key!r}: expected the notebook's CNN (2 Conv, then 2 Gemm), found {kinds}; start from "
                    "artifacts/mnist_cnn_pytorch.onnx (pre-processed)")
    return layers


def _describe(layers) -> str:
    return ", ".join(f"{op} {name} ({'int8' if q else 'float'})" for op, name, q in layers)


def check_which_layers(answer):
    require_keys(answer, ("all", "gemm_only", "accuracy"),
                 "{'all': path, 'gemm_only': path, 'accuracy': {'all': ..., 'gemm_only': ...}}")
    paths = {k: as_model_path(answer[k]) for k in ("all", "gemm_only")}

    layers = _qdq_layers("all", paths["all"])
    in_float = [(op, name) for op, name, q in layers if not q]
    if in_float:
        first_conv = next(name for op, name, _ in layers if op == "Conv")
        hint = (" (the first convolution: drop nodes_to_exclude)" if in_float[0][1] == first_conv else "")
        names = ", ".join(f"{op} {name}" for op, name in in_float)
        raise Wrong(f"'all': expected every Conv and Gemm to read DequantizeLinear outputs, but {names} "
                    f"{'is' if len(in_float) == 1 else 'are'} still float{hint}")
    layers_gemm = _qdq_layers("gemm_only", paths["gemm_only"])
    wrong = [(op, name, q) for op, name, q in layers_gemm if q != (op in DENSE)]
    if wrong:
        raise Wrong(f"'gemm_only': expected the two Conv in float and the two Gemm quantized, got "
                    f"{_describe(layers_gemm)}; use op_types_to_quantize=['Gemm']")

    fp32 = _fp32("mnist_cnn_pytorch.onnx")
    measured = {k: _gates(repr(k), p, fp32) for k, p in paths.items()}
    reported = require_keys(answer["accuracy"], ("all", "gemm_only"), "{'all': accuracy, 'gemm_only': accuracy}")
    for key, m in measured.items():
        value = reported[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise Wrong(f"accuracy[{key!r}]: expected a number, got {type(value).__name__}")
        if 1 < value <= 100 and abs(value / 100 - m["accuracy"]) < 5e-5:
            raise Wrong(f"accuracy[{key!r}]: expected a fraction like accuracy(path) returns, got {value} (a percentage)")
        if abs(value - m["accuracy"]) >= 5e-5:
            other = "gemm_only" if key == "all" else "all"
            hint = (" (the two accuracies are swapped)" if abs(value - measured[other]["accuracy"]) < 5e-5
                    and abs(measured[other]["accuracy"] - m["accuracy"]) >= 5e-5 else
                    " (that is the fp32 file's accuracy)" if abs(value - fp32[2]) < 5e-5 else "")
            raise Wrong(f"accuracy[{key!r}]: expected the test accuracy of that file, {m['accuracy']:.4f}, "
                        f"got {value:.4f}{hint}")
    return [f"'all': {_describe(layers)}", f"'gemm_only': {_describe(layers_gemm)}",
            "both files within the notebook's gates (at most 0.30x the fp32 file, at most 1.0 pp less accurate), "
            "and your accuracies are what the check measures"]


# ---------------------------------------------------------------------------------------------- 05.2

def _batches(reader_class, model_path, digits: np.ndarray, batch_size: int, what: str) -> list:
    """Everything the reader yields, as a list; raises Wrong if it does not end with None (and stay there)."""
    try:
        reader = reader_class(str(model_path), digits, batch_size)
    except Exception as err:  # whatever the learner's constructor raises is reported
        raise Wrong(f"expected {reader_class.__name__}(model_path, images_uint8, batch_size) to work on {what}; "
                    f"it raised {type(err).__name__}: {err}") from err
    expected = -(-len(digits) // batch_size)
    got = []
    for _ in range(expected + 3):
        try:
            item = reader.get_next()
        except Exception as err:
            raise Wrong(f"expected get_next() to return a batch or None on {what}; call {len(got) + 1} raised "
                        f"{type(err).__name__}: {err}") from err
        if item is None:
            break
        if not isinstance(item, dict):
            raise Wrong(f"expected get_next() to return a dict {{input name: array}} or None, got "
                        f"{type(item).__name__} (call {len(got) + 1}, {what})")
        if not item:
            raise Wrong(f"expected None at the end, got an empty dict (call {len(got) + 1}, {what}); "
                        "quantize_static would stop there too, but say it plainly: return None")
        got.append(item)
    else:
        raise Wrong(f"expected None after {expected} batches of at most {batch_size} ({len(digits)} digits), "
                    f"but get_next() still returns batches after {len(got)} calls ({what})")
    if reader.get_next() is not None:
        raise Wrong(f"expected get_next() to keep returning None once the batches are used up ({what})")
    return got


def _check_batches(got: list, digits: np.ndarray, batch_size: int, input_name: str, what: str) -> None:
    full, rest = divmod(len(digits), batch_size)
    sizes = [batch_size] * full + ([rest] if rest else [])
    if len(got) != len(sizes):
        raise Wrong(f"expected {len(sizes)} batches (sizes {sizes}) for {len(digits)} digits in batches of "
                    f"{batch_size}, got {len(got)} ({what})")
    start = 0
    for i, (item, size) in enumerate(zip(got, sizes), 1):
        if list(item) != [input_name]:
            hint = " (read the name from the model: session.get_inputs()[0].name)" if input_name != "image" else ""
            raise Wrong(f"batch {i}: expected the key {input_name!r}, got {list(item)} ({what}){hint}")
        array = item[input_name]
        if not isinstance(array, np.ndarray) or array.dtype != np.float32:
            kind = array.dtype if isinstance(array, np.ndarray) else type(array).__name__
            raise Wrong(f"batch {i}: expected a float32 numpy array, got {kind} ({what})")
        if array.shape != (size, 1, 28, 28):
            hint = " (add the channel axis: images[:, None])" if array.shape == (size, 28, 28) else ""
            raise Wrong(f"batch {i}: expected shape {[size, 1, 28, 28]}, got {list(array.shape)} ({what}){hint}")
        if array.min() < 0 or array.max() > 1.0:
            raise Wrong(f"batch {i}: expected pixels in 0..1, got values from {array.min():g} to {array.max():g}: "
                        f"divide the uint8 digits by 255 ({what})")
        back = np.rint(array[:, 0] * 255)  # undo the scaling: the very digits handed to the reader, in order?
        if not np.array_equal(back, digits[start:start + size]) or np.abs(array[:, 0] * 255 - back).max() > 1e-3:
            raise Wrong(f"batch {i}: expected digits {start}..{start + size - 1} divided by 255, in order; "
                        f"got other values ({what})")
        start += size


def check_calibration_reader(answer):
    from helpers.checks._common import renamed_copy
    from helpers.mnist import load_mnist

    if not inspect.isclass(answer):
        if hasattr(answer, "get_next"):
            raise Wrong(f"expected the class itself (e.g. MnistCalibrationReader), got an instance of "
                        f"{type(answer).__name__}: the check creates its own readers")
        raise Wrong(f"expected your reader class, called as Reader(model_path, images_uint8, batch_size), "
                    f"got {type(answer).__name__}")
    from helpers.notebooks import require_artifact

    fp32_path = require_artifact("mnist_cnn_pytorch.onnx")
    digits = load_mnist().x_train[:250]
    what = "the CNN file, 250 digits, batch_size 100"
    _check_batches(_batches(answer, fp32_path, digits, 100, what), digits, 100, "image", what)
    details = ["250 digits in batches of 100: {'image': float32 [100|100|50, 1, 28, 28] in 0..1}, then None"]

    with tempfile.TemporaryDirectory() as tmp:
        renamed = Path(tmp) / "cnn_renamed.onnx"
        renamed.write_bytes(renamed_copy(fp32_path))
        what = "a copy of the CNN file whose input is named 'pixel', 130 digits, batch_size 64"
        _check_batches(_batches(answer, renamed, digits[:130], 64, what), digits[:130], 64, "pixel", what)
    details.append("a copy whose input is 'pixel' gets {'pixel': ...}: the name comes from the model")
    from onnxruntime.quantization import CalibrationDataReader

    if not issubclass(answer, CalibrationDataReader):
        details.append("quantize_static only calls get_next(), but subclassing "
                       "onnxruntime.quantization.CalibrationDataReader says what the class is for")
    return details


# ---------------------------------------------------------------------------------------------- 05.3

BLOCK_SIZES = (16, 32, 128)


def check_block_sizes(answer):
    import onnx

    require_keys(answer, BLOCK_SIZES, "{block_size: path} with integer block sizes")
    fp32 = _fp32("mnist_mlp_keras.onnx")
    n_matmul = sum(node.op_type == "MatMul" for node in load_model(fp32[0]).graph.node)
    measured, levels = {}, set()
    for block in BLOCK_SIZES:
        path = as_model_path(answer[block])
        model = load_model(path)
        nbits = [node for node in model.graph.node if node.op_type == "MatMulNBits"]
        if len(nbits) != n_matmul or any(node.op_type in DENSE for node in model.graph.node):
            raise Wrong(f"block {block}: expected all {n_matmul} MatMul of the Keras MLP as MatMulNBits, got "
                        f"{len(nbits)} MatMulNBits in {path.name} (its ops: "
                        f"{sorted({node.op_type for node in model.graph.node})}); quantize "
                        "artifacts/mnist_mlp_keras.onnx itself (tf2onnx writes MatMul; pre-processing fuses it "
                        "into Gemm, which the 4-bit quantizer skips)")
        for node in nbits:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if attrs.get("bits") != 4 or attrs.get("block_size") != block:
                raise Wrong(f"block {block}: expected bits=4 and block_size={block} in every MatMulNBits, got "
                            f"bits={attrs.get('bits')}, block_size={attrs.get('block_size')} in {node.name}")
            levels.add(attrs.get("accuracy_level", 0))
        measured[block] = _gates(f"block {block}", path, fp32)
    return [f"block {b}: {n_matmul} MatMulNBits with bits=4, block_size={b}; within the notebook's gates"
            for b in measured] + [f"accuracy_level used: {sorted(levels)}"]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "05.1": check_which_layers,
    "05.2": check_calibration_reader,
    "05.3": check_block_sizes,
}
