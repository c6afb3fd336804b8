"""Checks for notebook 06's exercises: timing a stand-in model on a coarse clock, counting a CNN's multiply-adds."""

from __future__ import annotations

import math
import sys
import tempfile
import time
from numbers import Real
from pathlib import Path
from unittest import mock

import numpy as np

from helpers.grading.checks import _common
from helpers.grading.checks._common import Wrong, require_callable, require_keys
from helpers.grading.checks.ex05 import checked_model, cnn_nodes, dense
from helpers.pipeline.artifacts import built_artifact

# ---------------------------------------------------------------------------------------------- 06.1
SLOW_FIRST_CALLS = 3  # the stand-in model's first calls are slow, as a real model's are (allocation, kernel choice)
TICK_S = 1 / 64  # a coarse wall clock: time.time() on some systems advances in steps of 15.6 ms
HELPER_MODULES = (
    "helpers.measure.timing",
    "helpers.measure.side_by_side",
)  # the series' loops, ruled out


# A quick model and a slower one, durations (ms) drawn in ranges that a single fixed answer cannot match. The
# first calls are slower than any later one (a hiccup at its longest, a pause), so a loop that times them moves
# its 90th percentile far beyond the 15 % allowed, however loaded the machine (with first calls no slower than
# the longest hiccups, a loaded machine's sleeps once made such a loop pass).
MODELS = {
    "a quick model": {"fast": (1.5, 2.2), "hiccup": (6, 8), "pause": (60, 70), "first": 90},
    "a slower model": {"fast": (4.0, 5.5), "hiccup": (12, 16), "pause": (110, 130), "first": 150},
}
# A hiccup lasts 1 to HICCUP_SPREAD times the model's shortest one, the spread filled evenly (golden-ratio steps):
# the slowest tenth of the calls then differs from the next tenth, so a 90th percentile taken after leaving the
# slowest calls out comes out too low.
HICCUP_SPREAD = 4
GOLDEN = (math.sqrt(5) - 1) / 2


def _stand_in_model(seconds: list, rng, used_helpers: list, kind: str = "a quick model"):
    """fn(): first calls slow; every 4th call hiccups; every 25th a long pause (a GC). Durations drawn by ``rng``."""
    ms = {k: v if isinstance(v, (int, float)) else rng.uniform(*v) for k, v in MODELS[kind].items()}
    phase, gc_at, offset = int(rng.integers(4)), int(rng.integers(5, 12)), rng.random()

    def predict():
        caller = sys._getframe(1)
        while (
            caller is not None
        ):  # who called fn: the learner's loop, or one of the series' helpers
            if caller.f_globals.get("__name__") in HELPER_MODULES:
                used_helpers.append(caller.f_globals["__name__"])
            caller = caller.f_back
        i = len(seconds)
        hiccup = ms["hiccup"] * HICCUP_SPREAD ** ((offset + GOLDEN * (i // 4)) % 1)
        start = time.perf_counter()
        time.sleep(
            1e-3
            * (
                ms["first"]
                if i < SLOW_FIRST_CALLS
                else ms["pause"]
                if i % 25 == gc_at
                else hiccup
                if i % 4 == phase
                else ms["fast"]
            )
        )
        seconds.append(time.perf_counter() - start)

    return predict


def _close(value, truth) -> bool:
    return (
        abs(value - truth) <= 0.15 * truth + 300
    )  # µs: the learner's own clock adds a little around each call


def check_fair_time(answer):
    require_callable(answer, "fair_time(fn) -> {'p50_us': ..., 'p90_us': ..., 'n': ...}")
    rng = _common.rng()  # the models' durations, new with each seed
    return [_check_fair_time_on(answer, kind, rng) for kind in MODELS]


def _check_fair_time_on(answer, kind, rng) -> str:
    seconds, used_helpers, real_time, wall_clock_reads = [], [], time.time, []

    def coarse_time():  # the wall clock of some systems, and a count of who reads it
        wall_clock_reads.append(1)
        return math.floor(real_time() / TICK_S) * TICK_S

    fn = _stand_in_model(seconds, rng, used_helpers, kind)
    try:
        with mock.patch("time.time", coarse_time):
            result = answer(fn)
    except Exception as err:  # whatever the learner's function raises is reported
        hint = (
            " (fn takes no arguments: call it as fn())"
            if isinstance(err, TypeError) and "positional" in str(err)
            else ""
        )
        raise Wrong(
            f"expected fair_time(fn) to run on {kind}; it raised {type(err).__name__}: {err}{hint}"
        ) from err
    if used_helpers:
        raise Wrong(
            f"fn was called by {used_helpers[0]}: the task asks for your own loop, without helpers "
            "(warm-up calls, then timed calls, then the statistics)"
        )
    require_keys(
        result,
        ("p50_us", "p90_us", "n"),
        "{'p50_us': median, 'p90_us': 90th percentile, 'n': timed calls}",
    )
    n = result["n"]
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise Wrong(f"expected 'n', the number of timed calls, to be an integer, got {n!r}")
    if n < 10:
        raise Wrong(f"expected at least 10 timed calls, 'n' says {n}")
    if n > len(seconds):
        raise Wrong(f"'n' says {n} timed calls, but fn was called only {len(seconds)} times")
    warmup = len(seconds) - n
    if warmup < SLOW_FIRST_CALLS:
        raise Wrong(
            f"expected at least {SLOW_FIRST_CALLS} warm-up calls that are not timed: fn was called "
            f"{len(seconds)} times and 'n' says {n} were timed, so {warmup} warm-up call(s); this model's "
            f"first {SLOW_FIRST_CALLS} calls are slow and say nothing about what a call costs later"
        )
    timed_us, first_us = np.array(seconds[warmup:]) * 1e6, np.array(seconds[:n]) * 1e6
    for key, q in (("p50_us", 50), ("p90_us", 90)):
        stat = lambda us: np.percentile(us, q)  # noqa: E731
        value, truth = result[key], stat(timed_us)
        # every usual definition (np.percentile's, nearest rank, statistics.quantiles') lies between these ranks
        ranked = np.sort(timed_us)
        low = ranked[math.floor(q / 100 * (n - 1))]
        high = ranked[min(n - 1, math.ceil(q / 100 * (n + 1) - 1))]
        trimmed = [stat(ranked[: n - k]) for k in range(1, math.ceil(n / 5) + 1)]
        if isinstance(value, bool) or not isinstance(value, Real):
            raise Wrong(
                f"expected {key!r} to be a number of microseconds, got {type(value).__name__}"
            )
        for unit, factor in (("milliseconds", 1e3), ("seconds", 1e6)):
            if _close(value * factor, truth):
                raise Wrong(f"{key!r}: got {value:.4g}, which is in {unit}; expected microseconds")
        if not (
            _close(value, truth) or low - 0.15 * low - 300 <= value <= high + 0.15 * high + 300
        ):
            # each known mistake's value on these calls; the hint names the one the answer matches best
            # (on a loaded machine two of them can both lie within a few per cent of the answer)
            mistakes = []
            if warmup and not _close(stat(first_us), truth):
                mistakes.append(
                    (
                        stat(first_us),
                        f" (it matches the first {n} calls, the slow first ones included: the timed calls "
                        "come after the warm-up)",
                    )
                )
            if key == "p50_us":
                mistakes.append(
                    (
                        timed_us.mean(),
                        " (that is the mean: one slow call in four pulls it up, the median stays put)",
                    )
                )
            if key == "p90_us":
                mistakes.append(
                    (
                        timed_us.max(),
                        " (that is the slowest call: 90 % of the calls take at most the 90th percentile)",
                    )
                )
                mistakes.append(
                    (timed_us.min(), " (about the fastest call: np.percentile takes 90, not 0.9)")
                )
                mistakes += [
                    (
                        t,
                        " (it matches the 90th percentile of your timed calls with the slowest left out: "
                        "take it over every timed call, the slow ones are what it measures)",
                    )
                    for t in trimmed
                    if not _close(t, truth)
                ]
            # a hint only for a close match
            matches = sorted(
                (abs(value - x) / x, said)
                for x, said in mistakes
                if abs(value - x) <= 0.03 * x + 100
            )
            hint = (
                matches[0][1]
                if matches
                else f" (you read time.time() {len(wall_clock_reads)} times: it ticks every 15.6 ms on some "
                "systems, as here; the task times with time.perf_counter())"
                if len(wall_clock_reads) >= n
                else ""
            )
            raise Wrong(
                f"on {kind}, {key!r}: too {'high' if value > truth else 'low'}, by more than 15 % for the "
                f"{n} calls after the warm-up{hint}"
            )
    return f"{kind}: {warmup} warm-up calls, then {n} timed: your median and p90 match the calls you timed"


# ---------------------------------------------------------------------------------------------- 06.2
def _reference_macs(
    path, op_types=("Conv", "Gemm", "MatMul"), per_position=True, padded=True, strided=True
) -> int:
    """Multiply-adds for one image, layer by layer (``per_position``, ``padded``, ``strided``: the slips)."""
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
            pads = attrs.get("pads", [0, 0, 0, 0]) if padded else [0, 0, 0, 0]
            strides = attrs.get("strides", [1, 1]) if strided else [1, 1]
            height = (height + pads[0] + pads[2] - kh) // strides[0] + 1
            width = (width + pads[1] + pads[3] - kw) // strides[1] + 1
            positions = (height * width if per_position else 1) if node.op_type in op_types else 0
            macs += out_channels * in_per_group * kh * kw * positions
        elif node.op_type in op_types and node.input[1] in weights:
            macs += weights[node.input[1]].size  # one multiply-add per weight per image
    return int(macs)


def random_cnn(path: Path, rng, head: str = "Gemm") -> Path:
    """A CNN with layer sizes drawn by ``rng`` (28x28 in, 10 scores out, random weights), checked by onnx."""
    import onnx

    k1, c1, c2 = int(rng.choice([3, 5, 7])), int(rng.integers(3, 9)), int(rng.integers(4, 12))
    pad1, stride2 = int(rng.choice([0, k1 // 2])), int(rng.choice([2, 3]))
    side = (28 + 2 * pad1 - k1) + 1
    side = (side + 2 - 3) // stride2 + 1
    flat = c2 * side * side
    weights = {
        "w1": rng.normal(0, 0.3, (c1, 1, k1, k1)),
        "b1": rng.normal(0, 0.1, c1),
        "w2": rng.normal(0, 0.3, (c2, c1, 3, 3)),
        "b2": rng.normal(0, 0.1, c2),
        "flat": [-1, flat],
        "w3": rng.normal(0, 0.1, (10, flat) if head == "Gemm" else (flat, 10)),
        "b3": np.zeros(10),
    }
    nodes = cnn_nodes(k1, pad1, stride2) + dense(head, "w3", "b3")
    onnx.save(checked_model(f"check_cnn_{k1}_{c1}_{c2}", nodes, weights, "scores", 10), path)
    return path


def _macs_hint(got: int, path) -> str:
    """What differs between ``got`` and the right count, keyed to a count the check can reproduce."""
    want = _reference_macs(path)
    dense, convs = _reference_macs(path, ("Gemm", "MatMul")), _reference_macs(path, ("Conv",))
    by_layer = {op: _reference_macs(path, (op,)) for op in ("Gemm", "MatMul")}
    if got == _reference_macs(path, per_position=False):
        return " (that is the number of weights: a convolution applies each weight at every output position)"
    if got == 2 * want:
        return " (that is twice the multiply-adds: FLOPs count a multiply and an add; the task counts multiply-adds)"
    if got == dense:
        return " (the Conv layers add nothing to your count)"
    for op, n in by_layer.items():
        if n and got == want - n:
            return f" (the {op} layer adds nothing to your count)"
    if got == convs:
        return " (your count is the Conv layers' alone)"
    for changed, what in (({"padded": False}, "padding"), ({"strided": False}, "strides")):
        if _reference_macs(path, **changed) != want and got == _reference_macs(path, **changed):
            return (
                f" (it is the count with the Conv layers' {what} left out: the output positions depend on the "
                f"{what})"
            )
    if convs and got > dense and (got - dense) % convs == 0:
        return f" (your Conv layers count {(got - dense) // convs} times their multiply-adds for one image)"
    return ""


def check_macs(answer):
    require_callable(answer, "macs_per_image(path) -> number of multiply-adds")
    rng, details = _common.rng(1), []
    with tempfile.TemporaryDirectory() as tmp:
        name = lambda: f"{rng.integers(10**6):06d}.onnx"  # noqa: E731 - a new file name every check
        cases = [
            ("the series' MLP", built_artifact("mnist_mlp_pytorch.onnx")),
            ("the series' CNN", built_artifact("mnist_cnn_pytorch.onnx")),
            (
                "a CNN of the check's own (Conv, Conv, Gemm)",
                random_cnn(Path(tmp) / name(), rng, "Gemm"),
            ),
            (
                "a CNN of the check's own (Conv, Conv, MatMul + Add)",
                random_cnn(Path(tmp) / name(), rng, "MatMul"),
            ),
        ]
        for what, path in cases:
            try:
                got = answer(str(path))
            except Exception as err:  # whatever the learner's function raises is reported
                raise Wrong(
                    f"expected macs_per_image(path) to run on {what}; it raised "
                    f"{type(err).__name__}: {err}"
                ) from err
            if (
                isinstance(got, bool)
                or not isinstance(got, Real)
                or not math.isfinite(got)
                or float(got) != int(got)
            ):
                raise Wrong(f"expected a whole number of multiply-adds for {what}, got {got!r}")
            want = _reference_macs(path)
            if int(got) != want:
                right = "; ".join(f"{w}: right" for w in details)
                raise Wrong(
                    f"{what}: your count is too {'high' if got > want else 'low'}"
                    + (", by more than 10 %" if abs(got - want) > 0.1 * want else "")
                    + _macs_hint(int(got), path)
                    + (f" ({right})" if right else "")
                )
            details.append(what)
    return [f"{what}: right" for what in details]


# exercise id -> checker (helpers.grading.exercises.check looks answers up here)
CHECKS = {
    "06.1": check_fair_time,
    "06.2": check_macs,
}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)


def fair_time(fn, warmup: int = 5, calls: int = 30) -> dict:
    """Warm up (not timed), then time ``calls`` calls; median and 90th percentile in microseconds."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    us = np.array(samples) * 1e6
    return {
        "p50_us": float(np.median(us)),
        "p90_us": float(np.percentile(us, 90)),
        "n": len(samples),
    }


def macs_per_image(path) -> int:
    """Multiply-adds of every Conv, Gemm and MatMul node for one image, from ONNX shape inference."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    batch = model.graph.input[0].type.tensor_type.shape.dim[0]
    batch.dim_value = 1  # one image: a fixed batch of 1
    model = onnx.shape_inference.infer_shapes(model)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*model.graph.value_info, *model.graph.output]
    }
    weights = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type == "Conv":  # each output value: in_channels/groups x kh x kw products
            total += int(np.prod(shapes[node.output[0]])) * int(np.prod(weights[node.input[1]][1:]))
        elif node.op_type in ("Gemm", "MatMul") and node.input[1] in weights:
            total += int(np.prod(weights[node.input[1]]))  # batch 1: one product per weight
    return total


def solve_1(workdir: Path):
    return fair_time


def solve_2(workdir: Path):
    return macs_per_image
