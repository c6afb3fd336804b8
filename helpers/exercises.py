"""Exercises that check themselves.

Each notebook ends with two or three exercises. A learner writes an answer in a new cell and asks for
feedback::

    from helpers.exercises import check
    check("01.1", my_answer)

``check`` says what is right or what is wrong (it does not just fail), and returns a :class:`Feedback`
that is truthy when the answer is right. Worked solutions live in ``solutions/`` at the top of the
repository (for teachers; see README), and ``tests/test_exercises.py`` runs every solution through its check,
so no exercise is unsolvable or broken.

Checkers import what they need inside the function: importing this module loads no framework.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


class Wrong(Exception):
    """Raised inside a checker with a message telling the learner what is not right yet."""


@dataclass
class Feedback:
    exercise: str
    ok: bool
    message: str
    details: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"{'✅' if self.ok else '❌'} exercise {self.exercise}: {self.message}"
        return "\n".join([head] + [f"   · {d}" for d in self.details])

    def _repr_markdown_(self) -> str:
        head = f"{'✅' if self.ok else '❌'} **exercise {self.exercise}**: {self.message}"
        return "\n".join([head] + [f"- {d}" for d in self.details])

    __repr__ = __str__


@dataclass(frozen=True)
class Exercise:
    id: str
    task: str
    checker: Callable[[Any], list[str] | str | None]


EXERCISES: dict[str, Exercise] = {}


def exercise(exercise_id: str, task: str):
    """Register ``checker`` as the check for ``exercise_id``; the checker raises :class:`Wrong`."""
    def register(checker):
        if exercise_id in EXERCISES:
            raise ValueError(f"exercise {exercise_id} registered twice")
        EXERCISES[exercise_id] = Exercise(exercise_id, task, checker)
        return checker
    return register


def check(exercise_id: str, answer: Any) -> Feedback:
    """Check ``answer`` for exercise ``exercise_id`` (e.g. ``"01.2"``) and say what is right or wrong."""
    _load_all()
    if exercise_id not in EXERCISES:
        raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(sorted(EXERCISES))}")
    ex = EXERCISES[exercise_id]
    try:
        details = ex.checker(answer)
    except Wrong as wrong:
        return Feedback(exercise_id, False, str(wrong))
    if isinstance(details, str):
        details = [details]
    return Feedback(exercise_id, True, "right!", list(details or []))


def _load_all() -> None:
    """Import the per-notebook checker modules (they register themselves)."""
    import importlib
    import pkgutil

    import helpers.checks as checks_pkg

    for module in pkgutil.iter_modules(checks_pkg.__path__):
        importlib.import_module(f"helpers.checks.{module.name}")


def all_exercises() -> dict[str, Exercise]:
    _load_all()
    return dict(EXERCISES)
