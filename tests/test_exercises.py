"""The exercises and their notebooks agree: each notebook lists two or three under its one "## Exercises"
heading, numbered from 1, each item stating its call ``check("NN.K", ...)``, and the registry holds exactly those;
a check's seed repeats its cases, and each call draws new ones.

That each exercise judges well is tests/test_grading.py's; that each release with the reference pasted in
autogrades to full marks is tests/test_classroom.py's."""

from __future__ import annotations

import hashlib

import pytest

from helpers.grading.exercises import all_exercises, check, check_modules, exercise, listed
from helpers.pipeline.artifacts import notebook_paths

NOTEBOOKS = notebook_paths()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_notebook_lists_its_exercises_from_1_each_stating_its_check(notebook):
    items = listed(notebook)
    number = notebook.name[:2]
    assert 2 <= len(items) <= 3, f"{notebook.name} lists {len(items)} exercises"
    assert list(items) == [f"{number}.{k}" for k in range(1, len(items) + 1)], list(items)
    registered = sorted(e for e in all_exercises() if e.startswith(number + "."))
    assert sorted(items) == registered, (
        f"{notebook.name} lists {sorted(items)}, checks {registered}"
    )
    for exercise_id, text in items.items():
        assert f'check("{exercise_id}", ' in text, f"item {exercise_id} does not state its check"


def test_each_module_holds_its_notebooks_exercises_only():
    for number, module in check_modules().items():
        declared = [e.id for e in module.EXERCISES]
        assert declared and all(e.startswith(number + ".") for e in declared), declared


def test_an_unknown_exercise_lists_the_known_ones():
    with pytest.raises(KeyError, match="known: 00.1"):
        check("99.9", 1)


def _pooled_batches(seed):
    """Fingerprints of the batches check("10.1", ...) hands an answer, and the feedback."""
    reference = exercise("10.1").reference
    seen = []

    def recording_mean(hidden, mask):
        seen.append(hashlib.sha256(hidden.tobytes() + mask.tobytes()).hexdigest()[:12])
        return reference(hidden, mask)

    feedback = check("10.1", recording_mean, seed=seed)
    assert feedback.ok, str(feedback)
    return seen, feedback


def test_a_seed_repeats_its_cases_and_each_call_draws_a_new_one():
    first, feedback = _pooled_batches(seed=123_456)
    again, _ = _pooled_batches(seed=123_456)
    assert first and first == again
    assert 'check("10.1", recording_mean, seed=123456) repeats these cases' in str(feedback)
    unseeded, other = _pooled_batches(seed=None), _pooled_batches(seed=None)
    assert unseeded[1].seed != other[1].seed and unseeded[0] != other[0]
    assert f"seed={unseeded[1].seed})" in str(unseeded[1])
