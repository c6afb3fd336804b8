"""Every exercise written as data, through the one examiner: its reference and each right alternative pass, each
known mistake is refused naming the requirement it breaks and with its words, every stated requirement is broken
alone by some known mistake, feedback never shows the expected answer, and a wrong kind of answer is told what
was expected. A new exercise needs no new test: its module's data is the table."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.grading.examiner import Exercise, expected_outcomes, numbers_in
from helpers.grading.exercises import check, registry

# two fixed seeds: a row's cases are the same each run, and no answer fits one seed's cases by chance
SEEDS = (20_261, 7)
EXERCISES = sorted((e for e in registry().values() if isinstance(e, Exercise)), key=lambda e: e.id)


def _marks(exercise: Exercise) -> list:
    return [getattr(pytest.mark, name) for name in exercise.marks]


def _params(rows) -> list:
    return [
        pytest.param(
            exercise, item, seed, id=f"{exercise.id}: {name} (seed {seed})", marks=_marks(exercise)
        )
        for exercise, name, item in rows
        for seed in SEEDS
    ]


def _name(answer) -> str:
    return getattr(answer, "__name__", type(answer).__name__)


REFERENCES = _params((e, "the reference", None) for e in EXERCISES)
ALTERNATIVES = _params((e, _name(a), a) for e in EXERCISES for a in e.alternatives)
MISTAKES = _params((e, m.name, m) for e in EXERCISES for m in e.mistakes)


def _hides(feedback, exercise: Exercise, wanted: list) -> None:
    """No rendering of the expected outcomes appears in the feedback."""
    secret = exercise.secrets or (lambda outcomes: numbers_in(outcomes))
    text = str(feedback)
    for leak in secret(wanted):
        assert leak not in text, f"the feedback shows {leak!r}: {text}"


@pytest.mark.parametrize("exercise, _, seed", REFERENCES)
def test_the_reference_is_right(exercise, _, seed):
    feedback = check(exercise.id, exercise.reference_answer(), seed=seed)
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("exercise, answer, seed", ALTERNATIVES)
def test_each_right_alternative_is_right(exercise, answer, seed):
    feedback = check(exercise.id, answer, seed=seed)
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("exercise, mistake, seed", MISTAKES)
def test_each_mistake_is_refused_naming_its_requirement_in_its_words(exercise, mistake, seed):
    feedback = check(exercise.id, mistake.answer, seed=seed)
    assert not feedback.ok, f"{mistake.name} accepted: {feedback}"
    assert feedback.message == f"{mistake.breaks}: {mistake.words}", str(feedback)
    _hides(feedback, exercise, expected_outcomes(exercise, seed))


@pytest.mark.parametrize("exercise", [pytest.param(e, id=e.id, marks=_marks(e)) for e in EXERCISES])
def test_every_requirement_is_broken_alone_by_a_known_mistake(exercise):
    stated = [r.name for r in exercise.requirements]
    broken = {m.breaks for m in exercise.mistakes}
    assert len(set(stated)) == len(stated), f"{exercise.id} states a requirement twice"
    assert broken <= set(stated), (
        f"{exercise.id}: mistakes break {broken - set(stated)}, not stated"
    )
    assert set(stated) <= broken, f"{exercise.id}: no known mistake breaks {set(stated) - broken}"


@pytest.mark.parametrize("exercise", [pytest.param(e, id=e.id, marks=_marks(e)) for e in EXERCISES])
def test_a_wrong_kind_of_answer_is_told_what_is_expected(exercise):
    feedback = check(exercise.id, None)
    assert not feedback.ok
    assert feedback.message == f"expected {exercise.expects}, got NoneType", feedback.message


@pytest.mark.parametrize("exercise", [pytest.param(e, id=e.id) for e in EXERCISES])
def test_every_exercise_holds_a_right_answer_written_differently(exercise):
    """A check that only knows its reference could refuse every other correct answer unseen."""
    assert exercise.alternatives, f"{exercise.id} has no right alternative to the reference"


def test_the_no_leak_rule_reads_the_numbers_inside_arrays():
    """Expected vectors (10.1's pooled sentences) are arrays: a message printing one of their numbers is caught."""
    wanted = expected_outcomes(registry()["10.1"], SEEDS[0])
    first = next(v for v in np.ravel(wanted[0]) if abs(v) >= 1e-3)
    assert f"{first:.3f}" in numbers_in(wanted) and f"{first:.4f}" in numbers_in(wanted)
