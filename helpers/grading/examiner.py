"""One examiner for every exercise; each exercise is data around it.

An exercise module (``helpers/grading/checks/exNN.py``) lists its exercises in ``EXERCISES``, each an
:class:`Exercise`:

- ``cases(rng)``: the cases it draws from the check's seed (inputs, models, files the learner never saw), each a
  :class:`Case` holding what the answer is called with;
- ``reference``: the teacher's answer as written (the teacher's notebook prints its source), and ``answer``, the
  line that binds ``answer`` from it (``"answer = classify"``, ``"answer = shift_curve()"``);
- ``requirements``: what the exercise's text states, each a :class:`Requirement` that judges the answer's result
  on a case against the reference's and says what differs, never what was expected;
- ``mistakes``: known wrong answers (:class:`Mistake`): a name, a wrong answer that makes it, the words the learner
  sees, and the requirement it breaks; ``alternatives``: right answers written differently from the reference.

The examiner runs the answer and the reference on the cases and judges each requirement in order. When one is not
met, it names the known mistake whose answer behaves like the learner's on the same cases, or shows what differs.
``tests/test_grading.py`` runs every exercise's reference, alternatives and mistakes through it: a new exercise
needs no new test.
"""

from __future__ import annotations

import contextvars
import math
import numbers
import secrets
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from helpers.grading.checks._common import Wrong


@dataclass(frozen=True)
class Case:
    """One case: ``name`` tells the learner which (never its expected result); ``args`` go to the answer."""

    name: str
    args: tuple = ()
    data: Any = None


@dataclass(frozen=True)
class Raised:
    """What an answer raised on a case, kept as its outcome (an answer that raises is judged like any other)."""

    type: str
    message: str

    def __str__(self) -> str:
        first = (self.message.strip().splitlines() or [""])[0][:200]
        return f"{self.type}: {first}" if first else self.type


@dataclass(frozen=True)
class Requirement:
    """A requirement the exercise's text states. ``judge(case, got, want)`` returns None when ``got`` (the
    answer's outcome on ``case``) meets it beside ``want`` (the reference's), else what differs."""

    name: str
    judge: Callable[[Case, Any, Any], str | None]


@dataclass(frozen=True)
class Mistake:
    """A known mistake: a wrong ``answer`` that makes it, the ``words`` a learner who makes it sees, and the
    requirement it ``breaks`` (by name).

    The examiner names it when the learner's outcomes are those of ``answer`` on every case. Where running
    ``answer`` during a check costs too much (training a model), ``spots(cases, outcomes)`` tells it from the
    learner's outcomes instead: a hand-written test, to be justified beside it; the generic test still runs
    ``answer`` and wants these words."""

    name: str
    answer: Any
    words: str
    breaks: str
    spots: Callable[[Sequence[Case], Sequence[Any]], bool] | None = None


def judge_says_it(cases: Sequence[Case], outcomes: Sequence[Any]) -> bool:
    """``spots`` for a mistake whose words are what its requirement's judge says of it: never looked for during
    a check (the judge's message names it already), so its answer, costly to run, runs in the generic test only."""
    return False


@dataclass(frozen=True)
class Exercise:
    id: str
    # what an answer is, for a learner who passes something else ("your function classify(session, images)")
    expects: str
    reference: Callable
    cases: Callable[[np.random.Generator], Sequence[Case]]
    requirements: Sequence[Requirement]
    mistakes: Sequence[Mistake] = ()
    alternatives: Sequence[Any] = ()
    # the answer cell's last line in the teacher's notebook; evaluated beside the reference to get its answer
    answer: str = ""
    # is this the kind of answer asked for? (default: a callable) - a message when not
    accepts: Callable[[Any], bool] = callable
    # an answer's outcome on a case (default: the answer called with the case's args)
    run: Callable[[Any, Case], Any] | None = None
    # what a right answer is told, from the cases (default: their names)
    praise: Callable[[Sequence[Case]], list[str]] | None = None
    # the read-only set-up the teacher's notebook runs before the answer cells (imports, files)
    setup: str = ""
    # pytest marks of this exercise's generic tests (e.g. "slow", "llm", "tensorflow", "solo")
    marks: Sequence[str] = ()
    # strings that must never appear in feedback, from the reference's outcomes (default: their numbers)
    secrets: Callable[[Sequence[Any]], list[str]] | None = None
    # two outcomes behave alike (how a known mistake is recognised); default: ``same``
    alike: Callable[[Any, Any], bool] | None = None
    # True: the requirements judge the answer's outcome alone (``want`` is None) and the reference is not run
    # during a check (say why beside it, e.g. training it would double the check's time)
    judged_alone: bool = False
    # a hand-written hint for an answer that raised and matches no known mistake (what the error text says
    # about the answer; behaviour on cases cannot tell these apart, only the error's words can)
    explain: Callable[[Raised, Case], str] | None = None

    @property
    def answer_line(self) -> str:
        return self.answer or f"answer = {self.reference.__name__}"

    def reference_answer(self) -> Any:
        """The reference's answer, as the teacher's answer cell binds it."""
        expression = self.answer_line.split("=", 1)[1].strip()
        return eval(expression, {self.reference.__name__: self.reference})  # our own declared line

    def outcome(self, answer: Any, case: Case) -> Any:
        """What ``answer`` gives on ``case``, or what it raised (a :class:`Raised`)."""
        try:
            if self.run is not None:
                return self.run(answer, case)
            return answer(*case.args)
        except Wrong:
            raise
        # whatever the learner's code raises is an outcome to judge and report
        except Exception as err:
            return Raised(type(err).__name__, str(err))


@dataclass
class Verdict:
    """What the examiner found: ``ok``, the message, details (which cases, what they showed), and ``unmet``:
    each stated requirement not met, with what the learner is told of it (for a point per requirement)."""

    ok: bool
    message: str
    details: list[str] = field(default_factory=list)
    unmet: dict[str, str] = field(default_factory=dict)


def same(a: Any, b: Any) -> bool:
    """Two outcomes behave alike: the same exception type, or equal values (floats within 1e-6)."""
    if isinstance(a, Raised) or isinstance(b, Raised):
        return isinstance(a, Raised) and isinstance(b, Raised) and a.type == b.type
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    try:
        x, y = np.asarray(a), np.asarray(b)
    except (TypeError, ValueError):
        return a == b
    if x.dtype == object or y.dtype == object:
        return bool(a == b) if not isinstance(a, (list, tuple)) else _same_items(a, b)
    if x.shape != y.shape:
        return False
    if x.dtype.kind in "fc" or y.dtype.kind in "fc":
        return bool(np.allclose(x, y, rtol=1e-6, atol=1e-6, equal_nan=True))
    return bool(np.array_equal(x, y))


def _same_items(a, b) -> bool:
    if not isinstance(b, (list, tuple)) or len(a) != len(b):
        return False
    return all(same(x, y) for x, y in zip(a, b))


def numbers_in(value: Any) -> list[str]:
    """How a number of ``value`` could be printed (for the no-leak rule): each float as 0.9812, 98.1%, ...; the
    floats of an array to 3 or 4 decimals."""
    if isinstance(value, dict):
        return [text for item in value.values() for text in numbers_in(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in numbers_in(item)]
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        # an array's values as a message would print them: to 3 or 4 decimals
        shown = value[np.abs(value) >= 1e-3]
        return [f"{v:{spec}}" for v in shown.ravel().tolist() for spec in (".3f", ".4f")]
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)):
        v = float(value)
        if not math.isfinite(v) or v == 0:
            return []
        return [f"{v:.1%}", f"{v:.2%}", f"{v:.3f}", f"{v:.4f}", f"{100 * v:.1f}"]
    return []


def examine(exercise: Exercise, answer: Any, rng: np.random.Generator) -> Verdict:
    """Judge ``answer`` on ``exercise``'s cases drawn from ``rng``: every requirement, each on every case.

    The message is about the first requirement not met (in the order the exercise states them), naming the
    known mistake the answer behaves like; an answer of the wrong kind, or one that raises, meets none."""
    names = [requirement.name for requirement in exercise.requirements]
    if not exercise.accepts(answer):
        message = f"expected {exercise.expects}, got {type(answer).__name__}"
        return Verdict(False, message, unmet=dict.fromkeys(names, message))
    cases = list(exercise.cases(rng))
    got = [exercise.outcome(answer, case) for case in cases]
    for case, mine in zip(cases, got):
        if isinstance(mine, Raised):
            mistake = _known_mistake(exercise, cases, got, None)
            if mistake:
                message = f"{mistake.breaks}: {mistake.words}"
                return Verdict(False, message, [f"on {case.name}"], dict.fromkeys(names, message))
            hint = exercise.explain(mine, case) if exercise.explain else ""
            message = f"on {case.name}, your answer raised {mine}" + (f" ({hint})" if hint else "")
            return Verdict(False, message, unmet=dict.fromkeys(names, message))
    if exercise.judged_alone:
        want = [None] * len(cases)
    else:
        reference = exercise.reference_answer()
        want = [exercise.outcome(reference, case) for case in cases]
        for case, right in zip(cases, want):
            if isinstance(right, Raised):  # an examiner bug, never the learner's
                raise RuntimeError(f"{exercise.id}'s reference raised {right} on {case.name}")
    unmet: dict[str, str] = {}
    where: dict[str, str] = {}
    for requirement in exercise.requirements:
        for case, mine, right in zip(cases, got, want):
            try:
                differs = requirement.judge(case, mine, right)
            except Exception:
                # a judge that fails on an answer meeting what comes before it: our bug
                if not unmet:
                    raise
                differs = f"not judged, as {next(iter(unmet))!r} is not met"
            if differs is not None:
                if not unmet:
                    mistake = _known_mistake(exercise, cases, got, requirement)
                    differs = mistake.words if mistake else differs
                unmet[requirement.name], where[requirement.name] = differs, case.name
                break
    if unmet:
        first = next(iter(unmet))
        others = [f"also not met: {name}" for name in list(unmet)[1:]]
        return Verdict(False, f"{first}: {unmet[first]}", [f"on {where[first]}", *others], unmet)
    praise = exercise.praise(cases) if exercise.praise else [case.name for case in cases]
    return Verdict(True, "right!", praise)


def _known_mistake(
    exercise: Exercise, cases: list[Case], got: list, requirement: Requirement | None
) -> Mistake | None:
    """The known mistake whose answer gives what the learner's gave on every case (the broken requirement's
    own mistakes first)."""
    name = requirement.name if requirement else None
    alike = exercise.alike or same
    ordered = sorted(exercise.mistakes, key=lambda m: m.breaks != name)
    for mistake in ordered:
        if mistake.spots is not None:
            if mistake.spots(cases, got):
                return mistake
            continue
        theirs = [exercise.outcome(mistake.answer, case) for case in cases]
        if all(alike(a, b) for a, b in zip(got, theirs)):
            return mistake
    return None


def draw_seed() -> int:
    return secrets.randbelow(2**31)


_WORKDIR: contextvars.ContextVar[Path] = contextvars.ContextVar("exercise_workdir")


def workdir() -> Path:
    """The running check's own temporary folder (removed when the check ends), for the files its cases and
    runs write; a fresh sub-folder per call of ``fresh_folder``."""
    try:
        return _WORKDIR.get()
    except LookupError:
        raise RuntimeError(
            "no check is running: call it through helpers.grading.exercises.check"
        ) from None


def fresh_folder(prefix: str = "run-") -> Path:
    """A new empty folder inside the check's ``workdir()`` (an answer's files never meet another's)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=workdir()))


@contextmanager
def checking(seed: int):
    """While a check of ``seed`` runs: its folder, and the generator its cases are drawn from."""
    with tempfile.TemporaryDirectory(prefix="check-") as folder:
        token = _WORKDIR.set(Path(folder))
        try:
            yield np.random.default_rng(seed)
        finally:
            _WORKDIR.reset(token)


def run_check(exercise: Exercise, answer: Any, seed: int) -> Verdict:
    """``examine`` on the cases of ``seed``."""
    with checking(seed) as rng:
        return examine(exercise, answer, rng)


def expected_outcomes(exercise: Exercise, seed: int) -> list:
    """The reference's outcomes on the cases of ``seed`` (what feedback must never show)."""
    with checking(seed) as rng:
        cases = exercise.cases(rng)
        reference = exercise.reference_answer()
        return [exercise.outcome(reference, case) for case in cases]
