"""The nbgrader course, end to end with nbgrader's own commands, on assignment 10 (numpy only: it grades in
seconds).

A class of eight learners, each made from the release version, collected with ``zip_collect``, autograded,
given feedback and exported. Each exercise gives a point per requirement its text states, so a learner who
breaks one requirement keeps the others' points; each learner's points per exercise are read from the gradebook
with ``python -m helpers.grading.classroom scores``. Also: ``nbgrader validate`` and the feedback pages carry the
checker's words, the release files hold none of the references' code, which the source files do hold, and every
assignment's release with the references pasted in autogrades to full marks (slow: run once, see
``test_every_release_with_the_reference_pasted_in_autogrades_to_full_marks``).
"""

from __future__ import annotations

import csv
import html
import io
import re
import subprocess
import sys
import time
import zipfile

import nbformat
import pytest

from helpers.grading import classroom
from helpers.grading.exercises import all_exercises, exercise, requirements
from helpers.pipeline.artifacts import notebook_paths

# nbgrader executes whole classes of notebooks
pytestmark = pytest.mark.slow

ASSIGNMENT = "10_embed_sentences_transformer"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
TIMEOUT_S = 30  # seconds per cell in this test: the looping learner's cell is stopped after it
EXERCISES = ("10.1", "10.2")
# what ivy deleted: the set-up, a check cell, a graded cell (autograding puts them back as released)
DELETED = ("setup", "check_10_1", "grade_10_2_1")
ABSENT = "hal"  # on the class list, hands nothing in
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # what nbgrader leaves of a solution

# What learners wrote instead of the reference, each breaking what its comment says
UNSCALED = """def masked_mean(hidden, mask):
    weights = mask[:, :, None]
    return (hidden * weights).sum(axis=1) / weights.sum(axis=1)


answer_10_1 = masked_mean"""  # the mean, not scaled to length 1: one requirement of four
REVERSED = """def nearest(queries, documents, k):
    order = np.argsort(queries @ documents.T, axis=1)
    return order[:, ::-1][:, :k][:, ::-1]


answer_10_2 = nearest"""  # the right documents, the least similar first: one requirement of four
RAISES_IN_CELL = "answer_10_1 = masked_mean"  # never defined: the cell raises NameError
RAISES_WHEN_CALLED = """def nearest(queries, documents, k):
    return queries[k] @ documents


answer_10_2 = nearest"""  # raises (the shapes do not match): no requirement met
CHATTY_PADDING_IN = """def masked_mean(hidden, mask):
    for step in range(5000):
        print("pooling, step", step)
    mean = hidden.mean(axis=1)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


answer_10_1 = masked_mean"""  # prints 5000 lines a call, and averages the padding in
LOOPS = "while True:\n    pass"


def slug(exercise_id: str) -> str:
    return exercise_id.replace(".", "_")


def grade_cell(exercise_id: str, requirement: str) -> str:
    """The grade id of the cell that gives ``requirement``'s point."""
    return f"grade_{slug(exercise_id)}_{requirements(exercise_id).index(requirement) + 1}"


def the_class(reference: dict) -> dict[str, tuple[dict, dict]]:
    """learner -> (cell sources replacing the release's, expected points per exercise)."""
    right = {f"answer_{slug(e)}": reference[f"answer_{slug(e)}"] for e in EXERCISES}
    full = {e: len(requirements(e)) for e in EXERCISES}
    return {
        "ada": (right, full),
        "bob": (
            {"answer_10_1": UNSCALED, "answer_10_2": REVERSED},
            {e: points - 1 for e, points in full.items()},
        ),
        "cy": ({}, {e: 0 for e in EXERCISES}),  # the release, untouched: its stubs raise
        "dee": (
            {"answer_10_1": RAISES_IN_CELL, "answer_10_2": right["answer_10_2"]},
            {"10.1": 0, "10.2": full["10.2"]},
        ),
        "eve": (
            {"answer_10_1": LOOPS, "answer_10_2": right["answer_10_2"]},
            {"10.1": 0, "10.2": full["10.2"]},
        ),
        "fay": (  # the requirement her answer breaks: its graded cell replaced by `pass`
            {
                "answer_10_1": right["answer_10_1"],
                "answer_10_2": REVERSED,
                grade_cell("10.2", "the most similar first"): "pass",
            },
            {"10.1": full["10.1"], "10.2": full["10.2"] - 1},
        ),
        "gus": (
            {"answer_10_1": CHATTY_PADDING_IN, "answer_10_2": RAISES_WHEN_CALLED},
            {"10.1": full["10.1"] - 1, "10.2": 0},
        ),
        "ivy": ({**right, **{cell: None for cell in DELETED}}, full),  # right, cells deleted
    }


def submission(release: nbformat.NotebookNode, sources: dict) -> nbformat.NotebookNode:
    """A learner's notebook: the release version, each answer cell of ``sources`` with its code in place of
    the stub, any other cell of ``sources`` replaced whole, or deleted where its source is None."""
    notebook = nbformat.from_dict(release)
    gone = {grade_id for grade_id, source in sources.items() if source is None}
    notebook.cells = [
        c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in gone
    ]
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id not in sources:
            continue
        if cell.metadata["nbgrader"]["solution"]:
            assert STUB in cell.source, f"no stub in the released {grade_id}: {cell.source!r}"
            cell.source = cell.source.replace(STUB, sources[grade_id])
        else:
            cell.source = sources[grade_id]
    return notebook


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """The course after generate, release, zip_collect, autograde, generate_feedback and export."""
    course = tmp_path_factory.mktemp("course")
    seconds = {}
    t0 = time.monotonic()
    classroom.generate(course, [ASSIGNMENT[:2]])
    classroom.nbgrader(course, "generate_assignment", ASSIGNMENT)
    seconds["generate + release"] = time.monotonic() - t0
    source = nbformat.read(course / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    learners = the_class(classroom.solutions(source))

    # what a teacher downloads from a learning platform: one zip with two learners' files, the others loose
    archive = course / "downloaded" / ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "first-batch.zip", "w") as batch:
        for learner in ("ada", "bob"):
            text = nbformat.writes(submission(release, learners[learner][0]))
            batch.writestr(f"{learner}_{NOTEBOOK}", text)
    for learner in sorted(set(learners) - {"ada", "bob"}):
        nbformat.write(submission(release, learners[learner][0]), archive / f"{learner}_{NOTEBOOK}")

    logs = {}
    for step, args in {
        # a learner on the class list who hands nothing in
        "db student add": ["db", "student", "add", ABSENT],
        "zip_collect": ["zip_collect", ASSIGNMENT],
        "autograde": ["autograde", ASSIGNMENT, f"--Execute.timeout={TIMEOUT_S}"],
        "generate_feedback": ["generate_feedback", ASSIGNMENT],
        "export": ["export", "--to", str(course / "grades.csv")],
    }.items():
        t0 = time.monotonic()
        logs[step] = classroom.nbgrader(course, *args)
        seconds[step] = time.monotonic() - t0
    print("class proof, seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    return {"course": course, "learners": learners, "logs": logs, "release": release}


def scores(course) -> dict[str, dict[str, float]]:
    """learner -> {exercise: points}, from the teacher's command ``classroom scores`` (its CSV)."""
    run = subprocess.run(
        [sys.executable, "-m", "helpers.grading.classroom", "scores", "--course", str(course)],
        capture_output=True,
        text=True,
        check=True,
    )
    table: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(run.stdout)):
        assert row["assignment"] == ASSIGNMENT, row
        assert float(row["max_score"]) == len(requirements(row["exercise"])), row
        table.setdefault(row["student_id"], {})[row["exercise"]] = float(row["score"])
    return table


def test_each_learner_scores_a_point_per_requirement_met(graded_class):
    got = scores(graded_class["course"])
    print("learner: expected -> graded")
    for learner, (_, want) in graded_class["learners"].items():
        print(f"  {learner}: {want} -> {got.get(learner)}")
    assert sorted(got) == sorted(graded_class["learners"]), (
        "not every learner was collected and graded"
    )
    for learner, (_, want) in graded_class["learners"].items():
        assert got[learner] == want, f"{learner}: graded {got[learner]}, expected {want}"


def autograded(course, learner: str) -> dict[str, nbformat.NotebookNode]:
    notebook = nbformat.read(course / "autograded" / learner / ASSIGNMENT / NOTEBOOK, as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: c for c in notebook.cells if "nbgrader" in c.metadata
    }


def errors(cell) -> list[str]:
    return [o.ename for o in cell.get("outputs", []) if o.output_type == "error"]


def test_the_teachers_terminal_holds_no_warning_our_settings_cause(graded_class):
    for step, log in graded_class["logs"].items():
        for noise in (
            "Kernel is running over TCP without encryption",
            "SAWarning",
            "No nbgrader_config.py file found",
        ):
            assert noise not in log, f"{step} printed {noise!r}:\n{log[-3000:]}"


def test_a_cell_that_never_ends_is_stopped_and_the_rest_runs(graded_class):
    eve = autograded(graded_class["course"], "eve")
    assert errors(eve["answer_10_1"]), "the looping cell shows no error: was it stopped?"
    assert not errors(eve["check_10_1"]), "the check of an answer left None should say so, not fail"
    assert all("AssertionError" in errors(eve[f"grade_10_1_{k}"]) for k in (1, 2, 3, 4))
    assert not any(errors(cell) for grade_id, cell in eve.items() if "10_2" in grade_id)


def test_a_graded_cell_replaced_by_pass_is_restored(graded_class):
    replaced = grade_cell("10.2", "the most similar first")
    assert (
        f"Attribute 'checksum' for cell {replaced} has changed" in graded_class["logs"]["autograde"]
    ), "nbgrader's warning about fay's changed graded cell is not in autograde's output"
    fay = autograded(graded_class["course"], "fay")
    assert fay[replaced].source == classroom.requirement_code("10.2", "the most similar first")
    assert "AssertionError" in errors(fay[replaced])


def test_deleted_cells_are_put_back_and_said_so(graded_class):
    log = graded_class["logs"]["autograde"]
    for cell in DELETED:
        assert f"ivy deleted cell {cell} of {ASSIGNMENT}: put back as released" in log, log[-3000:]
    ivy = autograded(graded_class["course"], "ivy")
    assert sorted(ivy) == sorted(autograded(graded_class["course"], "ada"))
    page = " ".join(feedback_page(graded_class["course"], "ivy").split())
    for cell in DELETED:
        assert f"Put back by autograding: the cell below ({cell}) was missing" in page


def test_the_csv_holds_each_learners_total_and_none_for_who_handed_nothing_in(graded_class):
    with open(graded_class["course"] / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    got = scores(graded_class["course"])
    absent = rows.pop(ABSENT)
    assert absent["score"] == absent["raw_score"] == "", absent  # not nbgrader's 0.0
    assert sorted(rows) == sorted(got)
    for learner, row in rows.items():
        assert row["assignment"] == ASSIGNMENT
        assert float(row["score"]) == sum(got[learner].values()), row
        assert float(row["max_score"]) == sum(len(requirements(e)) for e in EXERCISES), row


def mistake_words(exercise_id: str, name: str) -> str:
    return next(m.words for m in exercise(exercise_id).mistakes if m.name == name)


def feedback_page(course, learner: str) -> str:
    page = (course / "feedback" / learner / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_feedback_carries_the_checkers_words(graded_class):
    course = graded_class["course"]
    ada, bob, gus = (feedback_page(course, learner) for learner in ("ada", "bob", "gus"))
    for eid in EXERCISES:
        assert f"✅ exercise {eid}: right!" in ada
        assert f"❌ exercise {eid}:" in bob
    assert mistake_words("10.1", "not scaled") in " ".join(bob.split())
    assert mistake_words("10.2", "the least similar first") in " ".join(bob.split())
    # 5000 printed lines a call: the verdict still comes first, and only a few of the lines follow it
    verdict = f"❌ exercise 10.1: the mean over the positions where mask is 1: {mistake_words('10.1', 'padding averaged in')}"
    assert verdict in " ".join(gus.split())
    assert len(re.findall(r"pooling, step \d+", gus)) == classroom.SHOWN_LINES


def test_validate_shows_a_learner_the_requirement_not_met_and_why(graded_class, tmp_path):
    """What a learner runs before handing in: ``nbgrader validate`` names each failing graded cell with the
    checker's words for that requirement."""
    bob = submission(graded_class["release"], graded_class["learners"]["bob"][0])
    path = tmp_path / NOTEBOOK
    nbformat.write(bob, path)
    run = subprocess.run(
        [sys.executable, "-m", "nbgrader", "validate", str(path)],
        cwd=graded_class["course"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = " ".join((run.stdout + run.stderr).split())
    assert "VALIDATION FAILED" in output, output[-3000:]
    for eid, requirement, name in (
        ("10.1", "scaled to length 1", "not scaled"),
        ("10.2", "the most similar first", "the least similar first"),
    ):
        assert (
            f"exercise {eid}, not met yet: {requirement}: {mistake_words(eid, name)}" in output
        ), output[-3000:]


def reference_lines(source: nbformat.NotebookNode) -> set[str]:
    """The lines only the answer cells hold: code and values of the references (not the text's or setup's)."""
    shown = "\n".join(
        c.source for c in source.cells if not c.metadata.get("nbgrader", {}).get("solution")
    )
    return {
        line.strip()
        for code in classroom.solutions(source).values()
        for line in code.splitlines()
        if len(line.strip()) >= 8
        and not line.strip().startswith(("#", "from ", "import "))
        and line.strip() not in shown
    }


def files_holding(folder, lines: set[str]) -> dict[str, set[str]]:
    found = {}
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            text = (
                text + "\n" + "\n".join(c.source for c in nbformat.reads(text, 4).cells)
                if path.suffix == ".ipynb"
                else text
            )
            hits = {line for line in lines if line in text}
            if hits:
                found[str(path.relative_to(folder))] = hits
    return found


def test_the_release_holds_no_reference_and_the_source_does(tmp_path):
    """Every assignment: each reference line is in source/ and in no file of release/."""
    course = tmp_path / "course"
    assignments = classroom.generate(course)
    classroom.nbgrader(course, "generate_assignment", "*")
    for assignment in assignments:
        source_path = course / "source" / assignment / f"{assignment}.ipynb"
        lines = reference_lines(nbformat.read(source_path, as_version=4))
        assert lines, f"{assignment}: no reference line to search for"
        in_source = files_holding(course / "source" / assignment, lines)
        assert set().union(*in_source.values()) == lines, f"{assignment}: the search misses lines"
        leaked = files_holding(course / "release" / assignment, lines)
        assert not leaked, f"{assignment}: reference code in the release files: {leaked}"
    assert sorted(assignments) == sorted(
        p.stem
        for p in notebook_paths()
        if any(e.startswith(p.name[:2] + ".") for e in all_exercises())
    )


def assignment_marks(number: str) -> list:
    """The tiers its exercises need."""
    names = {
        m for eid, e in all_exercises().items() if eid.startswith(number + ".") for m in e.marks
    }
    return [getattr(pytest.mark, name) for name in sorted(names)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "number",
    [
        pytest.param(p.name[:2], marks=assignment_marks(p.name[:2]))
        for p in notebook_paths()
        if any(e.startswith(p.name[:2] + ".") for e in all_exercises())
    ],
)
def test_every_release_with_the_reference_pasted_in_autogrades_to_full_marks(number, tmp_path):
    """Each assignment's release, its stubs replaced by the references (as a learner who gets everything right
    hands it in), autogrades to full marks from nbgrader's own folders with the class timeout: the set-up cell
    holds all its exercises need."""
    course = tmp_path / "course"
    (assignment,) = classroom.generate(course, [number])
    classroom.nbgrader(course, "generate_assignment", assignment)
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    release = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    submitted = course / "submitted" / "teacher" / assignment
    submitted.mkdir(parents=True)
    nbformat.write(
        submission(release, classroom.solutions(source)), submitted / f"{assignment}.ipynb"
    )
    t0 = time.monotonic()
    classroom.nbgrader(course, "autograde", assignment)
    cells = classroom.timings(course)[f"teacher/{assignment}"]
    slowest = max(cells, key=cells.get)
    print(
        f"{assignment}: autograde {time.monotonic() - t0:.1f} s, slowest cell {slowest} "
        f"{cells[slowest]:.1f} s"
    )
    rows = [row for row in classroom.exercise_scores(course) if row["student_id"] == "teacher"]
    assert rows and all(row["score"] == row["max_score"] > 0 for row in rows), rows
    assert sorted(row["exercise"] for row in rows) == sorted(
        e for e in all_exercises() if e.startswith(number + ".")
    )
