"""Notebook 07's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.grading.checks import ex07


def test_no_feedback_hands_over_the_max_length_formula():
    """07.2's text asks what max_new_tokens makes max_length: no requirement or known mistake, whose words are
    the feedback, answers it (a property of the words, which the generic test compares but does not read)."""
    for exercise in ex07.EXERCISES:
        shown = [r.name for r in exercise.requirements] + [m.words for m in exercise.mistakes]
        assert not any("len(prompt" in words or "prompt plus" in words for words in shown), shown


@pytest.mark.llm
def test_the_questions_come_in_orders_drawn_and_the_cooking_ones_in_both(monkeypatch):
    """07.1's orders and budgets are new with each seed, and the cooking questions come in both orders whatever
    the seed, so that an answer reordering them the same way for every order fails on every seed (no verdict
    shows how the cases were drawn)."""
    monkeypatch.setattr(ex07, "greedy", lambda ids, max_new_tokens, stop=None: (0,))  # no decoding
    drawn = [ex07.rounds(np.random.default_rng(seed)) for seed in range(6)]
    for cases in drawn:
        assert cases[2].data.asked == cases[1].data.asked[::-1] != cases[1].data.asked
    assert len({(c[0].data.asked, c[0].data.max_new) for c in drawn}) > 1
