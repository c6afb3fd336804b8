"""Plumbing shared by the checkers' requirement tables (tests/test_checks_exNN.py): right and refused answers."""

from __future__ import annotations

import pytest

from helpers.grading import exercises

SEED = 20_261  # the tables check with one seed, so a row's cases are the same each run


def check(exercise: str, answer, seed: int = SEED):
    """``helpers.grading.exercises.check`` with the tables' seed unless one is given."""
    return exercises.check(exercise, answer, seed=seed)


def accepted(exercise: str, answer):
    """The feedback on ``answer``: accepted."""
    feedback = check(exercise, answer)
    assert feedback.ok, str(feedback)
    return feedback


def refused(exercise: str, answer, *words: str):
    """The feedback on ``answer``: refused, holding each of ``words``."""
    feedback = check(exercise, answer)
    assert not feedback.ok, f"accepted: {feedback}"
    for text in words:
        assert text in feedback.message, feedback.message
    return feedback


def rows(label: str, table: list, *first, ids: list[str] | None = None) -> list:
    """A table's rows (name, *values) as pytest params (*first, *values), ids 'label: name' (``ids``: nameless rows)."""
    names = ids or [row[0] for row in table]
    values = [row if ids else row[1:] for row in table]
    return [
        pytest.param(*first, *value, id=f"{label}: {name}") for name, value in zip(names, values)
    ]


def right(exercise: str, *answers) -> list:
    """pytest params (exercise, answer), each with the id 'exercise: the answer's name'."""
    return [
        pytest.param(exercise, answer, id=f"{exercise}: {getattr(answer, '__name__', answer)}")
        for answer in answers
    ]
