"""Memory read bandwidth measured the way the engines read: ONNX Runtime one-row MatMuls (notebooks 07, 08)."""

from __future__ import annotations

import glob
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROWS = 2048  # K: a hidden size of the order of a small LLM's
MIN_WEIGHT_BYTES = 2**28  # 256 MiB at least, whatever the cache


def last_level_cache_bytes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Size of cpu0's highest-level cache in bytes, from ``/sys`` (Linux), else ``None``."""
    sizes = {}
    for index in glob.glob(f"{root}/index*"):
        level, size = (Path(index, name).read_text().strip() for name in ("level", "size"))
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        sizes[int(level)] = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    return sizes[max(sizes)] if sizes else None


def probe_bytes(llc_bytes: int | None) -> int:
    """The probe's least weight size: twice the last-level cache, and ``MIN_WEIGHT_BYTES`` at least."""
    return max(MIN_WEIGHT_BYTES, 2 * (llc_bytes or 0))


def weight_shape(min_bytes: int, rows: int = ROWS) -> tuple[int, int]:
    """``(K, N)`` of an fp32 weight of at least ``min_bytes`` bytes, N a multiple of 64."""
    if min_bytes < 1 or rows < 1:
        raise ValueError(f"expected min_bytes and rows >= 1, got {min_bytes} and {rows}")
    cols = -(-min_bytes // (4 * rows))
    return rows, -(-cols // 64) * 64


def matmul_model(rows: int, cols: int):
    """``y[1, N] = x[1, K] @ W[K, N]``, W an fp32 initializer: one decode step's matrix product."""
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.full((rows, cols), 0.5, dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "one_row_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cols])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def engine_session(model, threads: int):
    """An ONNX Runtime CPU session of ``model`` (bytes or a path), ``threads`` intra-op threads, spinning off."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def read_bandwidth(threads: int, repeat: int = 5) -> dict:
    """The most GB/s ONNX Runtime streamed fp32 weights (> last-level cache) at 1 .. ``threads`` threads, best run."""
    if threads < 1 or repeat < 1:
        raise ValueError(f"expected threads and repeat >= 1, got {threads} and {repeat}")
    llc = last_level_cache_bytes()
    rows, cols = weight_shape(probe_bytes(llc))
    model_bytes = matmul_model(rows, cols).SerializeToString()
    weight_bytes = 4 * rows * cols
    x = np.ones((1, rows), dtype=np.float32)
    best = {}
    for count in range(1, threads + 1):
        session = engine_session(model_bytes, count)
        seconds = []
        # the first run is a warm-up (weights prepacked, threads started)
        for i in range(repeat + 1):
            start = time.perf_counter()
            (y,) = session.run(None, {"x": x})
            if i:
                seconds.append(time.perf_counter() - start)
        if y.shape != (1, cols) or not np.allclose(y[0, :4], 0.5 * rows):
            raise RuntimeError(
                f"the probe's MatMul gave a wrong result: shape {y.shape}, first values {y[0, :4]}"
            )
        best[count] = weight_bytes / min(seconds) / 1e9
        del session
    best_threads = max(best, key=best.get)
    return {
        "probe": f"onnxruntime MatMul [1, {rows}] x [{rows}, {cols}] fp32",
        "threads": threads,
        "weight_bytes": weight_bytes,
        "llc_bytes": llc,
        "read_gb_s": best[best_threads],
        "best_threads": best_threads,
        "by_threads": best,
    }


def best_of(*readings: dict) -> dict:
    """Several :func:`read_bandwidth` results merged: the best GB/s per thread count, each reading kept in order."""
    if not readings or len({(r["threads"], r["weight_bytes"]) for r in readings}) != 1:
        raise ValueError(
            "expected one or more readings with the same threads and weight size, got "
            f"{[(r.get('threads'), r.get('weight_bytes')) for r in readings]}"
        )
    by_threads = {n: max(r["by_threads"][n] for r in readings) for n in readings[0]["by_threads"]}
    best_threads = max(by_threads, key=by_threads.get)
    return dict(
        readings[0],
        read_gb_s=by_threads[best_threads],
        best_threads=best_threads,
        by_threads=by_threads,
        readings=[r["read_gb_s"] for r in readings],
    )


def numpy_sum_gb_s(readers: int, mib_per_reader: int = 256, repeat: int = 5) -> float:
    """The trap: GB/s of ``readers`` threads summing float32 arrays, limited by the additions, not by memory."""
    if readers < 1 or mib_per_reader < 1 or repeat < 1:
        raise ValueError(
            f"expected readers, mib_per_reader and repeat >= 1, got {readers}, {mib_per_reader}, {repeat}"
        )
    arrays = [np.ones(mib_per_reader * 2**20 // 4, dtype=np.float32) for _ in range(readers)]
    samples = []
    with ThreadPoolExecutor(readers) as pool:
        for i in range(repeat + 1):  # the first round is a warm-up
            barrier = threading.Barrier(readers)

            def read(array):
                barrier.wait()  # all readers start together
                start = time.perf_counter()
                array.sum()
                return start, time.perf_counter()

            spans = list(pool.map(read, arrays))
            if i:
                seconds = max(end for _, end in spans) - min(start for start, _ in spans)
                samples.append(sum(a.nbytes for a in arrays) / seconds / 1e9)
    return float(max(samples))
