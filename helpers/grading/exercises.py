"""Exercises that check themselves: ``check("01.2", my_answer)`` says what is right or what is wrong."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from helpers.grading.checks import ex00, ex01, ex02, ex03, ex04, ex05, ex06, ex07, ex08, ex09
from helpers.grading.checks._common import Wrong

# notebook number -> its checks module, whose ``CHECKS`` maps exercise ids to checkers
CHECK_MODULES = {
    "00": ex00,
    "01": ex01,
    "02": ex02,
    "03": ex03,
    "04": ex04,
    "05": ex05,
    "06": ex06,
    "07": ex07,
    "08": ex08,
    "09": ex09,
}


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


def all_exercises() -> dict[str, Callable[[Any], list[str] | str | None]]:
    """Every exercise id of the series -> its checker."""
    return {
        exercise: checker
        for module in CHECK_MODULES.values()
        for exercise, checker in module.CHECKS.items()
    }


def check(exercise_id: str, answer: Any) -> Feedback:
    """Check ``answer`` for exercise ``exercise_id`` (e.g. ``"01.2"``) and say what is right or wrong."""
    checks = all_exercises()
    if exercise_id not in checks:
        raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(sorted(checks))}")
    try:
        details = checks[exercise_id](answer)
    except Wrong as wrong:
        return Feedback(exercise_id, False, str(wrong))
    if isinstance(details, str):
        details = [details]
    return Feedback(exercise_id, True, "right!", list(details or []))
