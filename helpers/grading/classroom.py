"""The series' exercises as an nbgrader course: one assignment per notebook with exercises.

``python -m helpers.grading.classroom generate --course classroom`` writes ``source/<notebook>/<notebook>.ipynb``
for nbgrader (TEACHING.md has the teacher's other commands). Per exercise ``NN.K`` an assignment holds:

- the exercise's text from the notebook's "## Exercises" list, and the line naming its answer variable
  ``answer_NN_K`` (its own name: a cell that fails never hands another exercise's answer on);
- an answer cell: ``answer_NN_K = None``, then the exercise's reference as written in its module, between
  nbgrader's solution markers; ``nbgrader generate_assignment`` leaves learners a stub in its place;
- a read-only check cell, ``feedback_NN_K = graded("NN.K", answer_NN_K)``: the learner's own checker, its
  verdict printed first;
- one read-only graded cell per stated requirement, worth ``POINTS``: it passes when the answer meets that
  requirement on the check's cases, and its assertion says why not.

Before the exercises, one read-only set-up cell, computed from what the exercises use (``setup_code``): the
set-up each declares (``Exercise.setup``), the lesson's imports, the files of earlier notebooks the checks read
(built or fetched with ``ensure_artifact``, as the lesson's Setup does), the lesson's statements binding the
names the texts refer to (``TEXT_NAMES``), and ``check``'s import.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import csv
import inspect
import io
import logging
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat

from helpers.data.paths import NOTEBOOKS, REPO_ROOT
from helpers.grading import exercises
from helpers.pipeline.artifacts import producers

# the course template: its settings (CONFIG_FILES) are in git, what nbgrader writes beside them is not
COURSE_TEMPLATE = REPO_ROOT / "classroom"
# the course's settings (nbgrader_config.py loads execution_config.py, which `make setup` also installs for learners)
CONFIG_FILES = ("nbgrader_config.py", "execution_config.py")
POINTS = 1  # per stated requirement: one graded cell each
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
ANSWER_LINE = (
    "Leave your answer, what you would pass to `check`, in a variable named `{name}`: the cells after yours "
    'check it with `check("{eid}", {name})`, a point for each requirement it meets.'
)
# lines of what a learner's code prints while checked, shown under the verdict (nbgrader cuts a cell's output
# at 1,000 lines; the verdict comes first, and each requirement's words are in its own cell's assertion)
SHOWN_LINES = 20


def answer_name(exercise_id: str) -> str:
    """Each exercise's own answer variable: a failed cell never hands another exercise's answer on."""
    return f"answer_{exercise_id.replace('.', '_')}"


def graded(exercise_id: str, answer: Any):
    """``check(exercise_id, answer)`` as an assignment's check cell runs it: nothing to stderr (nbgrader gives
    0 to a graded cell that writes there), the verdict printed first, then at most ``SHOWN_LINES`` of what the
    learner's code printed meanwhile; its repeat hint names the answer's variable ``answer_NN_K``. Returns the
    feedback, which the graded cells read."""
    printed = io.StringIO()
    with (
        stderr_to_stdout(),
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(printed),
    ):
        feedback = exercises.check(exercise_id, answer)
    # the call that repeats the check names the learner's variable, which the check cell passed
    feedback.answer_name = answer_name(exercise_id)
    print(feedback)
    lines = printed.getvalue().splitlines()
    if lines:
        print(f"\nyour code printed {len(lines)} lines while checked; the first {SHOWN_LINES}:")
        print("\n".join(lines[:SHOWN_LINES]))
    return feedback


def reference_code(exercise_id: str) -> str:
    """The answer cell's code: the exercise's reference as written, and its answer line."""
    entry = exercises.exercise(exercise_id)
    return f"{inspect.getsource(entry.reference).rstrip()}\n\n\n{entry.answer_line}"


# --- the source notebook ------------------------------------------------------------------------------------


def _nbgrader(grade_id: str, *, solution=False, grade=False, locked=False) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3}
    meta["solution"] = solution
    if grade:
        meta["points"] = POINTS
    return {"nbgrader": meta}


@contextlib.contextmanager
def stderr_to_stdout():
    """Inside, whatever is written to stderr goes to stdout: nbgrader gives 0 points to a graded cell that writes
    anything to stderr, and libraries write there (warnings, log lines such as a quantizer's INFO lines, C++
    messages). Python's ``sys.stderr``, the logging handlers that write to it, and file descriptor 2."""
    handlers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    moved = [
        h
        for logger in handlers
        for h in getattr(logger, "handlers", [])
        if isinstance(h, logging.StreamHandler) and h.stream is sys.stderr
    ]
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    stderr = sys.stderr
    try:
        os.dup2(1, 2)
        for handler in moved:
            handler.setStream(sys.stdout)
        with contextlib.redirect_stderr(sys.stdout):
            yield
    finally:
        sys.stdout.flush()
        for handler in moved:
            handler.setStream(stderr)
        os.dup2(saved, 2)
        os.close(saved)


def check_code(exercise_id: str) -> str:
    """The locked cell after an answer: runs its check once, keeps the feedback for the graded cells."""
    return f'feedback_{exercise_id.replace(".", "_")} = graded("{exercise_id}", {answer_name(exercise_id)})'


def requirement_code(exercise_id: str, requirement: str) -> str:
    """A graded cell worth ``POINTS``: the requirement met, or an AssertionError holding the checker's words
    (nbgrader keeps an assertion's message, in ``validate`` and on the feedback page)."""
    feedback = f"feedback_{exercise_id.replace('.', '_')}"
    return f"requirement = {requirement!r}\nassert {feedback}.met(requirement), {feedback}.why(requirement)"


def answer_code(exercise_id: str) -> str:
    """The answer cell: its variable reset (a cell that fails leaves None), the reference between the markers."""
    name = answer_name(exercise_id)
    code = reference_code(exercise_id)
    body, _, last = code.rpartition("\n")
    if not last.startswith("answer = "):
        raise ValueError(f"{exercise_id}: the reference's last line binds no answer: {last!r}")
    code = f"{body}\n{name} = {last.removeprefix('answer = ')}"
    return f"{name} = None\n{BEGIN}\n{code}\n{END}"


# Names an exercise's text refers to that the lesson binds, beyond its files and imports ("break the tiny
# model"): the set-up holds the lesson's statements that bind them, with those they need
TEXT_NAMES = {"00.3": ("tiny",)}


def _lesson_statements(path: Path) -> list[tuple[ast.stmt, str, bool]]:
    """``(statement, its source, in the Setup cell?)`` of each top-level statement of the lesson's code cells
    before its "## Exercises", in order (a cell Python cannot parse, e.g. a cell magic, is left out)."""
    statements, in_setup = [], False
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            if re.search(r"^## Exercises$", cell.source, flags=re.MULTILINE):
                break
            in_setup = bool(re.search(r"^## Setup$", cell.source, flags=re.MULTILINE))
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        statements += [(n, ast.get_source_segment(cell.source, n), in_setup) for n in tree.body]
        in_setup = False
    return statements


def _bound(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds (imports aside)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = {
        ast.Assign: lambda n: n.targets,
        ast.AnnAssign: lambda n: [n.target],
        ast.AugAssign: lambda n: [n.target],
        ast.For: lambda n: [n.target],
    }.get(type(node), lambda n: [])(node)
    return {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}


def _free(node: ast.stmt) -> set[str]:
    """The names a statement reads that it does not bind itself."""
    names = {x.id for x in ast.walk(node) if isinstance(x, ast.Name)}
    stored = {
        x.id for x in ast.walk(node) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)
    }
    args = {
        a.arg
        for x in ast.walk(node)
        if isinstance(x, ast.arguments)
        for a in ast.walk(x)
        if isinstance(a, ast.arg)
    }
    return names - stored - args - set(dir(builtins))


def _artifact_files(number: str) -> set[str]:
    """The files of earlier notebooks the checks module of notebook ``number`` names (``producers()``)."""
    made = producers()
    module = exercises.check_modules()[number]
    tree = ast.parse(inspect.getsource(module))
    return {x.value for x in ast.walk(tree) if isinstance(x, ast.Constant) and x.value in made}


def _artifact_calls(node: ast.stmt) -> set[str]:
    """The files a statement passes to ``ensure_artifact`` as written (string constants)."""
    return {
        arg.value
        for call in ast.walk(node)
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "ensure_artifact"
        for arg in call.args
        if isinstance(arg, ast.Constant)
    }


def setup_code(path: Path, exercise_ids: list[str]) -> str:
    """The assignment's read-only set-up cell, computed from what its exercises use: the set-up each declares;
    every import of the lesson (an answer written as the lesson writes it finds its modules); the files of earlier
    notebooks its checks read, built or fetched as the lesson's Setup does it (``ensure_artifact``: the notebook
    that makes a missing file runs first, so every learner's checks find it, whatever the order); the lesson's
    statements that bind the names the texts refer to (``TEXT_NAMES``), with those they need."""
    statements = _lesson_statements(path)
    declared = [
        line for eid in exercise_ids for line in exercises.exercise(eid).setup.strip().splitlines()
    ]
    imports = [src for node, src, _ in statements if isinstance(node, (ast.Import, ast.ImportFrom))]
    files = _artifact_files(path.name[:2])
    chosen: dict[int, str] = {}  # statement index -> source, kept in the lesson's order
    ensured: set[str] = set()
    for k, (node, src, in_setup) in enumerate(statements):
        wanted = _artifact_calls(node)
        if in_setup and wanted and wanted <= files:
            chosen[k] = src
            ensured |= wanted
    missing = sorted(files - ensured)
    # the statements binding the names the texts refer to, and (latest binding first) what they read
    needed = [(name, len(statements)) for eid in exercise_ids for name in TEXT_NAMES.get(eid, ())]
    while needed:
        name, before = needed.pop()
        binders = [k for k in range(before) if name in _bound(statements[k][0])]
        if not binders:
            raise ValueError(f"{path.name}: no statement before the exercises binds {name!r}")
        k = binders[-1]
        if k not in chosen:
            chosen[k] = statements[k][1]
            needed += [
                (free, k)
                for free in _free(statements[k][0])
                if free not in _imported(["\n".join(declared), *imports])
            ]
    lines = [*declared, *imports]
    if missing:
        lines.append("from helpers.pipeline.artifacts import ensure_artifact")
        lines += [f'ensure_artifact("{name}")  # {producers()[name]} makes it' for name in missing]
    lines += [chosen[k] for k in sorted(chosen)]
    lines += [
        "from helpers.grading.classroom import graded",
        "from helpers.grading.exercises import check",
    ]
    return "\n".join(dict.fromkeys(lines))


def _imported(imports: list[str]) -> set[str]:
    """The names a list of import statements binds."""
    names = set()
    for src in imports:
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
    return names


def assignment_notebook(path: Path) -> nbformat.NotebookNode:
    """The nbgrader source notebook of the series' notebook ``path``."""
    notebook = nbformat.read(path, as_version=4)
    number = path.name[:2]
    texts = exercises.listed(path)
    checked = sorted(e for e in exercises.all_exercises() if e.startswith(number + "."))
    if sorted(texts) != checked:
        raise ValueError(f"{path.name}: its exercise list {sorted(texts)} != its checks {checked}")
    setup = setup_code(path, list(texts))
    title = notebook.cells[0].source.splitlines()[0].lstrip("# ")
    cells = [
        nbformat.v4.new_markdown_cell(
            f"# {title}: exercises\n\n"
            f"The exercises of notebook `{path.name}`. Write each answer in the cell under its text, leaving it in "
            "the variable the text names; the cell after yours runs `check` on it, which says what is right or "
            "what is still wrong, and the cells after that give a point for each requirement met (run them as "
            "often as you like). Run the set-up cell first.",
            id="title",
            metadata=_nbgrader("title", locked=True),
        ),
        nbformat.v4.new_code_cell(setup, id="setup", metadata=_nbgrader("setup", locked=True)),
    ]
    for eid, text in texts.items():
        slug = eid.replace(".", "_")
        cells += [
            nbformat.v4.new_markdown_cell(
                f"## Exercise {eid}\n\n{text}\n\n{ANSWER_LINE.format(eid=eid, name=answer_name(eid))}",
                id=f"text-{slug}",
                metadata=_nbgrader(f"text_{slug}", locked=True),
            ),
            nbformat.v4.new_code_cell(
                answer_code(eid),
                id=f"answer-{slug}",
                metadata=_nbgrader(f"answer_{slug}", solution=True),
            ),
            nbformat.v4.new_code_cell(
                check_code(eid),
                id=f"check-{slug}",
                metadata=_nbgrader(f"check_{slug}", locked=True),
            ),
        ]
        for k, requirement in enumerate(exercises.requirements(eid), start=1):
            cells.append(
                nbformat.v4.new_code_cell(
                    requirement_code(eid, requirement),
                    id=f"grade-{slug}-{k}",
                    metadata=_nbgrader(f"grade_{slug}_{k}", grade=True, locked=True),
                )
            )
    return nbformat.v4.new_notebook(
        cells=cells,
        metadata={
            "kernelspec": notebook.metadata["kernelspec"],
            "language_info": notebook.metadata.get("language_info", {"name": "python"}),
        },
    )


def _write(notebook: nbformat.NotebookNode, path: Path) -> None:
    """Written to a temporary name, read back, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    nbformat.write(notebook, partial)
    nbformat.validate(nbformat.read(partial, as_version=4))
    partial.replace(path)


def generate(course: Path, numbers: list[str] | None = None) -> list[str]:
    """Write ``course/source/<assignment>/<assignment>.ipynb`` for each notebook (or those of ``numbers``);
    a course folder other than the template gets the template's ``nbgrader_config.py``. Returns the ids."""
    course = Path(course).resolve()
    (course / "exchange").mkdir(parents=True, exist_ok=True)  # nbgrader_config.py's Exchange.root
    if course != COURSE_TEMPLATE.resolve():
        for name in CONFIG_FILES:
            shutil.copyfile(COURSE_TEMPLATE / name, course / name)
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if numbers:
        unknown = sorted(set(numbers) - {p.name[:2] for p in paths})
        if unknown:
            raise ValueError(
                f"no notebook numbered {unknown}; known: {[p.name[:2] for p in paths]}"
            )
        paths = [p for p in paths if p.name[:2] in numbers]
    written = []
    for path in paths:
        if not any(e.startswith(path.name[:2] + ".") for e in exercises.all_exercises()):
            continue  # a notebook without exercises is no assignment
        assignment = path.stem
        _write(assignment_notebook(path), course / "source" / assignment / path.name)
        written.append(assignment)
    return written


# --- plumbing for the tests and the teacher's timing ---------------------------------------------------------


def solutions(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """``{grade_id: code between the solution markers}`` of a source notebook's answer cells."""
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
        for c in notebook.cells
        if c.metadata.get("nbgrader", {}).get("solution") and BEGIN in c.source
    }


def nbgrader(course: Path, *args: str, timeout: float = 1800) -> str:
    """Run ``nbgrader ARGS`` in ``course`` with this Python; its console output, or an error holding it.

    nbgrader runs its database migrations with the ``alembic`` command, found on PATH: this Python's ``bin``
    is put first on PATH (as an activated venv does)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = run.stdout + run.stderr
    if run.returncode != 0:
        raise RuntimeError(
            f"nbgrader {' '.join(args)} exited with {run.returncode}:\n{output[-6000:]}"
        )
    return output


def cell_seconds(notebook: nbformat.NotebookNode) -> dict[str, float]:
    """``{grade_id: seconds}`` of an executed (e.g. autograded) notebook, from the timing nbclient records."""
    seconds = {}
    for cell in notebook.cells:
        timing = cell.metadata.get("execution", {})
        if "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            start, end = (
                datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                for k in ("iopub.execute_input", "shell.execute_reply")
            )
            name = cell.metadata.get("nbgrader", {}).get("grade_id", cell.get("id", "?"))
            seconds[name] = (end - start).total_seconds()
    return seconds


def timings(course: Path) -> dict[str, dict[str, float]]:
    """Seconds per cell of every autograded notebook of the course: ``{"student/assignment": {cell: s}}``."""
    return {
        f"{p.parent.parent.name}/{p.parent.name}": cell_seconds(nbformat.read(p, as_version=4))
        for p in sorted(Path(course).glob("autograded/*/*/*.ipynb"))
    }


def exercise_scores(course: Path) -> list[dict]:
    """One row per learner, assignment and exercise from the gradebook: the points of its requirement cells
    (``grade_NN_K_R``) added up, and the most it could have earned."""
    from nbgrader.api import Gradebook, MissingEntry

    rows: dict[tuple, dict] = {}
    with Gradebook(f"sqlite:///{Path(course).resolve() / 'gradebook.db'}") as gradebook:
        for assignment in gradebook.assignments:
            for student in gradebook.students:
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:  # this learner handed nothing in
                    continue
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        match = re.fullmatch(r"grade_(\d\d)_(\d+)_\d+", grade.name)
                        if not match:
                            continue
                        exercise_id = f"{match[1]}.{match[2]}"
                        key = (student.id, assignment.name, exercise_id)
                        row = rows.setdefault(
                            key,
                            dict(
                                zip(("student_id", "assignment", "exercise"), key),
                                score=0.0,
                                max_score=0.0,
                            ),
                        )
                        row["score"] += grade.score or 0.0
                        row["max_score"] += grade.max_score
    return [rows[key] for key in sorted(rows)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.grading.classroom", description=__doc__
    )
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="write the course's source/ from the notebooks")
    gen.add_argument("--course", type=Path, default=COURSE_TEMPLATE, help="the course folder")
    gen.add_argument("numbers", nargs="*", help="notebook numbers (default: all with exercises)")
    times = commands.add_parser("timings", help="seconds per autograded cell, slowest first")
    times.add_argument("--course", type=Path, default=COURSE_TEMPLATE, help="the course folder")
    scores = commands.add_parser("scores", help="points per learner and exercise, as CSV on stdout")
    scores.add_argument("--course", type=Path, default=COURSE_TEMPLATE, help="the course folder")
    args = parser.parse_args(argv)
    if args.command == "generate":
        for assignment in generate(args.course, args.numbers):
            print(args.course / "source" / assignment / f"{assignment}.ipynb")
        return
    if args.command == "scores":
        rows = exercise_scores(args.course)
        writer = csv.DictWriter(
            sys.stdout, ["student_id", "assignment", "exercise", "score", "max_score"]
        )
        writer.writeheader()
        writer.writerows(rows)
        return
    rows = [
        (seconds, f"{name}: {cell}")
        for name, cells in timings(args.course).items()
        for cell, seconds in cells.items()
    ]
    if not rows:
        raise SystemExit(f"no autograded notebook under {args.course / 'autograded'}")
    for seconds, where in sorted(rows, reverse=True):
        print(f"{seconds:8.1f} s  {where}")


if __name__ == "__main__":
    main()
