"""Solutions for notebook 06's exercises (numpy, time and onnx only)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


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
    model.graph.input[0].type.tensor_type.shape.dim[
        0
    ].dim_value = 1  # one image: a fixed batch of 1
    model = onnx.shape_inference.infer_shapes(model)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.value_info
    }
    shapes.update(
        {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.output}
    )
    weights = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type == "Conv":  # each output value: in_channels/groups × kh × kw products
            total += int(np.prod(shapes[node.output[0]])) * int(np.prod(weights[node.input[1]][1:]))
        elif node.op_type in ("Gemm", "MatMul") and node.input[1] in weights:
            total += int(np.prod(weights[node.input[1]]))  # batch 1: one product per weight
    return total


def solve_1(workdir: Path):
    return fair_time


def solve_2(workdir: Path):
    return macs_per_image
