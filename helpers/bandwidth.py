"""Memory read bandwidth with as many concurrent readers as the engines use threads (notebook 07): each decode
step reads every weight once, so ``bandwidth / bytes per token`` bounds tokens per second. Each reader sums its own
array, far larger than any cache (numpy releases the GIL); the total is all bytes read from the first start to
the last finish. We keep the most any count of readers got (one numpy thread may pull less than two engine
threads)."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def concurrent_read_gb_s(readers: int, mib_per_reader: int = 256, repeat: int = 5) -> list[float]:
    """GB/s (1e9 bytes/s) of ``readers`` threads each summing its own array at the same time, one value per repeat."""
    if readers < 1 or mib_per_reader < 1 or repeat < 1:
        raise ValueError(f"expected readers, mib_per_reader and repeat >= 1, got {readers}, {mib_per_reader}, {repeat}")
    arrays = [np.ones(mib_per_reader * 2**20 // 4, dtype=np.float32) for _ in range(readers)]
    samples = []
    with ThreadPoolExecutor(readers) as pool:
        for i in range(repeat + 1):  # the first round is a warm-up (page faults, thread start)
            barrier = threading.Barrier(readers)

            def read(array):
                barrier.wait()  # all readers start together
                start = time.perf_counter()
                array.sum()
                return start, time.perf_counter()

            spans = list(pool.map(read, arrays))
            seconds = max(end for _, end in spans) - min(start for start, _ in spans)
            if i:
                samples.append(sum(a.nbytes for a in arrays) / seconds / 1e9)
    return samples


def read_bandwidth(threads: int, mib_per_reader: int = 256, repeat: int = 5) -> dict:
    """The most the memory delivered to 1, 2, ... ``threads`` concurrent readers, in GB/s.

    An engine running ``threads`` threads can read at most this fast, whichever number of its threads is reading
    (on a busy machine one reader may get more than two that share the cores). Returns ``{"threads",
    "read_gb_s" (the best sample of any reader count), "readers" (the count that reached it), "by_readers"
    ({count: best GB/s}), "median_by_readers"}``.
    """
    if threads < 1:
        raise ValueError(f"expected threads >= 1, got {threads}")
    samples = {n: concurrent_read_gb_s(n, mib_per_reader, repeat) for n in range(1, threads + 1)}
    best = {n: float(max(s)) for n, s in samples.items()}
    readers = max(best, key=best.get)
    return {"threads": threads, "read_gb_s": best[readers], "readers": readers, "by_readers": best,
            "median_by_readers": {n: float(np.median(s)) for n, s in samples.items()}}


def best_of(*readings: dict) -> dict:
    """Several :func:`read_bandwidth` results (taken before and after a measurement) merged into one: for each
    reader count the best GB/s of any reading. Contention only lowers a reading, so the best one is the closest
    to what the memory can deliver; ``"readings"`` keeps each reading's best, in order."""
    if not readings or len({r["threads"] for r in readings}) != 1:
        raise ValueError(f"expected one or more readings with the same threads, got {[r.get('threads') for r in readings]}")
    by_readers = {n: max(r["by_readers"][n] for r in readings) for n in readings[0]["by_readers"]}
    readers = max(by_readers, key=by_readers.get)
    return {"threads": readings[0]["threads"], "read_gb_s": by_readers[readers], "readers": readers,
            "by_readers": by_readers, "readings": [r["read_gb_s"] for r in readings]}
