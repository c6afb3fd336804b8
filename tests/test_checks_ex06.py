"""The checks of notebook 06's exercises accept the worked solutions and name realistic mistakes."""
from __future__ import annotations

import time

import numpy as np
import pytest

from helpers.exercises import check
from solutions.ex06 import fair_time, macs_per_image


def stopwatch(warmup=5, statistic=np.median, scale=1e6, q=90):
    def fair_time_variant(fn):
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(30):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        values = np.array(samples) * scale
        return {"p50_us": float(statistic(values)), "p90_us": float(np.percentile(values, q)), "n": len(samples)}
    return fair_time_variant


@pytest.mark.parametrize("answer, message", [
    (stopwatch(warmup=0), "only 0 warm-up call"),
    (stopwatch(warmup=1), "only 1 warm-up call"),
    (stopwatch(statistic=np.mean), "that is the mean"),
    (stopwatch(scale=1e3), "in milliseconds; expected microseconds"),
    (stopwatch(q=0.9), "np.percentile takes 90, not 0.9"),
    (lambda fn: {"p50_us": 1.0, "p90_us": 2.0}, "missing ['n']"),
    (lambda fn: 1 / 0, "it raised ZeroDivisionError"),
])
def test_fair_time_mistakes_are_named(answer, message):
    feedback = check("06.1", answer)
    assert not feedback.ok and message in feedback.message, feedback.message


def test_fair_time_solution_passes():
    assert check("06.1", fair_time).ok


def weights_only(path):
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    sizes = {t.name: numpy_helper.to_array(t).size for t in model.graph.initializer}
    return sum(sizes[n.input[1]] for n in model.graph.node if n.op_type in ("Conv", "Gemm", "MatMul"))


def dense_only(path):
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    sizes = {t.name: numpy_helper.to_array(t).size for t in model.graph.initializer}
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
    (input_positions, "count output positions"),
    (lambda path: 1.5, "expected a whole number"),
])
def test_macs_mistakes_are_named(answer, message):
    feedback = check("06.2", answer)
    assert not feedback.ok and message in feedback.message, feedback.message


def test_macs_solution_passes_and_reference_is_independent():
    from helpers.checks.ex06 import _reference_macs
    from helpers.notebooks import require_artifact

    assert check("06.2", macs_per_image).ok
    assert _reference_macs(require_artifact("mnist_cnn_pytorch.onnx")) == 14 * 14 * 8 * 9 + 7 * 7 * 16 * 72 + 784 * 128 + 1280
