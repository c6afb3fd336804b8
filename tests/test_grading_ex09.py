"""Notebook 09's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts."""

from __future__ import annotations

from helpers.grading.checks.ex09 import random_mlp_bytes, unseen_batches


def test_top2_model_and_digits_change_between_checks():
    """09.1's model and shards are new with each seed, a one-row batch and a multi-chunk one among them: no
    answer can see this, as every right answer passes whatever the seed draws (hence a test, not data)."""
    assert random_mlp_bytes(1) != random_mlp_bytes(2)
    first, second = unseen_batches(1), unseen_batches(2)
    assert first[0]["id"].to_pylist() != second[0]["id"].to_pylist()
    assert [b.num_rows for b in first] == [433, 1, 266, 50]
    assert first[3]["pixels"].num_chunks > 1
