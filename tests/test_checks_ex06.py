"""The checks of notebook 06's exercises accept other right answers, name each mistake, never state the true numbers."""

from __future__ import annotations

import math
import re
import statistics
import time
import timeit

import numpy as np
import pytest
from tables import accepted, refused, right, rows

from helpers.grading.checks.ex06 import fair_time, macs_per_image


# ---------------------------------------------------------------------------------------------- 06.1
def stopwatch(
    warmup=5,
    statistic=np.median,
    scale=1e6,
    q=90,
    clock=time.perf_counter,
    calls=30,
    n=None,
    warm_after=False,
    kept=None,
):
    """The worked loop with one change: warm-up, statistic, unit, percentile, clock, calls, 'n', warm-up last,
    or only the ``kept(calls)`` fastest calls kept for the statistics."""

    def fair_time_variant(fn):
        for _ in range(0 if warm_after else warmup):
            fn()
        samples = []
        for _ in range(calls):
            start = clock()
            fn()
            samples.append(clock() - start)
        for _ in range(warmup if warm_after else 0):
            fn()
        values = np.array(samples) * scale
        if kept is not None:
            values = np.sort(values)[: kept(len(values))]
        return {
            "p50_us": float(statistic(values)),
            "p90_us": float(np.percentile(values, q)),
            "n": len(samples) if n is None else n(len(samples)),
        }

    return fair_time_variant


def with_timeit(fn):
    """Right, written differently: timeit.repeat (perf_counter inside), statistics.quantiles."""
    times = timeit.repeat(fn, number=1, repeat=40)[4:]
    us = [t * 1e6 for t in times]
    return {
        "p50_us": statistics.median(us),
        "p90_us": statistics.quantiles(us, n=10, method="inclusive")[-1],
        "n": len(us),
    }


def with_ns_clock(fn):
    """Right: perf_counter_ns, a time budget instead of a call count."""
    for _ in range(4):
        fn()
    ns, start = [], time.perf_counter_ns()
    while len(ns) < 20 or time.perf_counter_ns() - start < 0.2e9:
        t0 = time.perf_counter_ns()
        fn()
        ns.append(time.perf_counter_ns() - t0)
    return {"p50_us": np.median(ns) / 1e3, "p90_us": np.quantile(ns, 0.9) / 1e3, "n": len(ns)}


def notebook_loop(fn):
    """Right: notebook 06's own section-1 loop (5 warm-up calls, at least 10 calls within a time budget)."""
    for _ in range(5):  # warm-up, not timed
        fn()
    times_us = []
    start = time.perf_counter()
    while len(times_us) < 10 or time.perf_counter() - start < 0.4:
        t0 = time.perf_counter()
        fn()
        times_us.append((time.perf_counter() - t0) * 1e6)
    return {
        "p50_us": np.median(times_us),
        "p90_us": np.percentile(times_us, 90),
        "n": len(times_us),
    }


def sorted_index_percentile(fn):
    """Right: exactly 3 warm-up calls and 10 timed ones (the task's minimums), p90 by nearest rank."""
    for _ in range(3):
        fn()
    us = []
    for _ in range(10):
        t0 = time.perf_counter()
        fn()
        us.append((time.perf_counter() - t0) * 1e6)
    us.sort()
    return {
        "p50_us": float(np.percentile(us, 50)),
        "p90_us": us[math.ceil(0.9 * len(us)) - 1],
        "n": np.int64(len(us)),
    }


def exclusive_quantiles(fn):
    """Right: 3 warm-up calls, 12 timed ones, statistics.quantiles' default (exclusive) method."""
    for _ in range(3):
        fn()
    us = []
    for _ in range(12):
        t0 = time.perf_counter()
        fn()
        us.append((time.perf_counter() - t0) * 1e6)
    deciles = statistics.quantiles(us, n=10)
    return {"p50_us": statistics.median(us), "p90_us": deciles[-1], "n": 12}


def with_helpers(fn):
    from helpers.measure.timing import measure

    return measure(fn, repeat=30, warmup=5)


def hard_coded(fn):
    """Warms up and calls fn, then returns numbers measured once on the stand-in model, not on these calls."""
    for _ in range(35):
        fn()
    return {"p50_us": 2300.0, "p90_us": 11000.0, "n": 30}


REQUIREMENTS_06_1 = [
    (
        "a function fair_time(fn)",
        {"p50_us": 1.0, "p90_us": 2.0, "n": 30},
        "expected your function fair_time(fn)",
    ),
    (
        "fn takes no arguments",
        lambda fn: [fn(np.zeros(3)) for _ in range(40)],
        "fn takes no arguments",
    ),
    ("without helpers", with_helpers, "without helpers"),
    ("at least 3 warm-up calls, not timed", stopwatch(warmup=1), "so 1 warm-up call"),
    (
        "the timed calls come after the warm-up",
        stopwatch(warm_after=True),
        "the timed calls come after the warm-up",
    ),
    ("at least 10 timed calls", stopwatch(calls=6), "at least 10 timed calls"),
    ("with time.perf_counter()", stopwatch(clock=lambda: time.time()), "time.perf_counter()"),
    ("returns p50_us, p90_us and n", lambda fn: {"p50_us": 1.0, "p90_us": 2.0}, "missing ['n']"),
    ("n is the number of timed calls", stopwatch(n=lambda k: k + 5), "'n' says 35 were timed"),
    ("n is an integer", stopwatch(n=float), "to be an integer"),
    ("p50 is the median", stopwatch(statistic=np.mean), "that is the mean"),
    ("p90 is the 90th percentile", stopwatch(q=100), "that is the slowest call"),
    (
        "... of every timed call, the slowest tenth too",
        stopwatch(kept=lambda k: k - k // 10),
        "with the slowest left out",
    ),
    ("microseconds", stopwatch(scale=1e3), "in milliseconds; expected microseconds"),
    ("measured on fn's calls, not numbers known in advance", hard_coded, "by more than 15 %"),
]


OTHER_MISTAKES_06_1 = [  # (wrong answer, what the feedback says)
    (stopwatch(warmup=0), "so 0 warm-up call"),
    (stopwatch(q=0.9), "np.percentile takes 90, not 0.9"),
    (lambda fn: 1 / 0, "it raised ZeroDivisionError"),
    (
        stopwatch(clock=time.process_time),
        "too low, by more than 15 % for the 30 calls after the warm-up",
    ),  # CPU time
    (stopwatch(scale=1), "which is in seconds"),
    (
        lambda fn: [fn() for _ in range(40)] and {"p50_us": "2 ms", "p90_us": 1.0, "n": 30},
        "a number of microseconds",
    ),
]


def test_fair_time_the_two_models_cannot_share_one_answer():
    from helpers.grading.checks.ex06 import MODELS, _close

    quick, slower = (1e3 * np.array(MODELS[k]["fast"]) for k in ("a quick model", "a slower model"))
    assert not any(
        _close(value, truth)
        for value in np.linspace(*quick, 50)
        for truth in np.linspace(*slower, 50)
    )


def test_fair_time_feedback_never_states_the_true_numbers():
    feedback = refused("06.1", stopwatch(statistic=np.mean), "too high, by more than 15 %")
    assert set(re.findall(r"\d+", feedback.message)) <= {"50", "15", "30"}, (
        feedback.message
    )  # p50, 15 %, 30 calls


# ---------------------------------------------------------------------------------------------- 06.2
def macs_from_weights_and_shapes(path):
    """Right, written differently: onnxruntime's own shapes (intermediate outputs added), not shape inference."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(path)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    model.graph.output.extend(onnx.ValueInfoProto(name=n.output[0]) for n in convs)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = session.run(
        [n.output[0] for n in convs],
        {session.get_inputs()[0].name: np.zeros((1, 1, 28, 28), np.float32)},
    )
    total = sum(o.size * weights[n.input[1]][0].size for n, o in zip(convs, outputs))
    return total + sum(
        weights[n.input[1]].size
        for n in model.graph.node
        if n.op_type in ("Gemm", "MatMul") and n.input[1] in weights
    )


def macs_by_formula(
    path,
    positions=lambda size, k, pads, strides: (size + pads[:2] + pads[2:] - k) // strides + 1,
    ops=("Conv", "Gemm", "MatMul"),
    per_weight=True,
    batch=1,
    bias=False,
):
    """Right: output positions from the convolution formula, in numpy; the keyword arguments make mistakes below."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    w = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    size, total = np.array([28, 28]), 0
    for node in model.graph.node:
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        if node.op_type == "Conv":
            k, pads = np.array(w[node.input[1]][2:]), np.array(a.get("pads", [0] * 4))
            size = positions(size, k, pads, np.array(a.get("strides", [1, 1])))
            if "Conv" in ops:
                at = int(np.prod(size)) * batch if per_weight else 1
                total += at * int(np.prod(w[node.input[1]])) + (
                    at * w[node.input[1]][0] if bias else 0
                )
        elif node.op_type in ops and node.input[1] in w:
            total += int(np.prod(w[node.input[1]]))
    return total


def notebook_hint_with_dim_param(path, fix_batch=True):
    """Right: the task's hint as written (batch fixed to 1, infer_shapes), weights' shapes from the initializers."""
    import onnx

    model = onnx.load(path)
    if fix_batch:  # left symbolic, the batch dimension is 0 in every inferred shape
        dim = model.graph.input[0].type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_value = 1
    inferred = onnx.shape_inference.infer_shapes(model)
    shape = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in list(inferred.graph.value_info) + list(inferred.graph.output)
    }
    dims = {t.name: list(t.dims) for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if (
            node.op_type == "Conv"
        ):  # [batch, channels, height, width] times the weights of one output value
            total += int(np.prod(shape[node.output[0]])) * int(np.prod(dims[node.input[1]][1:]))
        elif node.op_type in {"Gemm", "MatMul"}:
            total += int(np.prod(dims.get(node.input[1], [0])))
    return total


@pytest.mark.parametrize(
    "exercise, answer",
    [
        *right(
            "06.1",
            fair_time,
            with_timeit,
            with_ns_clock,
            notebook_loop,
            sorted_index_percentile,
            exclusive_quantiles,
        ),
        *right(
            "06.2",
            macs_per_image,
            macs_from_weights_and_shapes,
            macs_by_formula,
            notebook_hint_with_dim_param,
        ),
    ],
)
def test_right_answers_pass(exercise, answer):
    accepted(exercise, answer)


def series_numbers(path):
    """Hard-coded: the series' files counted, any other file given a by-hand count of another CNN."""
    return (
        macs_per_image(path)
        if "mnist_" in str(path)
        else 24 * 24 * 4 * 25 + 12 * 12 * 6 * 36 + 864 * 10
    )


no_stride = lambda size, k, pads, strides: size + pads[:2] + pads[2:] - k + 1  # noqa: E731
no_padding = lambda size, k, pads, strides: (size - k) // strides + 1  # noqa: E731
REQUIREMENTS_06_2 = [
    ("a function macs_per_image(path)", 12345, "expected your function macs_per_image(path)"),
    ("a whole number", lambda path: macs_per_image(path) + 0.5, "expected a whole number"),
    (
        "a Conv applies each weight at every output position",
        lambda p: macs_by_formula(p, per_weight=False),
        "that is the number of weights",
    ),
    (
        "a Conv's output positions follow its stride",
        lambda p: macs_by_formula(p, positions=no_stride),
        "with the Conv layers' strides left out",
    ),
    (
        "... and its padding",
        lambda p: macs_by_formula(p, positions=no_padding),
        "with the Conv layers' padding left out",
    ),
    (
        "every Conv counted",
        lambda p: macs_by_formula(p, ops=("Gemm", "MatMul")),
        "the Conv layers add nothing",
    ),
    (
        "every Gemm counted",
        lambda p: macs_by_formula(p, ops=("Conv", "MatMul")),
        "the Gemm layer adds nothing",
    ),
    (
        "every MatMul counted",
        lambda p: macs_by_formula(p, ops=("Conv", "Gemm")),
        "the MatMul layer adds nothing",
    ),
    (
        "multiply-adds, not FLOPs",
        lambda path: 2 * macs_per_image(path),
        "FLOPs count a multiply and an add",
    ),
    (
        "for one image",
        lambda p: macs_by_formula(p, batch=256),
        "count 256 times their multiply-adds for one image",
    ),
    (
        "of the .onnx file at path",
        series_numbers,
        "a CNN of the check's own (Conv, Conv, Gemm): your count is",
    ),
]


def input_positions(path):
    """A convolution counted at every *input* position (stride and padding ignored)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    size, total = 28, 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            total += weights[node.input[1]].size * size * size
            size = size // 2
        elif node.op_type in ("Gemm", "MatMul"):
            total += weights[node.input[1]].size
    return total


OTHER_MISTAKES_06_2 = [  # (wrong answer, what the feedback says)
    (
        input_positions,
        "the series' CNN: your count is too high, by more than 10 % (your Conv layers count 4 times",
    ),
    (lambda p: notebook_hint_with_dim_param(p, fix_batch=False), "the Conv layers add nothing"),
    (
        lambda p: macs_by_formula(p, bias=True),
        "the series' CNN: your count is too high",
    ),  # bias adds counted
    (lambda path: 1.5, "expected a whole number"),
    (lambda path: float("nan"), "expected a whole number"),
]


@pytest.mark.parametrize(
    "exercise, answer, message",
    [
        *rows("06.1 requirement", REQUIREMENTS_06_1, "06.1"),
        *rows(
            "06.1 mistake",
            OTHER_MISTAKES_06_1,
            "06.1",
            ids=["no warm-up", "q=0.9", "raises", "process_time", "seconds", "p50 a string"],
        ),
        *rows("06.2 requirement", REQUIREMENTS_06_2, "06.2"),
        *rows(
            "06.2 mistake",
            OTHER_MISTAKES_06_2,
            "06.2",
            ids=["input positions", "batch not fixed", "bias counted", "1.5", "nan"],
        ),
    ],
)
def test_each_requirement_broken_alone_and_each_other_mistake_is_named(exercise, answer, message):
    refused(exercise, answer, message)


def test_macs_check_models_are_new_each_time_and_pass_check_model(tmp_path):
    from helpers.grading.checks.ex06 import _reference_macs, random_cnn

    counts = set()
    for seed in range(6):  # random_cnn runs onnx.checker.check_model(full_check=True) on each
        path = random_cnn(
            tmp_path / f"{seed}.onnx", np.random.default_rng(seed), "MatMul" if seed % 2 else "Gemm"
        )
        assert _reference_macs(path) == macs_from_weights_and_shapes(
            path
        )  # the check's arithmetic, independently
        counts.add(_reference_macs(path))
    assert len(counts) >= 4, counts


def test_macs_feedback_never_states_the_expected_count():
    from helpers.grading.checks.ex06 import _reference_macs
    from helpers.pipeline.artifacts import built_artifact

    want = _reference_macs(built_artifact("mnist_cnn_pytorch.onnx"))
    assert (
        want == 14 * 14 * 8 * 9 + 7 * 7 * 16 * 72 + 784 * 128 + 1280
    )  # independent of shape inference
    for answer in (
        lambda p: macs_by_formula(p, per_weight=False),
        input_positions,
        lambda p: 2 * macs_per_image(p),
    ):
        message = refused("06.2", answer).message
        assert str(want) not in message and f"{want:,}" not in message, message
