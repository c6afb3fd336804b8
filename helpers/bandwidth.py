"""Memory read bandwidth with as many concurrent readers as the engines use threads (notebook 07).

An LLM decode step reads every weight once, so ``bandwidth / bytes read per token`` bounds the tokens per
second. The bandwidth must be measured the way the engines read: with ``threads`` readers at once (one numpy
thread alone pulls less than two engine threads do, which made an engine look faster than its "bound").
Each reader sums its own array, far larger than any CPU cache; numpy releases the GIL while it sums, so the
threads really read in parallel. The total is the bytes all readers read over the time from the first start
to the last finish.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def read_bandwidth(threads: int, mib_per_reader: int = 256, repeat: int = 5) -> dict:
    """Read bandwidth in GB/s (1e9 bytes/s) of ``threads`` concurrent readers.

    Returns ``{"threads", "read_gb_s" (best of the repeats: the bound is what the memory can deliver),
    "median_gb_s", "samples_gb_s"}``.
    """
    if threads < 1 or mib_per_reader < 1 or repeat < 1:
        raise ValueError(f"expected threads, mib_per_reader and repeat >= 1, got {threads}, {mib_per_reader}, {repeat}")
    arrays = [np.ones(mib_per_reader * 2**20 // 4, dtype=np.float32) for _ in range(threads)]
    samples = []
    with ThreadPoolExecutor(threads) as pool:
        for i in range(repeat + 1):  # the first round is a warm-up (page faults, thread start)
            barrier = threading.Barrier(threads)

            def read(array):
                barrier.wait()  # all readers start together
                start = time.perf_counter()
                array.sum()
                return start, time.perf_counter()

            spans = list(pool.map(read, arrays))
            seconds = max(end for _, end in spans) - min(start for start, _ in spans)
            if i:
                samples.append(sum(a.nbytes for a in arrays) / seconds / 1e9)
    return {"threads": threads, "read_gb_s": float(max(samples)), "median_gb_s": float(np.median(samples)),
            "samples_gb_s": [float(s) for s in samples]}
