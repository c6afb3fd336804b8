"""Notebook 08's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts."""

from __future__ import annotations

import json

from helpers.grading.checks import ex08
from helpers.grading.examiner import checking
from helpers.grading.exercises import check


def _drawn(exercise, seed):
    with checking(seed) as rng:
        cases = exercise.cases(rng)
        return [(c.name, json.dumps(c.data, default=str)[:300]) for c in cases]


def test_cases_change_between_checks():
    """08.1's answers, sentences and prompts and 08.2's depths, steps and durations are new with each seed: no
    answer can see this, as every right answer passes whatever the seed draws (hence a test, not data)."""
    for exercise in ex08.EXERCISES:
        assert _drawn(exercise, 1) == _drawn(exercise, 1)
        assert _drawn(exercise, 1) != _drawn(exercise, 2)


def test_each_profile_run_shows_one_aspect_alone():
    """08.2's runs as its judges read them, whatever the seed: fences only in the first; under 11 layers but in
    the second (the only run where layers.1/ could match layers.10/); the steps of the third, 3 or more (a median
    is not their mean) and another number than the second's (a divisor fixed to one run's steps shows)."""
    for seed in range(30):
        with checking(seed) as rng:
            fences, slash, mean = ex08.profile_cases(rng)
            files = [case.args[0] for case in (fences, slash, mean)]
            depths = [len(ex08.time_per_layer(f)) for f in files]
            assert depths[0] <= 10 < 12 <= depths[1] and depths[2] <= 10
            assert len(files[2]) >= 3 and len(files[2]) != len(files[1])
            fence_us = [
                sum(e["dur"] for e in ex08._events(f) if "fence" in e["name"]) for f in files
            ]
            assert fence_us[0] > 0 and fence_us[1] == fence_us[2] == 0


def test_an_answer_cut_by_max_length_is_named():
    """A schema that lets an answer run until max_length: its requirement's words (no schema passing the
    probes makes SmolLM2 do it, hence the judge on such an outcome, not a known mistake)."""
    case = next(c for c in _cases(7) if c.data["kind"] == "sentence")
    cut = ex08.Generated('{"name":"' + "a" * 300, ex08.MAX_NEW)
    assert "ran until max_length" in ex08._answers(case, cut, None)


def _cases(seed):
    with checking(seed) as rng:
        return ex08.person_cases(rng)


def test_a_schema_as_json_text_is_told_to_pass_the_dict():
    feedback = check("08.1", json.dumps(ex08.bounded_person_schema()))
    assert feedback.message == "expected your JSON schema as a dict, got str", feedback.message


def test_a_function_that_raises_is_told_its_error():
    feedback = check("08.2", lambda files: 1 / 0)
    assert "raised ZeroDivisionError" in feedback.message, feedback.message
