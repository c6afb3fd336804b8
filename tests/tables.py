"""Plumbing shared by the checkers' requirement tables (tests/test_checks_exNN.py). REQUIREMENTS_NN_K: the text of
NN.K, one requirement per row: a wrong answer breaking that requirement alone, and the words of the feedback that
name it; OWN_ROUND_NN_K: more realistic wrong answers, each refused naming what differs."""
from __future__ import annotations

import pytest

from helpers.grading.exercises import check


def refused(exercise: str, answer, *words: str):
    """The feedback on ``answer``: refused, holding each of ``words``."""
    feedback = check(exercise, answer)
    assert not feedback.ok, f"accepted: {feedback}"
    for text in words:
        assert text in feedback.message, feedback.message
    return feedback


def rows(label: str, table: list, *first, ids: list[str] | None = None) -> list:
    """A table's rows (name, *values) as pytest params (*first, *values), each with the id 'label: name'
    (with ``ids``, the names of rows that have none)."""
    names = ids or [row[0] for row in table]
    values = [row if ids else row[1:] for row in table]
    return [pytest.param(*first, *value, id=f"{label}: {name}") for name, value in zip(names, values)]


def right(exercise: str, *answers) -> list:
    """pytest params (exercise, answer), each with the id 'exercise: the answer's name'."""
    return [pytest.param(exercise, answer, id=f"{exercise}: {getattr(answer, '__name__', answer)}")
            for answer in answers]


def unique(*tables: dict) -> list[str]:
    """The names of the table rows, without the rows of a later table that repeat an earlier row's answer."""
    seen, names = [], []
    for table in tables:
        for name, (answer, _) in table.items():
            if not any(answer is other for other in seen):
                seen.append(answer)
                names.append(name)
    return names
