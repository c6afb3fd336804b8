"""Notebook 06's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts."""

from __future__ import annotations

import time
import timeit

import numpy as np

from helpers.grading.checks import ex06
from helpers.grading.examiner import checking
from helpers.grading.exercises import check


def test_the_clocks_are_the_real_ones_again_after_a_check():
    """06.1 patches the time module's clocks, timeit's default timer and the clocks an answer bound before the
    check (a global, a default argument, a closure): the learner's kernel gets the real ones back, which no
    verdict shows."""
    real = {name: getattr(time, name) for name in ex06.CLOCKS}
    answer = ex06.stopwatch(clock="time")
    cells = [cell.cell_contents for cell in answer.__closure__]
    assert not check("06.1", answer, seed=7).ok
    assert (
        check("06.1", ex06.notebook_loop, seed=7).ok and check("06.1", ex06.nearest_rank, seed=7).ok
    )
    assert {name: getattr(time, name) for name in ex06.CLOCKS} == real
    assert ex06.perf_counter is time.perf_counter and ex06.notebook_loop.__defaults__ == (
        time.perf_counter,
    )
    assert (
        timeit.default_timer is time.perf_counter
        and time.perf_counter in timeit.repeat.__defaults__
    )
    assert [cell.cell_contents for cell in answer.__closure__] == cells


def test_a_loop_that_never_ends_is_stopped():
    """An answer that loops forever (on fn's calls, or on a clock that stands still) is stopped and told so, as an
    answer that raises is told what it raised: outcomes no known mistake gives (the examiner says them)."""

    def forever(fn):
        while True:
            try:
                fn()
            except Exception:  # the stop is not an Exception
                pass

    def on_cpu_time(fn):
        start = time.process_time()
        while time.process_time() - start < 0.4:
            fn()

    for answer in (forever, on_cpu_time):
        feedback = check("06.1", answer, seed=7)
        assert "the check stopped your loop there; does it end?" in feedback.message, (
            feedback.message
        )


def test_the_two_models_cannot_share_one_answer():
    """The quick model's usual calls (ms, 4 % jitter) and the slower one's never come within the p50's tolerance
    (1 % and 1 µs) of each other."""
    quick, slower = (ex06.MODELS[kind]["fast"] for kind in ("a quick model", "a slower model"))
    assert 1.04 * quick[1] * 1.01 + 1e-3 < 0.99 * slower[0]


def test_cases_change_between_seeds():
    """Each seed draws other durations, and other models to count (each passes onnx's full check_model)."""
    with checking(1) as rng:
        first = ex06.timing_cases(rng)
        counts = [ex06.macs_per_image(*case.args) for case in ex06.count_cases(rng)]
    with checking(2) as rng:
        second = ex06.timing_cases(rng)
        other = [ex06.macs_per_image(*case.args) for case in ex06.count_cases(rng)]
    assert not np.array_equal(first[0].data["seconds"], second[0].data["seconds"])
    assert len(set(counts) - set(other)) >= 5, (counts, other)


def test_the_series_cnn_count_by_hand():
    """The reference's count of the series' CNN, worked out by hand: 2 Convs at 14x14 and 7x7, then 2 Gemms."""
    from helpers.pipeline.artifacts import existing_artifact

    count = ex06.macs_per_image(existing_artifact("mnist_cnn_pytorch.onnx"))
    assert count == 14 * 14 * 8 * 9 + 7 * 7 * 16 * 72 + 784 * 128 + 1280
