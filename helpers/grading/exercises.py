"""Exercises that check themselves: ``check("01.2", my_answer)`` says what is right or what is wrong.

Each checks module ``helpers/grading/checks/exNN.py`` holds, per exercise ``NN.K``, its checker
(``CHECKS["NN.K"]``) and a teacher's reference answer (``solve_K(workdir)``, see ``reference``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from helpers.grading.checks import ex00, ex01, ex02, ex03, ex04, ex05, ex06, ex07, ex08, ex09, ex10
from helpers.grading.checks._common import Wrong, seeded

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
    "10": ex10,
}


@dataclass
class Feedback:
    exercise: str
    ok: bool
    message: str
    details: list[str] = field(default_factory=list)
    seed: int | None = None
    answer_name: str = "answer"

    def __bool__(self) -> bool:
        return self.ok

    def _lines(self) -> list[str]:
        if self.seed is None:
            return self.details
        again = f'check("{self.exercise}", {self.answer_name}, seed={self.seed})'
        return [*self.details, f"seed {self.seed}: {again} repeats these cases"]

    def __str__(self) -> str:
        head = f"{'✅' if self.ok else '❌'} exercise {self.exercise}: {self.message}"
        return "\n".join([head] + [f"   · {d}" for d in self._lines()])

    def _repr_markdown_(self) -> str:
        head = f"{'✅' if self.ok else '❌'} **exercise {self.exercise}**: {self.message}"
        return "\n".join([head] + [f"- {d}" for d in self._lines()])

    __repr__ = __str__


def all_exercises() -> dict[str, Callable[[Any], list[str] | str | None]]:
    """Every exercise id of the series -> its checker."""
    return {
        exercise: checker
        for module in CHECK_MODULES.values()
        for exercise, checker in module.CHECKS.items()
    }


def _checks_module(exercise_id: str):
    checks = all_exercises()
    if exercise_id not in checks:
        raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(sorted(checks))}")
    return CHECK_MODULES[exercise_id.split(".")[0]]


def reference(exercise_id: str) -> Callable[[Path], Any]:
    """A teacher's answer to ``exercise_id``: ``solve_K(workdir)`` of its checks module, returning the answer."""
    module, k = _checks_module(exercise_id), int(exercise_id.split(".")[1])
    return getattr(module, f"solve_{k}")


def _name_of(answer: Any) -> str:
    """How the feedback spells the answer in the call that repeats a check: its name if it has one."""
    name = getattr(answer, "__name__", "")
    return name if isinstance(name, str) and name.isidentifier() else "answer"  # not '<lambda>'


def check(exercise_id: str, answer: Any, seed: int | None = None) -> Feedback:
    """Check ``answer`` for exercise ``exercise_id`` (e.g. ``"01.2"``) and say what is right or wrong.

    The checker makes fresh inputs from ``seed``: a new one per call unless given; the feedback prints it,
    and passing it back repeats the same cases.
    """
    checker = _checks_module(exercise_id).CHECKS[exercise_id]
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    try:
        with seeded(seed):
            details = checker(answer)
    except Wrong as wrong:
        return Feedback(exercise_id, False, str(wrong), seed=seed, answer_name=_name_of(answer))
    if isinstance(details, str):
        details = [details]
    return Feedback(
        exercise_id, True, "right!", list(details or []), seed=seed, answer_name=_name_of(answer)
    )
