"""Every exercise is solvable (its worked solution passes its check) and its check can fail."""

from __future__ import annotations

import importlib

import pytest

from helpers.grading.exercises import Feedback, all_exercises, check

EXERCISES = sorted(all_exercises())


def test_every_notebook_has_two_or_three_exercises():
    from helpers.pipeline.artifacts import notebook_paths

    for path in notebook_paths():
        number = path.name[:2]
        count = sum(1 for e in EXERCISES if e.startswith(number + "."))
        assert 2 <= count <= 3, f"notebook {path.name} has {count} checked exercises"


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_worked_solution_passes_its_check(exercise_id, tmp_path):
    number, k = exercise_id.split(".")
    solutions = importlib.import_module(f"solutions.ex{number}")
    answer = getattr(solutions, f"solve_{int(k)}")(tmp_path)
    feedback = check(exercise_id, answer)
    assert isinstance(feedback, Feedback)
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_a_wrong_answer_is_told_what_is_wrong(exercise_id):
    feedback = check(exercise_id, None)
    assert not feedback.ok
    assert "expected" in feedback.message, feedback.message


def test_the_registry_holds_every_checks_module_and_each_only_its_notebook():
    from helpers.data.paths import REPO_ROOT
    from helpers.grading.exercises import CHECK_MODULES

    on_disk = sorted(
        p.stem[2:] for p in (REPO_ROOT / "helpers" / "grading" / "checks").glob("ex[0-9][0-9].py")
    )
    assert sorted(CHECK_MODULES) == on_disk
    for number, module in CHECK_MODULES.items():
        assert module.__name__ == f"helpers.grading.checks.ex{number}"
        assert module.CHECKS and all(e.startswith(number + ".") for e in module.CHECKS), (
            module.CHECKS
        )


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
