"""Notebook 05's exercises: the learner's quantization functions and calibration reader, run on models, digits and
names of the check's own.

05.1 and 05.3 are functions that write a file: an answer's outcome on a case is what its file holds (the formats,
the stored ranges, the layers' settings) and how often it picks the fp32 model's digit on test digits. 05.2 is a
class: its outcome is the batches its ``get_next()`` hands out, call after call.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import numpy as np

from helpers.data.mnist import load_mnist
from helpers.grading.checks._common import contract_input, session, varied_model
from helpers.grading.examiner import (
    Case,
    Exercise,
    Mistake,
    Requirement,
    fresh_folder,
)

LAYERS = ("Conv", "Gemm", "MatMul")
# the names of the inputs the check hands over, drawn per seed: never "image" (the series' own), nor an inner one
NAMES = ("pixels", "image_in", "input_0", "digits_in", "features", "batch_images", "inputs")
OUTPUTS = ("scores", "class_logits", "digit_scores", "outputs")


# --- the check's own models -------------------------------------------------------------------------------------


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
    # every model handed to the learner's code is valid ONNX
    onnx.checker.check_model(model, full_check=True)
    return model


def cnn_nodes(kernel: int, pad: int, stride: int, group: int = 1) -> list:
    """Conv w1 (``kernel``, ``pad``), Relu, Conv w2 (3x3, ``stride``, pad 1, ``group`` groups), Relu, reshaped by
    'flat' to 'h'."""
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
            group=group,
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


@functools.cache
def _fixed_cnn() -> bytes:
    """05.1's CNN, its head fitted once (its int8 files agree with it on about 99 % of test digits); each check
    moves its weights a little and renames its input."""
    return fresh_model(np.random.default_rng(5)).SerializeToString()


def _test_digits(rng, n: int = 1000) -> np.ndarray:
    """``n`` test digits drawn by the seed, in the contract's layout (never handed to the learner's code)."""
    return contract_input(load_mnist().x_test[rng.choice(10_000, n, replace=False)])


def agreement(fp32: Path, small: Path, x: np.ndarray) -> float | str:
    """Share of the digits ``x`` on which both files pick the same digit (what ONNX Runtime says, if it can't)."""
    import onnxruntime as ort

    try:
        picks = []
        for path in (fp32, small):
            # from its bytes: what ONNX Runtime says then names no folder of this check
            run = ort.InferenceSession(Path(path).read_bytes(), providers=["CPUExecutionProvider"])
            picks.append(run.run(None, {run.get_inputs()[0].name: x})[0].argmax(1))
    except Exception as err:  # onnxruntime's own errors, for a file whose shapes do not fit
        return f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
    return float((picks[0] == picks[1]).mean())


def _no_file(what: str):
    def judge(case, got, want):
        return (
            None
            if got["file"]
            else f"no file at {what} after your function returned (save it there)"
        )

    return judge


def _runs(got) -> str | None:
    kept = got["agreement"]
    return (
        f"ONNX Runtime cannot run your file on test digits: {kept}"
        if isinstance(kept, str)
        else None
    )


# --- 05.1 Static int8 for a model you have not seen -----------------------------------------------------------


def quantize_int8(fp32_path, int8_path, train_uint8):
    """Static int8, QDQ, per-channel weights, calibrated on ``train_uint8`` (training digits, never test)."""
    import tempfile
    from pathlib import Path

    import numpy as np
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        quant_pre_process,
        quantize_static,
    )

    class Digits(CalibrationDataReader):
        """All the digits in one batch, under the model's own input name, in the contract's 0..1."""

        def __init__(self, name, images_uint8):
            scaled = images_uint8[:, None].astype(np.float32) / 255
            self.batches = iter([{name: scaled}])

        def get_next(self):
            return next(self.batches, None)

    name = onnx.load(fp32_path).graph.input[0].name
    with tempfile.TemporaryDirectory() as tmp:
        preprocessed = Path(tmp) / "preprocessed.onnx"
        quant_pre_process(fp32_path, preprocessed)
        quantize_static(
            preprocessed,
            int8_path,
            Digits(name, train_uint8),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
        )


# faint: digits at half brightness (uint8 0..127); mostly faint: the same but for three full-brightness ones past
# the middle. The input range the int8 file keeps tells which pixels calibrated it.
KINDS = ("normal", "faint", "mostly faint")


def int8_cases(rng):
    """The check's CNN, its input named anew for each case, with other training digits (300 +- 60) each time."""
    import onnx

    train, x = load_mnist().x_train, _test_digits(rng)
    names, n = rng.choice(NAMES, 3, replace=False), int(rng.integers(240, 361))
    moved = int(rng.integers(2**31))
    cases = []
    for kind, name in zip(KINDS, names):
        digits = train[rng.choice(len(train), n, replace=False)]
        if kind != "normal":
            digits = digits // 2
        if kind == "mostly faint":
            bright = rng.choice(np.arange(n // 2 + 1, n), 3, replace=False)
            digits[bright] = train[rng.choice(len(train), 3, replace=False)]
        path = fresh_folder("fp32-") / "cnn.onnx"
        cnn = onnx.load_from_string(_fixed_cnn())
        onnx.save(varied_model(cnn, moved, str(name), relative_noise=0.05), path)
        said = {
            "normal": "training digits",
            "faint": "faint training digits (0..127)",
            "mostly faint": "training digits, all faint (0..127) but three",
        }[kind]
        label = f"the check's CNN (input {str(name)!r}) with {n} {said}"
        cases.append(Case(label, (path, digits), {"kind": kind, "x": x}))
    return cases


def _input_range(model) -> tuple | None:
    """The lowest and highest input the file can represent, from the input's QuantizeLinear ((qmin - zero point)
    x scale, (qmax - zero point) x scale), and whether it is symmetric (zero point mid-range); None: none there."""
    from onnx import numpy_helper

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    name = model.graph.input[0].name
    node = next(
        (n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == name), None
    )
    if node is None or len(node.input) < 3 or not set(node.input[1:3]) <= set(inits):
        return None
    scale, zero = inits[node.input[1]].astype(np.float64), inits[node.input[2]]
    info = np.iinfo(zero.dtype)
    zero = zero.astype(np.float64)
    low, high = float(np.min((info.min - zero) * scale)), float(np.max((info.max - zero) * scale))
    return low, high, bool(np.all(np.abs(zero - (info.min + info.max + 1) / 2) <= 1))


def int8_file(answer, case) -> dict:
    """What the learner's int8 file holds, and how often it picks the fp32 model's digit (``"fed"``: what ONNX
    Runtime said when the calibration fed the model an input it does not have)."""
    import onnx
    from onnx import TensorProto

    fp32, digits = case.args
    target = fresh_folder() / "int8.onnx"
    try:
        answer(str(fp32), str(target), digits.copy())
    # the one error the examiner cannot tell from another's type: a missing input
    except Exception as err:
        if "missing from input feed" not in str(err):
            raise
        return {"file": False, "fed": str(err).splitlines()[0][:200]}
    if not target.is_file():
        return {"file": False, "fed": None}
    model = onnx.load(target)
    nodes = model.graph.node
    ops = {n.op_type for n in nodes}
    producer = {o: n for n in nodes for o in n.output}
    inits = {t.name: t for t in model.graph.initializer}
    dequantized = lambda name: name in producer and producer[name].op_type == "DequantizeLinear"  # noqa: E731
    layers = [n for n in nodes if n.op_type in LAYERS]
    in_float = [n for n in layers if not all(map(dequantized, n.input[:2]))]
    per_tensor = [
        n.op_type
        for n in layers
        if n not in in_float and np.prod(inits[producer[n.input[1]].input[1]].dims) == 1
    ]
    kinds = {
        TensorProto.DataType.Name(inits[n.input[2]].data_type)
        for n in nodes
        if n.op_type in ("QuantizeLinear", "DequantizeLinear") and len(n.input) > 2
        if n.input[2] in inits
    }
    return {
        "file": True,
        "fed": None,
        "dynamic": "DynamicQuantizeLinear" in ops,
        "integer ops": sorted(
            op for op in ops if op.startswith("QLinear") or op.endswith("Integer")
        ),
        "qdq": "DequantizeLinear" in ops,
        "float layers": [f"{n.op_type} {n.name or n.output[0]}" for n in in_float],
        "per tensor": per_tensor,
        # int32: the biases, as quantize_static stores them
        "other types": sorted(kinds - {"INT8", "UINT8", "INT32"}),
        "input range": _input_range(model),
        "agreement": agreement(fp32, target, case.data["x"]),
    }


def _name_read(case, got, want):
    if got["fed"] is None:
        return None
    said = re.search(
        r"Required inputs \((\[.*?\])\) are missing from input feed \((\[.*?\])\)", got["fed"]
    )
    if said:
        required, fed = (ast.literal_eval(names) for names in said.groups())
        if fed and set(fed) <= set(NAMES) - set(required):
            # another model's input, one this check gave an earlier call: the reader's batches outlived it
            return (
                f"your reader fed {fed}, the input name of a model an earlier call was given, not this model's "
                f"{required}: batches made for an earlier call were handed out again (kept on the class, "
                "shared by every reader, rather than on the instance?)"
            )
    return f"ONNX Runtime says {got['fed']!r}: read the input's name from the model"


def _static(case, got, want):
    if got["dynamic"]:
        return "your file holds DynamicQuantizeLinear: that is dynamic quantization, not calibrated"
    return None


def _qdq(case, got, want):
    if got["integer ops"] or not got["qdq"]:
        found = got["integer ops"] or "no DequantizeLinear"
        return f"expected QuantizeLinear/DequantizeLinear around ordinary operators, found {found}"
    return None


def _every_layer(case, got, want):
    if got["float layers"]:
        return f"{', '.join(got['float layers'])} still read float tensors"
    return None


def _per_channel(case, got, want):
    return f"a single weight scale in {got['per tensor']}" if got["per tensor"] else None


def _eight_bits(case, got, want):
    if got["other types"]:
        return (
            f"found {got['other types']} in QuantizeLinear/DequantizeLinear: expected int8 or uint8"
        )
    return None


def _ranges(got, want):
    if got["input range"] is None:
        # judged "not judged": the layers are not met
        raise ValueError("no QuantizeLinear on the input")
    return got["input range"], want["input range"]


def _scaled(case, got, want):
    """The contract's pixels are in 0..1: an input range reaching below 0 (an asymmetric one: a symmetric range
    is -high..high whatever the data) or well past 1 came from calibration digits scaled otherwise."""
    low, high, symmetric = _ranges(got, want)[0]
    if (not symmetric and low < -0.05) or high > 1.2:
        return (
            f"your file's input range runs from {low:.3g} to {high:.3g}: its calibration saw pixels outside "
            "the contract's 0..1 (uint8 / 255)"
        )
    return None


def _only_given(case, got, want):
    (_, high, _), (_, right_high, _) = _ranges(got, want)
    if high > 1.1 * right_high:
        return "your file's input range reaches brighter pixels than any digit passed in had"
    return None


def _all_given(case, got, want):
    (_, high, _), (_, right_high, _) = _ranges(got, want)
    if high < 0.85 * right_high:
        return "your file's input range stops short of the brightest digits passed in"
    return None


def _classifies_int8(case, got, want):
    # judged on full-brightness calibration digits alone: the faint ones clip bright test pixels by design
    if case.data["kind"] != "normal":
        return None
    if _runs(got):
        return _runs(got)
    if got["agreement"] < 0.93:  # right files agree on about 99 %, miscalibrated ones on about 78 %
        return f"your file picks the fp32 model's digit on only {got['agreement']:.1%} of 1,000 test digits"
    return None


def _reader_of(change=lambda v: v, name=None, batch_size=None):
    """05.1's readers as learners write them: the digits / 255 in batches (all at once by default) with ``change``
    applied, under the model's own input name (or ``name``)."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self, model_path, images_uint8):
            import onnx

            feed = name or onnx.load(model_path).graph.input[0].name
            scaled = images_uint8[:, None].astype(np.float32) / 255
            size = batch_size or len(scaled)
            self.items = iter(
                {feed: change(scaled[i : i + size]).astype(np.float32)}
                for i in range(0, len(scaled), size)
            )

        def get_next(self):
            return next(self.items, None)

    return Reader


def static(digits=None, reader=None, **settings):
    """quantize_static, QDQ, per channel (or ``settings``: an enum's member by its name), calibrated with
    ``reader`` (a function making the reader class) on ``digits(train_uint8)``."""

    def answer(fp32_path, int8_path, train_uint8):
        from onnxruntime import quantization as q

        enums = {"quant_format": q.QuantFormat, "calibrate_method": q.CalibrationMethod}
        chosen = {
            k: getattr(enums.get(k, q.QuantType), v) if isinstance(v, str) else v
            for k, v in settings.items()
        }
        images = train_uint8 if digits is None else digits(train_uint8)
        q.quantize_static(
            fp32_path,
            int8_path,
            (reader or _reader_of)()(fp32_path, images),
            **{"quant_format": q.QuantFormat.QDQ, "per_channel": True, **chosen},
        )

    return answer


def _one_digit_batches_no_preprocessing(fp32_path, int8_path, train_uint8):
    static(reader=lambda: _reader_of(batch_size=1), activation_type="QUInt8")(
        fp32_path, int8_path, train_uint8
    )


def _with_quantize_and_a_config(fp32_path, int8_path, train_uint8):
    from onnxruntime.quantization import QuantFormat, StaticQuantConfig, quantize

    reader = _reader_of(batch_size=64)(fp32_path, train_uint8)
    config = StaticQuantConfig(reader, quant_format=QuantFormat.QDQ, per_channel=True)
    quantize(fp32_path, int8_path, config)


# another calibration method the task allows
def _entropy_calibrated(fp32_path, int8_path, train_uint8):
    static(calibrate_method="Entropy")(fp32_path, int8_path, train_uint8)


def _activation_ranges_too_wide(fp32_path, int8_path, train_uint8):
    """A constructed file: calibrated right, then every inner activation's scale 64 times too wide (2 bits left)."""
    import onnx
    from onnx import numpy_helper

    static()(fp32_path, int8_path, train_uint8)
    model = onnx.load(int8_path)
    inits = {t.name: t for t in model.graph.initializer}
    quantized = [
        n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in inits
    ]
    # the input's range kept
    for name in {n.input[1] for n in quantized if n.input[0] != model.graph.input[0].name}:
        scaled = numpy_helper.to_array(inits[name]) * np.float32(64)
        inits[name].CopyFrom(numpy_helper.from_array(scaled, name))
    onnx.save(model, int8_path)


def _returns_the_model(fp32_path, int8_path, train_uint8):
    import onnx

    return onnx.load(fp32_path)


def _dynamic(fp32_path, int8_path, train_uint8):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(fp32_path, int8_path, weight_type=QuantType.QInt8)


def _noise(d):
    return np.random.default_rng(0).integers(0, 256, d.shape, dtype=np.uint8)


def _noise_each_call(d):
    return np.random.default_rng(int(d.sum())).integers(0, 256, d.shape, dtype=np.uint8)


R1 = dict(
    name="the input's name read from the model",
    file="writes the file to int8_path",
    static="static (calibrated), not dynamic",
    qdq="QDQ format",
    layers="every Conv, Gemm and MatMul quantized",
    per_channel="per-channel weight scales",
    int8="8-bit integers",
    scaled="digits scaled to the contract's 0..1",
    only="calibrated on the digits given, never test digits",
    all="calibrated on all the digits given",
    classifies="classifies like the fp32 model on test digits",
)
OTHER_DATA = (
    "your calibration saw brighter pixels than any digit passed in: calibrate on train_uint8 alone, never "
    "on test digits or your own"
)
PART_OF_THE_DATA = (
    "your calibration missed the brightest digits passed in, past the middle of train_uint8: hand the reader "
    "every one of them"
)

STATIC_INT8 = Exercise(
    id="05.1",
    expects="your function quantize_int8(fp32_path, int8_path, train_uint8)",
    reference=quantize_int8,
    cases=int8_cases,
    run=int8_file,
    requirements=[
        Requirement(R1["name"], _name_read),
        Requirement(R1["file"], _no_file("int8_path")),
        Requirement(R1["static"], _static),
        Requirement(R1["qdq"], _qdq),
        Requirement(R1["layers"], _every_layer),
        Requirement(R1["per_channel"], _per_channel),
        Requirement(R1["int8"], _eight_bits),
        Requirement(R1["scaled"], _scaled),
        Requirement(R1["only"], _only_given),
        Requirement(R1["all"], _all_given),
        Requirement(R1["classifies"], _classifies_int8),
    ],
    mistakes=[
        Mistake(
            "the name 'image' written in",
            static(reader=lambda: _reader_of(name="image")),
            "your reader feeds 'image', an input this model does not have: read the input's name from the "
            "model (onnx.load(fp32_path).graph.input[0].name)",
            R1["name"],
        ),
        Mistake(
            "the model returned, no file written",
            _returns_the_model,
            "your function returns a model but writes no file at int8_path: save it there",
            R1["file"],
        ),
        Mistake(
            "quantize_dynamic",
            _dynamic,
            "your file is quantized dynamically (DynamicQuantizeLinear): quantize_static, calibrated on the "
            "digits, is asked for",
            R1["static"],
        ),
        Mistake(
            "the QOperator format",
            static(quant_format="QOperator"),
            "your file holds QLinear operators (the QOperator format): pass quant_format=QuantFormat.QDQ",
            R1["qdq"],
        ),
        Mistake(
            "the Gemm alone quantized",
            static(op_types_to_quantize=["Gemm"]),
            "your file leaves the Conv layers in float: quantize every Conv, Gemm and MatMul",
            R1["layers"],
        ),
        Mistake(
            "one scale per tensor",
            static(per_channel=False),
            "one weight scale per layer: pass per_channel=True for one per output channel",
            R1["per_channel"],
        ),
        Mistake(
            "4-bit weights",
            static(weight_type="QInt4"),
            "your weights are 4-bit integers: 8-bit ones are asked for (QuantType.QInt8 or QUInt8)",
            R1["int8"],
        ),
        Mistake(
            "16-bit activations",
            static(activation_type="QUInt16"),
            "your activations are 16-bit integers: 8-bit ones are asked for (QuantType.QInt8 or QUInt8)",
            R1["int8"],
        ),
        Mistake(
            "the digits not scaled",
            static(reader=lambda: _reader_of(lambda v: v * 255)),
            "your calibration digits are the uint8 values 0..255: divide them by 255 (the contract's 0..1)",
            R1["scaled"],
        ),
        Mistake(
            "the digits scaled to -1..1",
            static(reader=lambda: _reader_of(lambda v: 2 * v - 1)),
            "your calibration digits run from -1 to 1: the model expects the contract's 0..1 (uint8 / 255), "
            "so your file cannot tell its darkest pixels apart",
            R1["scaled"],
        ),
        Mistake(
            "normalized with MNIST's mean and std",
            static(reader=lambda: _reader_of(lambda v: (v - 0.1307) / 0.3081)),
            "your calibration digits are normalized with MNIST's mean and std; the model normalizes inside: "
            "feed it the digits / 255",
            R1["scaled"],
        ),
        Mistake(
            "test digits added",
            static(digits=lambda d: np.concatenate([d, load_mnist().x_test[:300]])),
            OTHER_DATA,
            R1["only"],
        ),
        Mistake(
            "the test digits instead",
            static(digits=lambda d: load_mnist().x_test[:300]),
            OTHER_DATA,
            R1["only"],
        ),
        Mistake(
            "its own training digits",
            static(digits=lambda d: load_mnist().x_train[:300]),
            OTHER_DATA,
            R1["only"],
        ),
        Mistake("random noise, one draw", static(digits=_noise), OTHER_DATA, R1["only"]),
        Mistake(
            "random noise, a draw per call", static(digits=_noise_each_call), OTHER_DATA, R1["only"]
        ),
        Mistake(
            "the first digit alone", static(digits=lambda d: d[:1]), PART_OF_THE_DATA, R1["all"]
        ),
        Mistake(
            "the first batch of 100 alone",
            static(digits=lambda d: d[:100]),
            PART_OF_THE_DATA,
            R1["all"],
        ),
        Mistake(
            "activation ranges too wide",
            _activation_ranges_too_wide,
            "your file disagrees with the fp32 model on many test digits: are its activations' ranges those "
            "its calibration measured?",
            R1["classifies"],
        ),
    ],
    # each of its checks quantizes the CNN three times per answer it runs (the reference's preprocessed)
    marks=("slow",),
    alternatives=[
        _one_digit_batches_no_preprocessing,
        _with_quantize_and_a_config,
        _entropy_calibrated,
    ],
    setup="import numpy as np",
)


# --- 05.2 Your own calibration reader -------------------------------------------------------------------------


def calibration_reader_class():
    """05.2's reader class: ``{input name: float32 [b, 1, 28, 28] in 0..1}`` per ``get_next()``, then None."""
    import numpy as np
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader

    class MnistCalibrationReader(CalibrationDataReader):
        """``model_path`` is read only for the name of its input, so the reader fits any file of the contract."""

        def __init__(self, model_path, images_uint8: np.ndarray, batch_size: int = 100):
            session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
            self.input_name = session.get_inputs()[0].name
            # the contract: 0..1
            scaled = np.asarray(images_uint8).astype(np.float32)[:, None] / 255.0
            self.batches = iter(
                [scaled[i : i + batch_size] for i in range(0, len(scaled), batch_size)]
            )

        def get_next(self):
            batch = next(self.batches, None)  # stays None once the batches are used up
            return None if batch is None else {self.input_name: batch}

    return MnistCalibrationReader


def reader_cases(rng):
    """The CNN file with a batch_size and without (default 100), and a copy whose input has another name; digit
    counts and batch sizes drawn per seed, none a multiple of its batch size (the last batch is smaller)."""
    import onnx

    from helpers.pipeline.artifacts import existing_artifact

    train, cnn = load_mnist().x_train, existing_artifact("mnist_cnn_pytorch.onnx")
    name = str(rng.choice(NAMES))
    renamed = fresh_folder("fp32-") / "cnn_renamed.onnx"
    copy = varied_model(onnx.load(cnn), 5, input_name=name, output_name=str(rng.choice(OUTPUTS)))
    onnx.save(copy, renamed)
    cases = []
    for path, n, size, label in (
        (cnn, int(rng.integers(200, 300)), int(rng.integers(40, 91)), "the CNN file"),
        (cnn, int(rng.integers(150, 300)), None, "the CNN file"),
        (
            renamed,
            int(rng.integers(100, 170)),
            int(rng.integers(24, 60)),
            f"a copy whose input is {name!r}",
        ),
    ):
        n += n % (size or 100) == 0
        digits = train[rng.choice(len(train), n, replace=False)]
        said = "batch_size left out" if size is None else f"batch_size {size}"
        data = {
            "name": onnx.load(path).graph.input[0].name,
            "size": size or 100,
            "given": size is not None,
        }
        cases.append(Case(f"{label}, {n} digits, {said}", (path, digits, size), data))
    return cases


def _item(item):
    """One ``get_next()`` result as the requirements read it: None, or its keys and its (first) value."""
    if item is None:
        return None
    value = next(iter(item.values()), None) if isinstance(item, dict) else item
    keys = list(item) if isinstance(item, dict) else type(item).__name__
    return {"keys": keys, "batch": value if isinstance(value, np.ndarray) else np.asarray(value)}


def _rows(item) -> int:
    return 0 if item is None or item["batch"].ndim == 0 else len(item["batch"])


def read_batches(answer, case) -> dict:
    """The reader on the case's digits: its ``get_next()`` called until it has handed out every digit (or said
    None), then twice more."""
    path, digits, size = case.args
    reader = (
        answer(str(path), digits.copy()) if size is None else answer(str(path), digits.copy(), size)
    )
    if not callable(getattr(reader, "get_next", None)):
        return {"get_next": False, "items": []}
    items, rows, end = [], 0, None
    for call in range(len(digits) + 3):
        items.append(_item(reader.get_next()))
        rows += _rows(items[-1])
        if end is None and (items[-1] is None or rows >= len(digits)):
            end = call
        if end is not None and call >= end + 2:
            break
    return {"get_next": True, "items": items}


def _handed(case, got) -> list:
    """The batches handed out before the first None, up to the one that holds the last digit."""
    handed, rows = [], 0
    for item in got["items"]:
        if item is None or rows >= len(case.args[1]):
            break
        handed.append(item)
        rows += _rows(item)
    return handed


def _has_get_next(case, got, want):
    return (
        None
        if got["get_next"]
        else "your reader has no get_next() method (quantize_static calls it)"
    )


def _dicts(case, got, want):
    kinds = {
        repr(item["keys"]) for item in _handed(case, got) if not isinstance(item["keys"], list)
    }
    if kinds:
        return f"get_next() returned {', '.join(sorted(kinds))}, not a dict {{input name: batch}}"
    sizes = {len(item["keys"]) for item in _handed(case, got)} - {1}
    return f"get_next() returned dicts of {min(sizes)} keys; one is asked for" if sizes else None


def _name_from_model(case, got, want):
    keys = {item["keys"][0] for item in _handed(case, got)} - {case.data["name"]}
    if keys:
        return f"your batches are under {sorted(keys)[0]!r}, which is not this model's input: read its name from the model"
    return None


def _first_size(case, got) -> int:
    handed = _handed(case, got)
    return _rows(handed[0]) if handed else 0


def _batch_size(case, got, want):
    if case.data["given"] and _handed(case, got) and _first_size(case, got) != case.data["size"]:
        return f"your reader gives batches of {_first_size(case, got)} rows when batch_size is {case.data['size']}"
    return None


def _default_size(case, got, want):
    if not case.data["given"] and _handed(case, got) and _first_size(case, got) != 100:
        return f"your reader gives batches of {_first_size(case, got)} rows when batch_size is left out"
    return None


def _float32(case, got, want):
    kinds = sorted({str(item["batch"].dtype) for item in _handed(case, got)} - {"float32"})
    return f"your batches are {', '.join(kinds)}" if kinds else None


def _layout(case, got, want):
    shapes = [list(item["batch"].shape) for item in _handed(case, got)]
    if all(len(s) == 4 and s[1:] == [1, 28, 28] for s in shapes):
        return None
    hint = (
        " (add the channel axis: images[:, None])" if all(s[1:] == [28, 28] for s in shapes) else ""
    )
    return f"your batches have shapes {shapes}{hint}"


def _pixels(case, got) -> np.ndarray:
    return np.concatenate([item["batch"] for item in _handed(case, got)])[:, 0].astype(np.float64)


def _in_0_1(case, got, want):
    pixels, digits = _pixels(case, got), case.args[1]
    if pixels.min() >= 0 and pixels.max() <= 1:
        return None
    if pixels.shape == digits.shape and np.allclose(pixels, digits, atol=1e-3):
        return "your pixels are the uint8 values themselves: divide them by 255"
    return f"your pixels run from {pixels.min():.3g} to {pixels.max():.3g}"


def _every_digit(case, got, want):
    handed, n = _handed(case, got), len(case.args[1])
    rows = sum(map(_rows, handed))
    if rows < n:
        return f"get_next() returned None after {len(handed)} batches, {rows} of the {n} digits"
    return None


def _in_order(case, got, want):
    pixels, digits = _pixels(case, got), case.args[1].astype(np.float64)
    n = min(len(pixels), len(digits))
    wrong = np.flatnonzero(~np.isclose(pixels[:n] * 255, digits[:n], atol=1e-3).all(axis=(1, 2)))
    if not len(wrong):
        return None
    shuffled = len(pixels) == len(digits) and np.allclose(
        np.sort(pixels.ravel()) * 255, np.sort(digits.ravel()), atol=1e-3
    )
    order = " (the same digits in another order)" if shuffled else ""
    return f"digit {wrong[0]} of {len(digits)} differs from the one handed to your reader{order}"


def _last_batch(case, got, want):
    sizes = [_rows(item) for item in _handed(case, got)]
    if sum(sizes) > len(case.args[1]):
        return f"your batches hold {sizes} rows for {len(case.args[1])} digits: the last one holds what is left"
    return None


def _none_for_good(case, got, want):
    after = got["items"][len(_handed(case, got)) :]
    if any(item is not None for item in after):
        return f"get_next() still returns batches after the {len(case.args[1])} digits: return None then, for good"
    return None


def _list_reader():
    """Right, written differently: a list and an index, the name from onnx.load."""
    from onnxruntime.quantization import CalibrationDataReader

    class ListReader(CalibrationDataReader):
        def __init__(self, model_path, images_uint8, batch_size=100):
            import onnx

            name = onnx.load(model_path).graph.input[0].name
            self.items = [
                {name: (images_uint8[i : i + batch_size, None] / 255).astype(np.float32)}
                for i in range(0, len(images_uint8), batch_size)
            ]
            self.i = 0

        def get_next(self):
            self.i += 1
            return self.items[self.i - 1] if self.i <= len(self.items) else None

    return ListReader


def _split_reader():
    """Right: np.array_split into batches, from a generator."""

    class SplitReader(calibration_reader_class()):
        def __init__(self, model_path, images_uint8, batch_size=100):
            super().__init__(model_path, images_uint8[:0], batch_size)
            cuts = range(batch_size, len(images_uint8), batch_size)
            chunks = np.array_split(images_uint8, cuts)
            self.batches = (np.expand_dims(c, 1).astype(np.float32) / 255 for c in chunks)

    return SplitReader


CHANGES = {  # what some mistaken readers do to each batch of the digits / 255
    "float64": lambda v: v.astype(np.float64),
    "no channel": lambda v: v[:, 0],
    "channels last": lambda v: v.transpose(0, 2, 3, 1),
    "unscaled": lambda v: v * np.float32(255),
    "mean and std": lambda v: (v - 0.1307) / 0.3081,
    "floored": np.floor,  # images_uint8 // 255: 0 or 1
}


def _mistaken_reader(mistake: str):
    """A reader class as a learner writes it with ``mistake`` (see R2's mistakes), else like the reference."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self, model_path, images_uint8, batch_size=100):
            name = onnx.load(model_path).graph.input[0].name
            self.name = "image" if mistake == "image" else name
            size = {"always 100": 100, "ten batches": -(-len(images_uint8) // 10)}
            size = size.get(mistake, batch_size)
            if mistake == "shuffled":
                images_uint8 = images_uint8[np.random.default_rng(0).permutation(len(images_uint8))]
            if mistake == "padded":
                padding = np.zeros((-len(images_uint8) % size, 28, 28), np.uint8)
                images_uint8 = np.concatenate([images_uint8, padding])
            scaled = images_uint8[:, None].astype(np.float32) / 255
            change = CHANGES.get(mistake, lambda v: v)
            self.items = [change(scaled[i : i + size]) for i in range(0, len(scaled), size)]
            self.i = 0

        def get_next(self):
            if mistake == "starts over":  # quantize_static would never stop
                self.i %= len(self.items)
            if mistake == "drops the last" and self.i == len(self.items) - 1:
                return None
            if self.i >= len(self.items):
                if mistake == "StopIteration":
                    raise StopIteration
                return None
            self.i += 1
            batch = self.items[0 if mistake == "same first" else self.i - 1]
            return batch if mistake == "bare arrays" else {self.name: batch}

    class NoDefault(Reader):
        def __init__(self, model_path, images_uint8, batch_size):
            super().__init__(model_path, images_uint8, batch_size)

    class DefaultOf32(Reader):
        def __init__(self, model_path, images_uint8, batch_size=32):
            super().__init__(model_path, images_uint8, batch_size)

    class Iterator:  # not a CalibrationDataReader: quantize_static calls get_next()
        def __init__(self, *args):
            self.reader = Reader(*args)

        def __next__(self):
            return self.reader.get_next()

    return {"no default": NoDefault, "default 32": DefaultOf32, "iterator": Iterator}.get(
        mistake, Reader
    )


class _Named:
    """A reader class built when the examiner first calls it (importing the module stays quick)."""

    def __init__(self, name: str, build):
        self.__name__, self._build = name, build

    def __call__(self, *args):
        return self._build()(*args)


def _mistake(mistake: str) -> _Named:
    return _Named(mistake.replace(" ", "_"), lambda: _mistaken_reader(mistake))


def _is_a_class(answer) -> bool:
    import inspect

    return inspect.isclass(answer) or isinstance(answer, _Named)


R2 = dict(
    get_next="a CalibrationDataReader, with get_next()",
    dicts="get_next() returns {input name: batch}",
    name="the input's name read from the model",
    size="batches of batch_size",
    default="batch_size defaults to 100",
    float32="float32",
    layout="[b, 1, 28, 28]",
    scaled="pixels in 0..1",
    every="every digit handed out, then None",
    order="the digits given, in order",
    last="the last batch holds what is left",
    for_good="None for good",
)

CALIBRATION_READER = Exercise(
    id="05.2",
    expects="your class Reader itself (not an instance of it), called as Reader(model_path, images_uint8, batch_size)",
    reference=calibration_reader_class,
    answer="answer = calibration_reader_class()",
    accepts=_is_a_class,
    cases=reader_cases,
    run=read_batches,
    requirements=[
        Requirement(R2["get_next"], _has_get_next),
        Requirement(R2["dicts"], _dicts),
        Requirement(R2["name"], _name_from_model),
        Requirement(R2["size"], _batch_size),
        Requirement(R2["default"], _default_size),
        Requirement(R2["float32"], _float32),
        Requirement(R2["layout"], _layout),
        Requirement(R2["scaled"], _in_0_1),
        Requirement(R2["every"], _every_digit),
        Requirement(R2["order"], _in_order),
        Requirement(R2["last"], _last_batch),
        Requirement(R2["for_good"], _none_for_good),
    ],
    mistakes=[
        Mistake(
            "an iterator, no get_next()",
            _mistake("iterator"),
            "your reader has no get_next() method, which quantize_static calls: subclass CalibrationDataReader",
            R2["get_next"],
        ),
        Mistake(
            "bare arrays",
            _mistake("bare arrays"),
            "get_next() returns the batch alone: return a dict {input name: batch}",
            R2["dicts"],
        ),
        Mistake(
            "the name 'image' written in",
            _mistake("image"),
            "your batches are under 'image' whatever the model: read the input's name from the model",
            R2["name"],
        ),
        Mistake(
            "always batches of 100",
            _mistake("always 100"),
            "your reader gives batches of 100 rows whatever batch_size says",
            R2["size"],
        ),
        Mistake(
            "the notebook's 10 batches",
            _mistake("ten batches"),
            "your reader cuts the digits into 10 batches whatever batch_size says",
            R2["size"],
        ),
        Mistake(
            "no default batch_size",
            _mistake("no default"),
            "your reader needs batch_size: give it the default 100 (batch_size=100)",
            R2["default"],
        ),
        Mistake(
            "a default of 32",
            _mistake("default 32"),
            "your reader gives batches of 32 rows when batch_size is left out: its default is to be 100",
            R2["default"],
        ),
        Mistake(
            "float64 batches",
            _mistake("float64"),
            "your batches are float64: the model's input is float32 (.astype(np.float32))",
            R2["float32"],
        ),
        Mistake(
            "no channel axis",
            _mistake("no channel"),
            "your batches are [b, 28, 28]: add the channel axis (images[:, None])",
            R2["layout"],
        ),
        Mistake(
            "channels last",
            _mistake("channels last"),
            "your batches are [b, 28, 28, 1], channels last: the contract's are [b, 1, 28, 28]",
            R2["layout"],
        ),
        Mistake(
            "not scaled",
            _mistake("unscaled"),
            "your pixels are the uint8 values themselves: divide them by 255",
            R2["scaled"],
        ),
        Mistake(
            "normalized with MNIST's mean and std",
            _mistake("mean and std"),
            "your pixels are normalized with MNIST's mean and std; the model does that inside: the digits / 255",
            R2["scaled"],
        ),
        Mistake(
            "the last batch dropped",
            _mistake("drops the last"),
            "get_next() returns None before the last batch: hand out every digit",
            R2["every"],
        ),
        Mistake(
            "StopIteration at the end",
            _mistake("StopIteration"),
            "get_next() raises StopIteration at the end: return None instead (next(batches, None))",
            R2["for_good"],
        ),
        Mistake(
            "shuffled",
            _mistake("shuffled"),
            "your batches hold the digits in another order: keep the order they were handed in",
            R2["order"],
        ),
        Mistake(
            "integer division by 255",
            _mistake("floored"),
            "your pixels are 0 or 1: divide as floats (images.astype(np.float32) / 255), not with //",
            R2["order"],
        ),
        Mistake(
            "the first batch again and again",
            _mistake("same first"),
            "get_next() hands out the first batch again and again: move on to the next digits each call",
            R2["order"],
        ),
        Mistake(
            "the last batch padded",
            _mistake("padded"),
            "your last batch is padded to batch_size: it holds just the digits left",
            R2["last"],
        ),
        Mistake(
            "starts over",
            _mistake("starts over"),
            "get_next() starts over after the last batch: return None then, for good (quantize_static would "
            "never stop)",
            R2["for_good"],
        ),
    ],
    alternatives=[_Named("ListReader", _list_reader), _Named("SplitReader", _split_reader)],
    setup="import numpy as np",
)


# --- 05.3 4-bit weights for any file ---------------------------------------------------------------------------


def int4_weights(fp32_path, int4_path, block_size):
    """Every MatMul and Gemm (rewritten first) as 4-bit blocks: MatMulNBits, symmetric, accuracy_level 4."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    from onnxruntime.quantization.onnx_model import ONNXModel

    model = onnx.load(fp32_path)
    # each Gemm(x, W, b) as MatMul(x, W) + Add(b), W transposed first when transB=1: the quantizer skips Gemm
    ONNXModel(model).replace_gemm_with_matmul()
    quantizer = MatMulNBitsQuantizer(
        model, bits=4, block_size=block_size, is_symmetric=True, accuracy_level=4
    )
    quantizer.process()
    onnx.save(quantizer.model.model, int4_path)


def gemm_to_matmul(model):
    """Each ``Gemm(x, W, b)`` as ``MatMul(x, W) + Add(b)``, as in notebook 05 (ONNX Runtime's own rewrite)."""
    from onnxruntime.quantization.onnx_model import ONNXModel

    ONNXModel(model).replace_gemm_with_matmul()
    return model


def int4_cases(rng):
    """The check's MLP (a Gemm, then a MatMul; a hidden size of 100, which no block size divides), its weights
    drawn per seed, its Gemm's weight stored [out, in] (transB=1) in one case and [in, out] in the other; block
    sizes and tensor names drawn per seed."""
    import onnx

    x, cases = _test_digits(rng), []
    blocks = [int(rng.choice([16, 32])), int(rng.choice([64, 128]))]
    for trans_b, block in zip(rng.permutation([1, 0]), rng.permutation(blocks)):
        mlp = fresh_model(rng, "mlp", int(trans_b))
        name_in, name_out = str(rng.choice(NAMES)), str(rng.choice(OUTPUTS))
        path = fresh_folder("fp32-") / "mlp.onnx"
        # valid ONNX: check_model passes it
        onnx.save(varied_model(mlp, block, name_in, name_out), path)
        label = f"the check's MLP (a Gemm with transB={trans_b}, a MatMul), block_size {block}"
        cases.append(Case(label, (path, block), {"x": x, "trans_b": int(trans_b)}))
    return cases


def int4_file(answer, case) -> dict:
    """What the learner's file holds: its layers left in float, each MatMulNBits' settings, its agreement."""
    import onnx

    fp32, block = case.args
    target = fresh_folder() / "int4.onnx"
    answer(str(fp32), str(target), block)
    if not target.is_file():
        return {"file": False}
    nodes = onnx.load(target).graph.node
    settings = [
        {
            **{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute},
            "zero points": len(n.input) > 3 and bool(n.input[3]),
        }
        for n in nodes
        if n.op_type == "MatMulNBits"
    ]
    return {
        "file": True,
        "float layers": [n.op_type for n in nodes if n.op_type in LAYERS],
        "nbits": settings,
        "agreement": agreement(fp32, target, case.data["x"]),
    }


def _gemm_rewritten(case, got, want):
    if "Gemm" in got["float layers"]:
        return "your file still holds the Gemm in float"
    return None


def _all_nbits(case, got, want):
    if got["float layers"] or len(got["nbits"]) != 2:
        return (
            f"found {len(got['nbits'])} MatMulNBits and {got['float layers'] or 'no'} float layers"
        )
    return None


def _setting(key: str, wanted=None):
    def judge(case, got, want):
        right = case.args[1] if key == "block_size" else wanted
        found = sorted({str(s.get(key)) for s in got["nbits"]} - {str(right)})
        return f"your MatMulNBits have {key}={', '.join(found)}" if found else None

    return judge


def _symmetric(case, got, want):
    return (
        "your MatMulNBits store zero points"
        if any(s["zero points"] for s in got["nbits"])
        else None
    )


def _shapes(got) -> list:
    return [(s.get("K"), s.get("N")) for s in got["nbits"]]


def _classifies_int4(case, got, want):
    # a file whose layers take other widths than the fp32 model's is judged by the transB requirement
    if _shapes(got) != _shapes(want):
        return None
    if _runs(got):
        return _runs(got)
    if got["agreement"] < 0.85:  # 4-bit random layers
        return f"your file picks the fp32 model's digit on only {got['agreement']:.1%} of 1,000 test digits"
    return None


def _trans_b(case, got, want):
    if _shapes(got) != _shapes(want):
        widths = [k for k, _ in _shapes(got)]
        return (
            f"your MatMulNBits take {widths} inputs each, not the widths of the Gemm and the MatMul"
        )
    return None


def _int4(rewrite=gemm_to_matmul, after=None, block=None, **settings):
    """The reference with a change: the Gemm rewrite before quantizing, one after, the block size, the settings."""

    def answer(fp32_path, int4_path, block_size):
        import onnx
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        model = rewrite(onnx.load(fp32_path)) if rewrite else onnx.load(fp32_path)
        quantizer = MatMulNBitsQuantizer(
            model,
            block_size=block or block_size,
            **{"bits": 4, "is_symmetric": True, "accuracy_level": 4, **settings},
        )
        quantizer.process()
        onnx.save(after(quantizer.model.model) if after else quantizer.model.model, int4_path)

    return answer


def _with_a_config(fp32_path, int4_path, block_size):
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=block_size, is_symmetric=True, accuracy_level=4
    )
    quantizer = MatMulNBitsQuantizer(gemm_to_matmul(onnx.load(fp32_path)), algo_config=config)
    quantizer.process()
    quantizer.model.save_model_to_file(str(int4_path))


def _own_rewrite(fp32_path, int4_path, block_size):
    """Its own Gemm rewrite (a transposed copy under a new name, via onnx.helper), then the quantizer."""
    import onnx
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


def _reshaped_not_transposed(model):
    """Its own Gemm rewrite: W [out, in] reshaped to [in, out] instead of transposed (the values scrambled)."""
    from onnx import numpy_helper

    weights = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gemm" and any(a.name == "transB" and a.i for a in node.attribute):
            w = numpy_helper.to_array(weights[node.input[1]])
            weights[node.input[1]].CopyFrom(
                numpy_helper.from_array(w.reshape(w.shape[::-1]), node.input[1])
            )
            del node.attribute[:]  # no transB: the weight has the [in, out] shape now
    return gemm_to_matmul(model)


def _trans_b_ignored(model):
    """A Gemm rewrite that ignores transB: every weight transposed, as if stored [out, in]."""
    import onnx

    for node in model.graph.node:
        if node.op_type == "Gemm":
            del node.attribute[:]
            node.attribute.append(onnx.helper.make_attribute("transB", 1))
    return gemm_to_matmul(model)


# returns the quantized model, writes nothing
def _model_returned(fp32_path, int4_path, block_size):
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
    return quantizer.model.model


R3 = dict(
    file="writes the file to int4_path",
    gemm="every Gemm as 4-bit blocks (rewritten first)",
    matmul="every MatMul as 4-bit blocks",
    bits="bits=4",
    symmetric="symmetric",
    accuracy="accuracy_level=4",
    block="the block_size given",
    classifies="classifies like the fp32 model on test digits",
    trans_b="a Gemm's weight read as its transB says",
)

INT4_WEIGHTS = Exercise(
    id="05.3",
    expects="your function int4_weights(fp32_path, int4_path, block_size)",
    reference=int4_weights,
    cases=int4_cases,
    run=int4_file,
    requirements=[
        Requirement(R3["file"], _no_file("int4_path")),
        Requirement(R3["gemm"], _gemm_rewritten),
        Requirement(R3["matmul"], _all_nbits),
        Requirement(R3["bits"], _setting("bits", 4)),
        Requirement(R3["symmetric"], _symmetric),
        Requirement(R3["accuracy"], _setting("accuracy_level", 4)),
        Requirement(R3["block"], _setting("block_size")),
        Requirement(R3["classifies"], _classifies_int4),
        Requirement(R3["trans_b"], _trans_b),
    ],
    mistakes=[
        Mistake(
            "the model returned, no file written",
            _model_returned,
            "your function returns a model but writes no file at int4_path: save it there",
            R3["file"],
        ),
        Mistake(
            "the Gemm left as it is",
            _int4(rewrite=None),
            "the quantizer skips Gemm: rewrite it as MatMul + Add first, as Going deeper does",
            R3["gemm"],
        ),
        Mistake(
            "the Gemm rewritten after quantizing",
            _int4(rewrite=None, after=gemm_to_matmul),
            "your Gemm became a MatMul after the quantizer ran, so it stays in float: rewrite it first",
            R3["matmul"],
        ),
        Mistake("8 bits", _int4(bits=8), "your weights are 8-bit: pass bits=4", R3["bits"]),
        Mistake(
            "asymmetric",
            _int4(is_symmetric=False),
            "your blocks store zero points: pass is_symmetric=True (none stored)",
            R3["symmetric"],
        ),
        Mistake(
            "accuracy_level left out",
            _int4(accuracy_level=None),
            "your MatMulNBits have no accuracy_level: pass accuracy_level=4",
            R3["accuracy"],
        ),
        Mistake(
            "a block size of its own",
            _int4(block=256),
            "your blocks are of 256 whatever block_size your function is given",
            R3["block"],
        ),
        Mistake(
            "the weight reshaped, not transposed",
            _int4(rewrite=_reshaped_not_transposed),
            "your rewrite reshapes the Gemm's weight [out, in] to [in, out]; that scrambles it: transpose it",
            R3["classifies"],
        ),
        Mistake(
            "transB ignored",
            _int4(rewrite=_trans_b_ignored),
            "your rewrite transposes the Gemm's weight even when transB=0, where it is stored [in, out] already",
            R3["trans_b"],
        ),
    ],
    alternatives=[_with_a_config, _own_rewrite],
    setup="import numpy as np",
)

EXERCISES = [STATIC_INT8, CALIBRATION_READER, INT4_WEIGHTS]
