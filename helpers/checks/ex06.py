"""Checks for the exercises of notebook 06 (benchmarking the runtimes).

06.1 hands the learner's stopwatch a stand-in model whose call times the check itself records, so the verdict
compares the learner's median and p90 with the true ones of the calls they timed, whatever the machine's load.
06.2 compares the learner's multiply-add count with one computed layer by layer from the convolution arithmetic
(output size from kernel, stride, padding), not from ONNX shape inference.
"""
from __future__ import annotations

import tempfile
import time
from numbers import Real
from pathlib import Path

import numpy as np

from helpers.checks._common import require_callable, require_keys
from helpers.checks._common import Wrong

# ---------------------------------------------------------------------------------------------- 06.1
SLOW_FIRST_CALLS = 3  # the stand-in model's first calls are slow, as a real model's are (allocation, kernel choice)


def _stand_in_model(seconds: list):
    def predict():
        i = len(seconds)
        start = time.perf_counter()
        time.sleep(0.030 if i < SLOW_FIRST_CALLS else 0.012 if i % 4 == 3 else 0.002)  # every 4th call hiccups
        seconds.append(time.perf_counter() - start)
    return predict


def _close(value, truth) -> bool:
    return abs(value - truth) <= 0.15 * truth + 300  # µs: the learner's own clock adds a little around each call


def check_fair_time(answer):
    require_callable(answer, "fair_time(fn) -> {'p50_us': ..., 'p90_us': ..., 'n': ...}")
    seconds = []
    try:
        result = answer(_stand_in_model(seconds))
    except Exception as err:  # whatever the learner's function raises is reported
        raise Wrong(f"expected fair_time(fn) to run; it raised {type(err).__name__}: {err}") from err
    require_keys(result, ("p50_us", "p90_us", "n"), "{'p50_us': median, 'p90_us': 90th percentile, 'n': timed calls}")
    n = result["n"]
    if not isinstance(n, (int, np.integer)) or n < 10:
        raise Wrong(f"expected 'n', the number of timed calls, to be an integer of at least 10, got {n!r}")
    if n > len(seconds):
        raise Wrong(f"'n' says {n} timed calls, but fn was called only {len(seconds)} times")
    warmup = len(seconds) - n
    if warmup < SLOW_FIRST_CALLS:
        raise Wrong(f"expected a few warm-up calls that are not timed: fn was called {len(seconds)} times and {n} "
                    f"were timed, so only {warmup} warm-up call(s); this model's first {SLOW_FIRST_CALLS} calls are "
                    "slow and say nothing about what a call costs later")
    timed_us = np.array(seconds[warmup:]) * 1e6
    p50, p90 = float(np.median(timed_us)), float(np.percentile(timed_us, 90))
    for key, truth in (("p50_us", p50), ("p90_us", p90)):
        value = result[key]
        if not isinstance(value, Real):
            raise Wrong(f"expected {key!r} to be a number of microseconds, got {type(value).__name__}")
        if _close(value * 1000, truth):
            raise Wrong(f"{key!r}: got {value:.4g}, which is in milliseconds; expected microseconds (about {truth:.0f})")
        if _close(value * 1e6, truth):
            raise Wrong(f"{key!r}: got {value:.4g}, which is in seconds; expected microseconds (about {truth:.0f})")
        if not _close(value, truth):
            mean, fastest, slowest = timed_us.mean(), timed_us.min(), timed_us.max()
            hint = (" (that is the mean: one slow call in four pulls it up, the median stays put)"
                    if key == "p50_us" and _close(value, mean) else
                    " (that is the slowest call: the 90th percentile ignores the slowest tenth)"
                    if key == "p90_us" and _close(value, slowest) and not _close(slowest, truth) else
                    " (about the fastest call: np.percentile takes 90, not 0.9)"
                    if key == "p90_us" and _close(value, fastest) else "")
            raise Wrong(f"{key!r}: expected about {truth:.0f} µs for the {n} calls you timed, got {value:.0f}{hint}")
    return [f"{warmup} warm-up calls, then {n} timed: median {p50:.0f} µs, p90 {p90:.0f} µs, as measured here too"]


# ---------------------------------------------------------------------------------------------- 06.2
def _reference_macs(path) -> int:
    """Multiply-adds for one image, layer by layer: a Conv applies each weight at every output position."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    height, width = (d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[2:4])
    macs = 0
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Conv":
            out_channels, in_per_group, kh, kw = weights[node.input[1]].shape
            pads, strides = attrs.get("pads", [0, 0, 0, 0]), attrs.get("strides", [1, 1])
            dilations = attrs.get("dilations", [1, 1])
            height = (height + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
            width = (width + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
            macs += out_channels * in_per_group * kh * kw * height * width
        elif node.op_type in ("Gemm", "MatMul") and node.input[1] in weights:
            macs += weights[node.input[1]].size  # one multiply-add per weight per image
    return int(macs)


def _weight_count(path, op_types=("Conv", "Gemm", "MatMul")) -> int:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    sizes = {t.name: numpy_helper.to_array(t).size for t in model.graph.initializer}
    return int(sum(sizes[n.input[1]] for n in model.graph.node if n.op_type in op_types and n.input[1] in sizes))


def _small_cnn(path: Path) -> Path:
    """A CNN unlike the series' one: 5×5 unpadded convolution, then a padded stride-2 3×3, then one Gemm."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.normal(size=shape).astype(np.float32), name) for name, shape in
            (("w1", (4, 1, 5, 5)), ("b1", (4,)), ("w2", (6, 4, 3, 3)), ("b2", (6,)), ("w3", (10, 864)), ("b3", (10,)))]
    init.append(numpy_helper.from_array(np.array([-1, 864], np.int64), "flat"))
    nodes = [helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], kernel_shape=[5, 5]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Reshape", ["r2", "flat"], ["f"]),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path.write_bytes(model.SerializeToString())
    return path


def check_macs(answer):
    from helpers.notebooks import require_artifact

    require_callable(answer, "macs_per_image(path) -> number of multiply-adds")
    details = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("the series' MLP", require_artifact("mnist_mlp_pytorch.onnx")),
                 ("the series' CNN", require_artifact("mnist_cnn_pytorch.onnx")),
                 ("the check's own CNN (5×5 unpadded, then 3×3 stride 2 padded)", _small_cnn(Path(tmp) / "small.onnx"))]
        for what, path in cases:
            try:
                got = answer(str(path))
            except Exception as err:  # whatever the learner's function raises is reported
                raise Wrong(f"expected macs_per_image(path) to run on {what}; it raised {type(err).__name__}: {err}") from err
            if not isinstance(got, Real) or float(got) != int(got):
                raise Wrong(f"expected a whole number of multiply-adds for {what}, got {got!r}")
            want, weights = _reference_macs(path), _weight_count(path)
            if int(got) != want:
                hint = (" (that is the number of weights: a convolution applies each weight at every output position)"
                        if int(got) == weights and want != weights else
                        " (the Conv layers are missing)" if int(got) == _weight_count(path, ("Gemm", "MatMul")) else
                        " (count output positions: after stride and padding a 3×3 stride-2 convolution of 28×28 "
                        "gives 14×14)")
                raise Wrong(f"{what}: expected {want:,} multiply-adds per image, got {int(got):,}{hint}")
            details.append(f"{what}: {want:,} multiply-adds per image for {weights:,} weights")
    return details


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "06.1": check_fair_time,
    "06.2": check_macs,
}
