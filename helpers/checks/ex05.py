"""Checks for the exercises of notebook 05 (quantization and benchmarks).

Every verdict comes from measuring the learner's files against the notebook's fp32 files: which layers read
``DequantizeLinear`` outputs, file sizes, accuracy on all 10,000 test digits. Timings are measured too, but
only reported: they depend on the machine and on what else it is doing.
"""
from __future__ import annotations

import functools
import inspect
import logging
import tempfile
from pathlib import Path

import numpy as np

from helpers.checks._common import as_model_path, load_model, require_keys, test_images
from helpers.checks._common import session as open_session
from helpers.exercises import Wrong

MAX_SIZE_RATIO = 0.30   # the notebook's gate for int8 files (and easily met by 4-bit ones)
MAX_DROP_PP = 1.0       # the notebook's gate for static int8 and 4-bit files, in percentage points
DENSE = ("Gemm", "MatMul")


def _session(path, threads: int = 2):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as in the notebook's benchmark
    return open_session(path, options)


@functools.lru_cache(maxsize=1)
def _test_set():
    return test_images(10_000)


def _accuracy(path) -> float:
    images, labels = _test_set()
    session = _session(path)
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


def _median_ms(path, batch: int) -> float:
    from helpers.timing import measure

    images = np.ascontiguousarray(_test_set()[0][:batch])
    session = _session(path)
    name = session.get_inputs()[0].name
    return measure(lambda: session.run(None, {name: images}), min_time_s=0.2)["p50_us"] / 1000


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
    require_keys(answer, ("all", "gemm_only"), "{'all': path, 'gemm_only': path}")
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
    details = [f"'all': {_describe(layers)}", f"'gemm_only': {_describe(layers_gemm)}",
               f"fp32 file: {fp32[1]:,} bytes, accuracy {fp32[2]:.2%}"]
    details += [f"{k!r}: {m['size']:,} bytes ({m['ratio']:.3f}x fp32), accuracy {m['accuracy']:.2%} "
                f"(drop {m['drop']:+.2f} pp)" for k, m in measured.items()]
    details.append("the convolutions hold about 1 % of the weights: quantizing them barely changes the file size; "
                   "the 784x128 Gemm is most of it")
    timed = {"fp32": fp32[0], **paths}
    notebook_file = fp32[0].parent / "quantized" / "mnist_cnn_pytorch.int8-static.onnx"
    if notebook_file.is_file():
        timed["notebook (first Conv in float)"] = notebook_file
    times = {k: _median_ms(p, 256) for k, p in timed.items()}
    details.append("batch 256, median (measured now, 2 threads; noisy on a shared machine, not judged): "
                   + ", ".join(f"{k} {t:.2f} ms ({t / times['fp32']:.2f}x fp32)" for k, t in times.items()))
    return details


# ---------------------------------------------------------------------------------------------- 05.2

CALIBRATION_SIZES = (1, 10, 100, 1000)


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
        want = digits[start:start + size].astype(np.float32)[:, None] / 255.0
        if not np.allclose(array, want, atol=1e-6):
            if array.max() > 1.0:
                raise Wrong(f"batch {i}: expected pixels in 0..1, got values up to {array.max():g}: divide the "
                            f"uint8 digits by 255 ({what})")
            raise Wrong(f"batch {i}: expected digits {start}..{start + size - 1} scaled to 0..1, in order; "
                        f"got other values (max |difference| {np.abs(array - want).max():.3g}) ({what})")
        start += size


def _calibration_curve(reader_class) -> list[str]:
    """Accuracy of the CNN quantized as in the notebook, calibrated through the learner's reader."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from helpers.mnist import load_mnist

    fp32_path, _, fp32_accuracy = _fp32("mnist_cnn_pytorch.onnx")
    x_train = load_mnist().x_train
    order = np.random.default_rng(0).permutation(len(x_train))
    lines = []
    logging.getLogger().setLevel(logging.WARNING)  # the quantizer logs every node at INFO level
    with tempfile.TemporaryDirectory() as tmp:
        preprocessed = Path(tmp) / "cnn.preprocessed.onnx"
        quant_pre_process(fp32_path, preprocessed)
        first_conv = next(n.name for n in onnx.load(preprocessed).graph.node if n.op_type == "Conv")
        for n in CALIBRATION_SIZES:
            out = Path(tmp) / f"cnn.int8-static.{n}.onnx"
            quantize_static(preprocessed, out, reader_class(str(preprocessed), x_train[order[:n]], 100),
                            quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                            nodes_to_exclude=[first_conv])
            accuracy = _accuracy(out)
            lines.append(f"{n:,} training digit{'s' * (n > 1)}: accuracy {accuracy:.2%} "
                         f"(drop {100 * (fp32_accuracy - accuracy):+.2f} pp), "
                         f"widest activation range {_widest(out):.1f} wide")
    return [f"your reader calibrated the CNN as in the notebook (fp32 accuracy {fp32_accuracy:.2%}):"] + lines + [
        "fewer digits give narrower ranges, so larger activations of other digits get clipped; this small CNN "
        "barely notices: measure it on your own model"]


def _widest(path) -> float:
    """The widest activation range in a QDQ file: max over QuantizeLinear nodes of scale x 255 (uint8 steps)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return max(float(constants[node.input[1]].max()) * 255 for node in model.graph.node
               if node.op_type == "QuantizeLinear" and node.input[0] not in constants and node.input[1] in constants)


def check_calibration_reader(answer):
    from helpers.checks._common import renamed_copy
    from helpers.mnist import load_mnist

    if not inspect.isclass(answer):
        if hasattr(answer, "get_next"):
            raise Wrong(f"expected the class itself (e.g. MnistCalibrationReader), got an instance of "
                        f"{type(answer).__name__}: the check creates its own readers")
        raise Wrong(f"expected your reader class, called as Reader(model_path, images_uint8, batch_size), "
                    f"got {type(answer).__name__}")
    fp32_path = _fp32("mnist_cnn_pytorch.onnx")[0]
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
    return details + _calibration_curve(answer) + [
        "calibration sets the activation ranges, so it is part of fitting the model: calibrating on test digits "
        "would let the test set shape the model that it then grades"]


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
        measured[block]["ms"] = _median_ms(path, 1)
    fp32_ms = _median_ms(fp32[0], 1)
    details = [f"fp32 file: {fp32[1]:,} bytes, accuracy {fp32[2]:.2%}, batch 1 {fp32_ms:.3f} ms"]
    details += [f"block {b:3d}: {m['size']:,} bytes ({m['ratio']:.3f}x fp32), accuracy {m['accuracy']:.2%} "
                f"(drop {m['drop']:+.2f} pp), batch 1 {m['ms']:.3f} ms" for b, m in measured.items()]
    details.append("a smaller block has more scales (one float per block): a bigger file, weights closer to fp32; "
                   "timings are measured now, noisy on a shared machine and not judged")
    details.append(f"accuracy_level used: {sorted(levels)} (4 = int8 activations and VNNI dot products; "
                   "0 = unset, float activations)")
    return details


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "05.1": check_which_layers,
    "05.2": check_calibration_reader,
    "05.3": check_block_sizes,
}
