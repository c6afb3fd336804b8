"""Notebook 03's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from helpers.grading.checks.ex03 import batch_plan, layout_plan

SEEDS = range(40)


@pytest.mark.slow
def test_the_kernel_never_loads_onnx():
    """03.1's copies are built in another process: a check leaves notebook 03's kernel without ``onnx`` (a side
    effect, not a verdict)."""
    code = (
        "import sys\n"
        "from helpers.grading.checks.ex03 import CLASSIFY\n"
        "from helpers.grading.examiner import run_check\n"
        "assert run_check(CLASSIFY, CLASSIFY.reference, 3).ok\n"
        "assert 'onnx' not in sys.modules, 'the check imported onnx'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_full_last_batch_and_a_short_one_in_every_check():
    """03.3 draws its batch sizes and image counts per seed: in each check one copy with a fixed batch gets a
    multiple of its size (a full last batch: padding it is a mistake) and the other a short last batch (not
    padding it is one); which copy gets which changes between seeds."""
    full = []
    for seed in SEEDS:
        copies, counts = batch_plan(np.random.default_rng(seed))
        sizes = [shape[0] for *_, shape in copies[:2]]
        multiples = [n % size == 0 for n, size in zip(counts[1:3], sizes)]
        assert sorted(multiples) == [False, True], (seed, sizes, counts)
        assert all(n >= 2 * size for n, size in zip(counts[1:3], sizes))
        full.append(multiples.index(True))
    assert set(full) == {0, 1}


def test_names_sizes_and_counts_change_between_seeds():
    """What a learner sees of the copies (names, batch names and sizes, image counts) is drawn per seed."""
    layouts = {repr(layout_plan(np.random.default_rng(seed))) for seed in SEEDS}
    batches = {repr(batch_plan(np.random.default_rng(seed))) for seed in SEEDS}
    assert len(layouts) == len(batches) == len(SEEDS)
