"""Exercises that check themselves: ``check("01.2", my_answer)`` says what is right or what is wrong.

The registry is found from the modules: each ``helpers/grading/checks/exNN.py`` lists its exercises in
``EXERCISES`` (see ``helpers.grading.examiner``, the one examiner they all go through).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.grading import checks as _checks_package
from helpers.grading.checks._common import Wrong
from helpers.grading.examiner import Exercise, draw_seed, run_check


@functools.cache
def check_modules() -> dict[str, Any]:
    """Notebook number -> its exercise module, every ``exNN`` module of ``helpers.grading.checks``."""
    names = sorted(
        m.name
        for m in pkgutil.iter_modules(_checks_package.__path__)
        if re.fullmatch(r"ex\d\d", m.name)
    )
    return {name[2:]: importlib.import_module(f"helpers.grading.checks.{name}") for name in names}


@functools.cache
def registry() -> dict[str, Exercise]:
    """Every exercise id of the series -> its :class:`Exercise`."""
    found: dict[str, Exercise] = {}
    for number, module in check_modules().items():
        for entry in module.EXERCISES:
            if not entry.id.startswith(number + ".") or entry.id in found:
                raise ValueError(f"{module.__name__} declares {entry.id} twice or out of place")
            found[entry.id] = entry
    return found


def all_exercises() -> dict[str, Exercise]:
    return dict(registry())


def exercise(exercise_id: str) -> Exercise:
    known = registry()
    if exercise_id not in known:
        raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(sorted(known))}")
    return known[exercise_id]


def listed(notebook: Path) -> dict[str, str]:
    """``{"NN.K": the text of item K}`` of the notebook's one "## Exercises" cell: its numbered list, items at
    line start (the one reader of that list: the course and the tests use it)."""
    import nbformat

    number = Path(notebook).name[:2]
    cells = [
        c.source
        for c in nbformat.read(notebook, as_version=4).cells
        if c.cell_type == "markdown" and re.search(r"^## Exercises$", c.source, flags=re.MULTILINE)
    ]
    if len(cells) != 1:
        raise ValueError(
            f"{Path(notebook).name}: expected one '## Exercises' cell, found {len(cells)}"
        )
    items = re.split(r"^(\d+)\. ", cells[0].split("## Exercises", 1)[1], flags=re.MULTILINE)[1:]
    texts = {}
    for k, body in zip(items[::2], items[1::2]):
        first, _, rest = body.rstrip().partition("\n")
        texts[f"{number}.{k}"] = (first + "\n" + textwrap.dedent(rest)).strip()
    return texts


def requirements(exercise_id: str) -> list[str]:
    """The requirements ``exercise_id`` states, a point each when graded."""
    return [requirement.name for requirement in exercise(exercise_id).requirements]


@dataclass
class Feedback:
    exercise: str
    ok: bool
    message: str
    details: list[str] = field(default_factory=list)
    seed: int | None = None
    answer_name: str = "answer"
    # each stated requirement not met -> what the learner is told of it
    unmet: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.ok

    def met(self, requirement: str) -> bool:
        """Is ``requirement`` (one the exercise states) met? An answer of the wrong kind meets none."""
        return requirement not in self.unmet and (self.ok or bool(self.unmet))

    def why(self, requirement: str) -> str:
        """What the learner is told of ``requirement``, in lines nbgrader's ``validate`` shows whole (it cuts
        each line at 87 characters)."""
        words = self.unmet.get(requirement, self.message)
        lines = textwrap.wrap(f"{requirement}: {words}", width=76)
        return "\n".join([f"exercise {self.exercise}, not met yet:", *lines])

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


def _name_of(answer: Any) -> str:
    """How the feedback spells the answer in the call that repeats a check: its name if it has one."""
    name = getattr(answer, "__name__", "")
    # not '<lambda>', nor a value's class name (a protobuf message such as a ModelProto has one)
    own = isinstance(name, str) and name.isidentifier() and name != type(answer).__name__
    return name if own else "answer"


def check(exercise_id: str, answer: Any, seed: int | None = None) -> Feedback:
    """Check ``answer`` for exercise ``exercise_id`` (e.g. ``"01.2"``) and say what is right or wrong.

    The checker makes fresh inputs from ``seed``: a new one per call unless given; the feedback prints it,
    and passing it back repeats the same cases.
    """
    entry = exercise(exercise_id)
    seed = draw_seed() if seed is None else int(seed)
    name = _name_of(answer)
    try:
        verdict = run_check(entry, answer, seed)
    except Wrong as wrong:
        # a module's own diagnosis where no requirement's judge can tell (each says why beside it)
        return Feedback(exercise_id, False, str(wrong), seed=seed, answer_name=name)
    return Feedback(
        exercise_id, verdict.ok, verdict.message, verdict.details, seed, name, verdict.unmet
    )
