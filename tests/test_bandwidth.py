"""The bandwidth probe's mechanics (notebooks 07 and 08), without reading any machine's speed: bytes counted,
weight at least twice the last-level cache, each thread count honoured, a wrong engine result refused."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from helpers.measure import bandwidth


def test_last_level_cache_is_the_highest_level_in_bytes(tmp_path):
    for index, (level, size) in enumerate([("1", "32K"), ("2", "1024K"), ("3", "32M")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(level + "\n")
        (folder / "size").write_text(size + "\n")
    assert bandwidth.last_level_cache_bytes(str(tmp_path)) == 32 * 2**20
    assert bandwidth.last_level_cache_bytes(str(tmp_path / "absent")) is None


@pytest.mark.parametrize(
    "llc, least",
    [
        (None, bandwidth.MIN_WEIGHT_BYTES),
        (2**20, bandwidth.MIN_WEIGHT_BYTES),
        (260 * 2**20, 520 * 2**20),
    ],
)
def test_probe_weight_is_at_least_twice_the_cache(llc, least):
    assert bandwidth.probe_bytes(llc) == least
    rows, cols = bandwidth.weight_shape(least)
    assert (
        4 * rows * cols >= least >= 2 * (llc or 0)
        and cols % 64 == 0
        and 4 * rows * (cols - 64) < least
    )


def test_bytes_counted_and_every_thread_count_honoured(monkeypatch):
    """A fake clock advancing 5 ms per call: every reading is then exactly weight bytes / 5 ms."""
    monkeypatch.setattr(bandwidth, "MIN_WEIGHT_BYTES", 2**20)
    # a 3 MiB cache -> 6 MiB weight
    monkeypatch.setattr(bandwidth, "last_level_cache_bytes", lambda: 3 * 2**20)
    ticks = itertools.count()
    # two calls per reading
    monkeypatch.setattr(bandwidth.time, "perf_counter", lambda: next(ticks) * 0.005)
    made = []
    real_session = bandwidth.engine_session

    def recording_session(model_bytes, threads):
        session = real_session(model_bytes, threads)
        made.append((threads, session.get_session_options().intra_op_num_threads))
        return session

    monkeypatch.setattr(bandwidth, "engine_session", recording_session)
    result = bandwidth.read_bandwidth(threads=3, repeat=4)
    assert made == [(1, 1), (2, 2), (3, 3)]
    assert (
        result["weight_bytes"] == 4 * 2048 * 768 >= 2 * 3 * 2**20
        and result["llc_bytes"] == 3 * 2**20
    )
    assert result["by_threads"] == pytest.approx(
        {n: result["weight_bytes"] / 0.005 / 1e9 for n in (1, 2, 3)}
    )
    assert result["read_gb_s"] == max(result["by_threads"].values()) and result["threads"] == 3
    assert result["probe"] == "onnxruntime MatMul [1, 2048] x [2048, 768] fp32"


def test_a_wrong_engine_result_is_refused(monkeypatch):
    monkeypatch.setattr(bandwidth, "MIN_WEIGHT_BYTES", 2**20)
    monkeypatch.setattr(bandwidth, "last_level_cache_bytes", lambda: None)

    broken = SimpleNamespace(run=lambda names, feeds: [np.zeros((1, 3), np.float32)])
    monkeypatch.setattr(bandwidth, "engine_session", lambda model, threads: broken)
    with pytest.raises(RuntimeError, match="wrong result"):
        bandwidth.read_bandwidth(threads=1, repeat=1)


@pytest.mark.parametrize("kwargs", [{"threads": 0}, {"threads": 1, "repeat": 0}])
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError, match="expected threads and repeat"):
        bandwidth.read_bandwidth(**kwargs)
    with pytest.raises(ValueError, match="expected min_bytes"):
        bandwidth.weight_shape(0)


def test_best_of_keeps_the_best_reading_per_thread_count():
    common = {"threads": 2, "weight_bytes": 100, "probe": "p", "llc_bytes": None}
    busy = dict(common, read_gb_s=9.0, best_threads=2, by_threads={1: 6.0, 2: 9.0})
    quiet = dict(common, read_gb_s=25.0, best_threads=1, by_threads={1: 25.0, 2: 24.0})
    merged = bandwidth.best_of(busy, quiet)
    assert merged["by_threads"] == {1: 25.0, 2: 24.0} and merged["read_gb_s"] == 25.0
    assert merged["best_threads"] == 1 and merged["readings"] == [9.0, 25.0]
    assert bandwidth.best_of(quiet, busy)["read_gb_s"] == 25.0
    with pytest.raises(ValueError, match="same threads"):
        bandwidth.best_of(busy, dict(quiet, threads=1))
    with pytest.raises(ValueError, match="one or more"):
        bandwidth.best_of()


def test_numpy_sum_probe_reads_something_and_refuses_bad_arguments():
    assert bandwidth.numpy_sum_gb_s(2, mib_per_reader=8, repeat=2) > 0
    with pytest.raises(ValueError, match="expected readers"):
        bandwidth.numpy_sum_gb_s(0)
