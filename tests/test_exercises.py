"""Every exercise's check can fail, its text and its checks module agree, and a check's seed repeats its cases.

That every reference answer passes its check is proved once, by nbgrader: tests/test_classroom.py autogrades
each assignment's source version (the reference code, generated from the checks module, in its answer cells)
to full marks."""

from __future__ import annotations

import hashlib
import re

import pytest

from helpers.grading.examiner import Exercise
from helpers.grading.exercises import all_exercises, check, check_modules, reference

EXERCISES = sorted(all_exercises())


def test_every_notebook_has_two_or_three_exercises():
    from helpers.pipeline.artifacts import notebook_paths

    for path in notebook_paths():
        number = path.name[:2]
        count = sum(1 for e in EXERCISES if e.startswith(number + "."))
        assert 2 <= count <= 3, f"notebook {path.name} has {count} checked exercises"


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_a_wrong_answer_is_told_what_is_wrong(exercise_id):
    feedback = check(exercise_id, None)
    assert not feedback.ok
    assert "expected" in feedback.message, feedback.message


def test_the_registry_holds_each_module_s_exercises_under_its_notebook_s_number():
    for number, module in check_modules().items():
        declared = [e.id for e in getattr(module, "EXERCISES", [])] + list(
            getattr(module, "CHECKS", {})
        )
        assert declared and all(e.startswith(number + ".") for e in declared), declared


def test_unknown_exercise_lists_the_known_ones():
    with pytest.raises(KeyError, match="known: 00.1"):
        check("99.9", 1)


def test_exercise_notebook_mentions_its_checks():
    import nbformat

    from helpers.pipeline.artifacts import notebook_paths

    for path in notebook_paths():
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        for exercise_id in (e for e in EXERCISES if e.startswith(path.name[:2] + ".")):
            assert f'check("{exercise_id}"' in text, (
                f'{path.name} does not show check("{exercise_id}", ...)'
            )


def _exercise_items(notebook) -> dict[str, str]:
    """The notebook's "## Exercises" cell: {"NN.K": the text of item K}."""
    import nbformat

    sections = [
        re.split(r"^## Exercises$", c.source, flags=re.MULTILINE)[-1]
        for c in nbformat.read(notebook, as_version=4).cells
        if c.cell_type == "markdown" and re.search(r"^## Exercises$", c.source, flags=re.MULTILINE)
    ]
    assert len(sections) == 1, f"{notebook.name} has {len(sections)} '## Exercises' headings"
    parts = re.split(r"^(\d+)\. ", sections[0], flags=re.MULTILINE)  # text, "1", item 1, "2", ...
    return {f"{notebook.name[:2]}.{k}": text for k, text in zip(parts[1::2], parts[2::2])}


def test_each_exercise_text_matches_its_checks_module():
    from helpers.pipeline.artifacts import notebook_paths

    for notebook in notebook_paths():
        items = _exercise_items(notebook)
        checked = sorted(e for e in EXERCISES if e.startswith(notebook.name[:2] + "."))
        assert sorted(items) == checked, (
            f"{notebook.name}'s exercises {sorted(items)}, its checks {checked}"
        )
        for exercise_id, text in items.items():
            assert f'check("{exercise_id}", ' in text, (
                f"item {exercise_id} does not state its check"
            )
            entry = all_exercises()[exercise_id]
            if not isinstance(entry, Exercise):
                assert callable(reference(exercise_id)), f"no reference answer for {exercise_id}"


def _ink_cases(seed):
    """Fingerprints of the drawings check("04.1", ...) hands an ink function, and the feedback."""
    from helpers.grading.checks.ex04 import ink

    seen = []

    def recording_ink(rgb):
        seen.append(hashlib.sha256(rgb.tobytes()).hexdigest()[:12] + str(rgb.shape))
        return ink(rgb)

    feedback = check("04.1", recording_ink, seed=seed)
    assert feedback.ok, str(feedback)
    return seen, feedback


def test_a_seed_repeats_its_cases_and_each_call_draws_a_new_one():
    first, feedback = _ink_cases(seed=123_456)
    again, _ = _ink_cases(seed=123_456)
    assert first and first == again
    assert 'check("04.1", recording_ink, seed=123456) repeats these cases' in str(feedback)
    unseeded, other = _ink_cases(seed=None), _ink_cases(seed=None)
    assert unseeded[1].seed != other[1].seed and unseeded[0] != other[0]
    assert f"seed={unseeded[1].seed})" in str(unseeded[1])
