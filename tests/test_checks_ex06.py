"""The checks of notebook 06's exercises accept other right answers and name realistic mistakes."""
from __future__ import annotations

import re
import statistics
import time
import timeit

import numpy as np
import pytest

from helpers.exercises import check
from solutions.ex06 import fair_time, macs_per_image


def stopwatch(warmup=5, statistic=np.median, scale=1e6, q=90, clock=time.perf_counter):
    def fair_time_variant(fn):
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(30):
            start = clock()
            fn()
            samples.append(clock() - start)
        values = np.array(samples) * scale
        return {"p50_us": float(statistic(values)), "p90_us": float(np.percentile(values, q)), "n": len(samples)}
    return fair_time_variant


def with_timeit(fn):
    """Right, written differently: timeit.repeat (perf_counter inside), statistics.quantiles."""
    times = timeit.repeat(fn, number=1, repeat=40)[4:]
    us = [t * 1e6 for t in times]
    return {"p50_us": statistics.median(us), "p90_us": statistics.quantiles(us, n=10, method="inclusive")[-1],
            "n": len(us)}


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


@pytest.mark.parametrize("answer", [fair_time, with_timeit, with_ns_clock])
def test_fair_time_right_answers_pass(answer):
    feedback = check("06.1", answer)
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("answer, message", [
    (stopwatch(warmup=0), "only 0 warm-up call"),
    (stopwatch(warmup=1), "only 1 warm-up call"),
    (stopwatch(statistic=np.mean), "that is the mean"),
    (stopwatch(q=100), "that is the slowest call"),
    (stopwatch(scale=1e3), "in milliseconds; expected microseconds"),
    (stopwatch(q=0.9), "np.percentile takes 90, not 0.9"),
    (stopwatch(clock=lambda: time.time()), "time.perf_counter()"),
    (lambda fn: {"p50_us": 1.0, "p90_us": 2.0}, "missing ['n']"),
    (lambda fn: 1 / 0, "it raised ZeroDivisionError"),
])
def test_fair_time_mistakes_are_named(answer, message):
    feedback = check("06.1", answer)
    assert not feedback.ok and message in feedback.message, feedback.message


def test_fair_time_feedback_never_states_the_true_numbers():
    feedback = check("06.1", stopwatch(statistic=np.mean))
    assert "too high, by more than 15 %" in feedback.message
    assert set(re.findall(r"\d+", feedback.message)) <= {"50", "15", "30"}, feedback.message  # p50, 15 %, 30 calls


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
    outputs = session.run([n.output[0] for n in convs], {session.get_inputs()[0].name: np.zeros((1, 1, 28, 28),
                                                                                                 np.float32)})
    total = sum(o.size * weights[n.input[1]][0].size for n, o in zip(convs, outputs))
    return total + sum(weights[n.input[1]].size for n in model.graph.node
                       if n.op_type in ("Gemm", "MatMul") and n.input[1] in weights)


def macs_by_formula(path):
    """Right: output positions from the convolution formula, with numpy arithmetic."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    w = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    size, total = np.array([28, 28]), 0
    for node in model.graph.node:
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        if node.op_type == "Conv":
            k, pads = np.array(w[node.input[1]][2:]), np.array(a.get("pads", [0] * 4))
            size = (size + pads[:2] + pads[2:] - k) // np.array(a.get("strides", [1, 1])) + 1
            total += int(np.prod(size) * np.prod(w[node.input[1]]))
        elif node.op_type in ("Gemm", "MatMul") and node.input[1] in w:
            total += int(np.prod(w[node.input[1]]))
    return total


@pytest.mark.parametrize("answer", [macs_per_image, macs_from_weights_and_shapes, macs_by_formula])
def test_macs_right_answers_pass(answer):
    feedback = check("06.2", answer)
    assert feedback.ok, str(feedback)


def weights_only(path):
    import onnx

    model = onnx.load(path)
    sizes = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer}
    return sum(sizes[n.input[1]] for n in model.graph.node if n.op_type in ("Conv", "Gemm", "MatMul"))


def dense_only(path):
    import onnx

    model = onnx.load(path)
    sizes = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer}
    return sum(sizes[n.input[1]] for n in model.graph.node if n.op_type in ("Gemm", "MatMul"))


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


@pytest.mark.parametrize("answer, message", [
    (weights_only, "that is the number of weights"),
    (dense_only, "the Conv layers are missing"),
    (lambda path: 2 * macs_per_image(path), "FLOPs count a multiply and an add"),
    (input_positions, "the series' CNN: your count is too high, by more than 10 % (the series' MLP: right)"),
    (lambda path: 1.5, "expected a whole number"),
])
def test_macs_mistakes_are_named(answer, message):
    feedback = check("06.2", answer)
    assert not feedback.ok and message in feedback.message, feedback.message


def test_macs_feedback_never_states_the_expected_count():
    from helpers.checks.ex06 import _reference_macs
    from helpers.notebooks import require_artifact

    want = _reference_macs(require_artifact("mnist_cnn_pytorch.onnx"))
    assert want == 14 * 14 * 8 * 9 + 7 * 7 * 16 * 72 + 784 * 128 + 1280  # independent of shape inference
    for answer in (weights_only, input_positions, lambda path: 2 * macs_per_image(path)):
        message = check("06.2", answer).message
        assert str(want) not in message and f"{want:,}" not in message, message
