"""Checks for notebook 06's exercises. 06.1 times a stand-in model whose calls the check records, with a wall
clock (``time.time``) ticking every 15.6 ms as on some systems; 06.2 counts multiply-adds layer by layer from the
convolution arithmetic. Feedback gives a direction and a coarse size, never the expected number."""
from __future__ import annotations

import math
import tempfile
import time
from numbers import Real
from pathlib import Path
from unittest import mock

import numpy as np

from helpers.checks._common import Wrong, require_callable, require_keys

# ---------------------------------------------------------------------------------------------- 06.1
SLOW_FIRST_CALLS = 3  # the stand-in model's first calls are slow, as a real model's are (allocation, kernel choice)
TICK_S = 1 / 64  # a coarse wall clock: time.time() on some systems advances in steps of 15.6 ms


def _stand_in_model(seconds: list):
    def predict():
        i = len(seconds)
        start = time.perf_counter()  # first calls slow; every 4th call hiccups; every 25th a long pause (GC)
        time.sleep(0.030 if i < SLOW_FIRST_CALLS else 0.040 if i % 25 == 8 else 0.012 if i % 4 == 3 else 0.002)
        seconds.append(time.perf_counter() - start)
    return predict


def _close(value, truth) -> bool:
    return abs(value - truth) <= 0.15 * truth + 300  # µs: the learner's own clock adds a little around each call


def check_fair_time(answer):
    require_callable(answer, "fair_time(fn) -> {'p50_us': ..., 'p90_us': ..., 'n': ...}")
    seconds, real_time = [], time.time
    try:
        with mock.patch("time.time", lambda: math.floor(real_time() / TICK_S) * TICK_S):
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
    for key, truth in (("p50_us", np.median(timed_us)), ("p90_us", np.percentile(timed_us, 90))):
        value = result[key]
        if not isinstance(value, Real):
            raise Wrong(f"expected {key!r} to be a number of microseconds, got {type(value).__name__}")
        for unit, factor in (("milliseconds", 1e3), ("seconds", 1e6)):
            if _close(value * factor, truth):
                raise Wrong(f"{key!r}: got {value:.4g}, which is in {unit}; expected microseconds")
        if not _close(value, truth):
            ticks = value / (TICK_S * 1e6)
            hint = (" (that is the mean: one slow call in four pulls it up, the median stays put)"
                    if key == "p50_us" and _close(value, timed_us.mean()) else
                    " (that is the slowest call: the 90th percentile ignores the slowest tenth)"
                    if key == "p90_us" and _close(value, timed_us.max()) else
                    " (about the fastest call: np.percentile takes 90, not 0.9)"
                    if key == "p90_us" and _close(value, timed_us.min()) else
                    " (a multiple of 15.6 ms: time.time() ticks that coarsely on some systems; time it with "
                    "time.perf_counter())" if abs(ticks - round(ticks)) < 0.01 else "")
            raise Wrong(f"{key!r}: too {'high' if value > truth else 'low'}, by more than 15 % for the {n} calls you "
                        f"timed{hint}")
    return [f"{warmup} warm-up calls, then {n} timed: your median and p90 match the calls you timed"]


# ---------------------------------------------------------------------------------------------- 06.2
def _reference_macs(path, op_types=("Conv", "Gemm", "MatMul"), per_position=True) -> int:
    """Multiply-adds for one image, layer by layer: a Conv applies each weight at every output position
    (``per_position=False``: the number of weights)."""
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
            positions = (height * width if per_position else 1) if node.op_type in op_types else 0
            macs += out_channels * in_per_group * kh * kw * positions
        elif node.op_type in op_types and node.input[1] in weights:
            macs += weights[node.input[1]].size  # one multiply-add per weight per image
    return int(macs)


def check_macs(answer):
    from helpers.checks.ex05 import fresh_model
    from helpers.notebooks import require_artifact

    require_callable(answer, "macs_per_image(path) -> number of multiply-adds")
    details = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("the series' MLP", require_artifact("mnist_mlp_pytorch.onnx")),
                 ("the series' CNN", require_artifact("mnist_cnn_pytorch.onnx")),
                 ("the check's own CNN (5×5 unpadded, then 3×3 stride 2 padded)", fresh_model(Path(tmp) / "cnn.onnx"))]
        for what, path in cases:
            try:
                got = answer(str(path))
            except Exception as err:  # whatever the learner's function raises is reported
                raise Wrong(f"expected macs_per_image(path) to run on {what}; it raised {type(err).__name__}: {err}") from err
            if not isinstance(got, Real) or float(got) != int(got):
                raise Wrong(f"expected a whole number of multiply-adds for {what}, got {got!r}")
            want = _reference_macs(path)
            if int(got) != want:
                hint = (" (that is the number of weights: a convolution applies each weight at every output position)"
                        if int(got) == _reference_macs(path, per_position=False) != want else
                        " (that is twice the multiply-adds: FLOPs count a multiply and an add, the exercise asks for "
                        "multiply-adds)" if int(got) == 2 * want else
                        " (the Conv layers are missing)" if int(got) == _reference_macs(path, ("Gemm", "MatMul")) else
                        "")
                right = "; ".join(f"{w}: right" for w in details)
                raise Wrong(f"{what}: your count is too {'high' if got > want else 'low'}" +
                            (f", by more than 10 %" if abs(got - want) > 0.1 * want else "") +
                            hint + (f" ({right})" if right else ""))
            details.append(what)
    return [f"{what}: right" for what in details]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "06.1": check_fair_time,
    "06.2": check_macs,
}
