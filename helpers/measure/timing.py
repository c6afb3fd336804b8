"""The one timing loop of the series; timings are reported (medians, p90), never asserted.

``time_calls`` is that loop. ``measure`` (notebooks 03, 04) adds a warm-up and the statistics;
``helpers.measure.side_by_side.time_side_by_side`` (notebooks 05, 06) builds its interleaved rounds on it.
``ONNX_PDF_BENCH_SCALE`` lengthens or shortens every loop. A speed depends on the machine, so it is a figure
to print beside the machine's description (``helpers.measure.machine``), never a gate: the same asserts must
pass on any CPU.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np


def bench_scale() -> float:
    """``ONNX_PDF_BENCH_SCALE`` (default 1.0): how much longer or shorter every timing loop runs."""
    return float(os.environ.get("ONNX_PDF_BENCH_SCALE", "1.0"))


def time_calls(fn: Callable[[], object], calls: int = 0, seconds: float = 0.0) -> list[float]:
    """Microseconds of each call of ``fn()``: at least ``calls`` calls, and for at least ``seconds`` seconds."""
    samples, start = [], time.perf_counter()
    while len(samples) < calls or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


def measure(
    fn: Callable[[], object],
    repeat: int | None = None,
    warmup: int = 3,
    min_time_s: float | None = None,
) -> dict:
    """After ``warmup`` calls, ``repeat`` timed calls (else ``min_time_s``, default 1 s, and at least 10), scaled."""
    for _ in range(warmup):
        fn()
    if repeat is not None:
        us = np.asarray(time_calls(fn, calls=max(3, int(repeat * bench_scale()))))
    else:
        us = np.asarray(
            time_calls(
                fn, calls=10, seconds=(1.0 if min_time_s is None else min_time_s) * bench_scale()
            )
        )
    return {
        "p50_us": float(np.median(us)),
        "p90_us": float(np.percentile(us, 90)),
        "mean_us": float(us.mean()),
        "n": int(len(us)),
    }
