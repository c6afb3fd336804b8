"""Timing loops for the measurements in the series (the machine they ran on: ``helpers.machine``).

Timings are reported (medians, p90, ratios), never asserted: they depend on the machine.
"""
from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np


def bench_scale() -> float:
    """``ONNX_PDF_BENCH_SCALE`` (default 1.0): how much longer (or shorter) every timing loop of the series runs."""
    return float(os.environ.get("ONNX_PDF_BENCH_SCALE", "1.0"))


def measure(fn: Callable[[], object], repeat: int | None = None, warmup: int = 3,
            min_time_s: float | None = None) -> dict:
    """Call ``fn`` ``warmup`` times, then time it; return p50/p90/mean in microseconds.

    ``repeat`` fixed calls, or (default) as many as fit in ``min_time_s`` seconds (at least 10).
    ``ONNX_PDF_BENCH_SCALE`` (default 1.0) scales both, so a test run can be short and a
    learner's run precise.
    """
    scale = bench_scale()
    for _ in range(warmup):
        fn()
    samples = []
    if repeat is not None:
        for _ in range(max(3, int(repeat * scale))):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
    else:
        budget = (min_time_s if min_time_s is not None else 1.0) * scale
        start = time.perf_counter()
        while len(samples) < 10 or time.perf_counter() - start < budget:
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
    us = np.asarray(samples) * 1e6
    return {"p50_us": float(np.median(us)), "p90_us": float(np.percentile(us, 90)),
            "mean_us": float(us.mean()), "n": int(len(us))}
