"""Wrong answers a learner writes from the notebooks' text alone, each once accepted because no case held the
input that exposes it, kept as data: the answer's source, the requirement it breaks. Each is refused with exactly
that requirement unmet, in words that show no expected value; the right answers beside them, written from the
same text another way, pass. The cases that refuse them are drawn from each exercise's text at its edges (a
Reshape target's 0, a short first batch, faint edge pixels, an absent optional attribute, a stop text at index 0,
left padding, k at its limit), never from a catalogued mistake."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from helpers.grading.examiner import expected_outcomes, numbers_in
from helpers.grading.exercises import check, exercise

SEED = 20_261


def _row(exercise_id, source, breaks, marks=()):
    """``breaks``: the requirement unmet alone; None for a right answer. The answer is the source's last def."""
    name = source.split("def ", 1)[1].split("(", 1)[0] if "def " in source else "answer"
    return pytest.param(
        exercise_id,
        textwrap.dedent(source),
        breaks,
        id=f"{exercise_id} {name}: " + (f"breaks {breaks}" if breaks else "right"),
        marks=[getattr(pytest.mark, m) for m in marks],
    )


ROWS = [
    _row(
        "10.1",
        """
        def masked_mean(hidden, mask):  # the first mask.sum() positions: padding on the right only
            counts = mask.sum(axis=1)
            mean = np.stack([row[:n].mean(axis=0) for row, n in zip(hidden, counts)])
            return mean / np.linalg.norm(mean, axis=1, keepdims=True)
        """,
        "the mean over the positions where mask is 1",
    ),
    _row(
        "10.1",
        """
        def masked_mean(hidden, mask):  # right, positions picked by the mask wherever they are
            picked = [row[m == 1].mean(axis=0) for row, m in zip(hidden, mask)]
            return np.array([v / np.sqrt(v @ v) for v in picked])
        """,
        None,
    ),
    _row(
        "10.2",
        """
        def nearest(queries, documents, k):  # a partition alone: the k, unordered
            return np.argpartition(-(queries @ documents.T), k - 1, axis=1)[:, :k]
        """,
        "the most similar first",
    ),
    _row(
        "10.2",
        """
        def nearest(queries, documents, k):  # right: the last k of an ascending sort, reversed
            return np.argsort(queries @ documents.T, axis=1)[:, ::-1][:, :k]
        """,
        None,
    ),
]


def _answer(source):
    space = {"np": np}
    exec(source, space)  # the table's own answers, written as a learner would
    return space[source.split("def ", 1)[1].split("(", 1)[0]]


@pytest.mark.parametrize("exercise_id, source, breaks", ROWS)
def test_a_shortcut_is_refused_by_the_requirement_it_breaks(exercise_id, source, breaks):
    feedback = check(exercise_id, _answer(source), seed=SEED)
    if breaks is None:
        assert feedback.ok, str(feedback)
        return
    assert not feedback.ok, f"accepted: {feedback}"
    assert list(feedback.unmet) == [breaks], str(feedback)
    assert feedback.message.startswith(f"{breaks}: "), str(feedback)
    text = str(feedback)
    for leak in numbers_in(expected_outcomes(exercise(exercise_id), SEED)):
        assert leak not in text, f"the feedback shows {leak!r}: {text}"


def test_k_at_its_limit_is_a_case():
    """10.2's k can be every document: ``np.argpartition(-scores, k)`` raises there (kth out of bounds), and an
    answer that raises meets no requirement, so it stays out of the table above."""
    feedback = check(
        "10.2", lambda q, d, k: np.argpartition(-(q @ d.T), k, axis=1)[:, :k], seed=SEED
    )
    assert not feedback.ok and "your answer raised ValueError: kth" in feedback.message
