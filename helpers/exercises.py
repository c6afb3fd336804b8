"""Exercises that check themselves: ``check("01.2", my_answer)`` says what is right or what is wrong.

Each ``helpers/checks/exNN.py`` ends with ``CHECKS = {"NN.K": checker}``; a checker raises ``Wrong`` (from
``helpers.checks._common``) with what is not right yet, and imports its frameworks inside the function. Worked
solutions are in ``solutions/``; ``tests/test_exercises.py`` runs every one through its check.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from helpers.checks._common import Wrong


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


def _checks(number: str) -> dict[str, Callable[[Any], list[str] | str | None]]:
    """The ``CHECKS`` mapping of ``helpers/checks/ex<number>.py`` (empty when there is no such module).

    A plain mapping, imported like any module: re-importing or ``%autoreload`` cannot register anything twice.
    """
    import importlib

    try:
        module = importlib.import_module(f"helpers.checks.ex{number}")
    except ModuleNotFoundError as err:
        if err.name != f"helpers.checks.ex{number}":
            raise
        return {}
    return dict(module.CHECKS)


def all_exercises() -> dict[str, Callable[[Any], list[str] | str | None]]:
    """Every exercise id of the series -> its checker."""
    import pkgutil

    import helpers.checks as checks_pkg

    found: dict = {}
    for module in sorted(pkgutil.iter_modules(checks_pkg.__path__), key=lambda m: m.name):
        if module.name.startswith("ex"):
            found.update(_checks(module.name[2:]))
    return found


def check(exercise_id: str, answer: Any) -> Feedback:
    """Check ``answer`` for exercise ``exercise_id`` (e.g. ``"01.2"``) and say what is right or wrong."""
    checks = _checks(str(exercise_id).split(".")[0]) if "." in str(exercise_id) else {}
    if exercise_id not in checks:
        raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(sorted(all_exercises()))}")
    try:
        details = checks[exercise_id](answer)
    except Wrong as wrong:
        return Feedback(exercise_id, False, str(wrong))
    if isinstance(details, str):
        details = [details]
    return Feedback(exercise_id, True, "right!", list(details or []))
