"""The nbgrader course, end to end with nbgrader's own commands, on assignment 00 (it grades in seconds).

A class of six learners, each made from the release version, collected with ``zip_collect``, autograded,
given feedback and exported; each learner's score is read from the gradebook. Also: the release files hold
none of the references' code, which the source files do hold; every assignment's source version autogrades to
full marks (slow: run once, see ``test_every_source_version_autogrades_to_full_marks``).
"""

from __future__ import annotations

import csv
import html
import re
import shutil
import time
import zipfile

import nbformat
import pytest
from conftest import NEEDS  # the tiers an exercise's checks need, by notebook number

from helpers.grading import classroom
from helpers.grading.exercises import all_exercises
from helpers.pipeline.artifacts import built_artifact, notebook_paths

ASSIGNMENT = "00_inspect_onnx_file"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
TIMEOUT_S = 30  # seconds per cell in this test: the looping learner's cell is stopped after it
ALL_RIGHT = ("00.1", "00.2", "00.3")

# exercise -> (a piece of the reference, what a learner wrote instead, the words check() says about it):
# each breaks one requirement the exercise's text states
SLIPS = {
    "00.1": ('"probabilities"', '"probs"', "expected input 'x' and output 'probabilities'"),
    "00.2": (
        'b = x[1].T if attrs.get("transB") else x[1]',
        "b = x[1]",
        "the first node it gets wrong is node",
    ),
    "00.3": (
        '"opset_5": "InferenceSession"',
        '"opset_5": "check_model"',
        "not yet right for opset_5",
    ),
}
RAISES = {
    "00.1": "W = np.arange(12, dtype=np.float32).reshape(4, 4)\nanswer = W",
    "00.2": "def interpret(model, image):\n    return model.graph.nodes\n\n\nanswer = interpret",
}
LOOPS = "while True:\n    pass"


def answer_cell(eid: str) -> str:
    return f"answer_{eid.replace('.', '_')}"


def check_cell(eid: str) -> str:
    return f"check_{eid.replace('.', '_')}"


def right(reference: dict, eids) -> dict:
    return {answer_cell(e): reference[answer_cell(e)] for e in eids}


def slipped(reference: dict, eid: str) -> str:
    piece, instead, _ = SLIPS[eid]
    code = reference[answer_cell(eid)]
    assert piece in code, f"the reference of {eid} changed: {piece!r} is not in it any more"
    return code.replace(piece, instead)


def the_class(reference: dict) -> dict[str, tuple[dict, dict]]:
    """learner -> (cell sources replacing the release's, expected points per exercise)."""
    return {
        "ada": (right(reference, ALL_RIGHT), {"00.1": 1, "00.2": 1, "00.3": 1}),
        "bob": ({answer_cell(e): slipped(reference, e) for e in SLIPS}, {e: 0 for e in ALL_RIGHT}),
        "cy": ({}, {e: 0 for e in ALL_RIGHT}),  # the release, untouched: its stubs raise
        "dee": (
            {**right(reference, ["00.3"]), **{answer_cell(e): c for e, c in RAISES.items()}},
            {"00.1": 0, "00.2": 0, "00.3": 1},
        ),
        "eve": (
            {**right(reference, ["00.2", "00.3"]), answer_cell("00.1"): LOOPS},
            {"00.1": 0, "00.2": 1, "00.3": 1},
        ),
        "fay": (  # a wrong 00.3 whose autograder cell was replaced by `pass`
            {
                **right(reference, ["00.1", "00.2"]),
                answer_cell("00.3"): slipped(reference, "00.3"),
                check_cell("00.3"): "pass",
            },
            {"00.1": 1, "00.2": 1, "00.3": 0},
        ),
    }


STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # what nbgrader leaves of a solution


def submission(release: nbformat.NotebookNode, sources: dict) -> nbformat.NotebookNode:
    """A learner's notebook: the release version, each answer cell of ``sources`` with its code in place of
    the stub, any other cell of ``sources`` replaced whole."""
    notebook = nbformat.from_dict(release)
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
    built_artifact(
        "mnist_mlp_pytorch.onnx"
    )  # exercise 00.2's check reads it: missing, this names notebook 01
    course = tmp_path_factory.mktemp("course")
    seconds = {}
    t0 = time.monotonic()
    classroom.generate(course, ["00"])
    classroom.nbgrader(course, "generate_assignment", ASSIGNMENT)
    seconds["generate + release"] = time.monotonic() - t0
    source = nbformat.read(course / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    learners = the_class(classroom.solutions(source))

    # what a teacher downloads from a learning platform: one zip with two learners' files, four loose files
    archive = course / "downloaded" / ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "first-batch.zip", "w") as batch:
        for learner in ("ada", "bob"):
            text = nbformat.writes(submission(release, learners[learner][0]))
            batch.writestr(f"{learner}_{NOTEBOOK}", text)
    for learner in ("cy", "dee", "eve", "fay"):
        nbformat.write(submission(release, learners[learner][0]), archive / f"{learner}_{NOTEBOOK}")

    logs = {}
    for step, args in {
        "zip_collect": ["zip_collect", ASSIGNMENT],
        "autograde": ["autograde", ASSIGNMENT, f"--Execute.timeout={TIMEOUT_S}"],
        "generate_feedback": ["generate_feedback", ASSIGNMENT],
        "export": ["export", "--to", str(course / "grades.csv")],
    }.items():
        t0 = time.monotonic()
        logs[step] = classroom.nbgrader(course, *args)
        seconds[step] = time.monotonic() - t0
    print("class proof, seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    return {"course": course, "learners": learners, "logs": logs, "source": source}


def grades(course) -> dict[str, dict[str, float]]:
    """learner -> {exercise: points} from the gradebook (nbgrader's API)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {
            student.id: {
                grade.name.removeprefix("check_").replace("_", "."): grade.score
                for notebook in gradebook.find_submission(ASSIGNMENT, student.id).notebooks
                for grade in notebook.grades
            }
            for student in gradebook.students
        }


def test_each_learner_scores_what_they_earned(graded_class):
    got = grades(graded_class["course"])
    table = {
        learner: (sum(want.values()), sum(got.get(learner, {}).values()))
        for learner, (_, want) in graded_class["learners"].items()
    }
    print(
        "learner: expected, graded -> " + ", ".join(f"{k}: {w}, {g}" for k, (w, g) in table.items())
    )
    assert sorted(got) == sorted(graded_class["learners"]), (
        "not every learner was collected and graded"
    )
    for learner, (_, want) in graded_class["learners"].items():
        assert got[learner] == want, f"{learner}: graded {got[learner]}, expected {want}"


def test_a_cell_that_never_ends_is_stopped_and_scores_0(graded_class):
    course = graded_class["course"]
    eve = nbformat.read(course / "autograded" / "eve" / ASSIGNMENT / NOTEBOOK, as_version=4)
    errors = {
        c.metadata["nbgrader"]["grade_id"]: [o.ename for o in c.outputs if o.output_type == "error"]
        for c in eve.cells
        if c.cell_type == "code"
    }
    assert errors[answer_cell("00.1")], "the looping cell shows no error: was it stopped?"
    assert "AssertionError" in errors[check_cell("00.1")], errors  # answer None: its check fails
    assert not errors[check_cell("00.2")] and not errors[check_cell("00.3")], errors  # the rest ran


def test_a_check_cell_replaced_by_pass_is_restored(graded_class):
    course = graded_class["course"]
    assert re.search(
        r"Attribute 'checksum' for cell check_00_3 has changed", graded_class["logs"]["autograde"]
    ), "nbgrader's warning about fay's changed check cell is not in autograde's output"
    fay = nbformat.read(course / "autograded" / "fay" / ASSIGNMENT / NOTEBOOK, as_version=4)
    restored = next(
        c for c in fay.cells if c.metadata.get("nbgrader", {}).get("grade_id") == check_cell("00.3")
    )
    assert restored.source == classroom.autograder_code("00.3")
    assert grades(course)["fay"]["00.3"] == 0


def test_the_csv_holds_each_learners_total(graded_class):
    with open(graded_class["course"] / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    got = grades(graded_class["course"])
    assert sorted(rows) == sorted(got)
    for learner, row in rows.items():
        assert row["assignment"] == ASSIGNMENT
        assert float(row["score"]) == sum(got[learner].values()), row
        assert float(row["max_score"]) == len(ALL_RIGHT), row


def test_feedback_carries_the_checkers_words(graded_class):
    folder = graded_class["course"] / "feedback"
    page = {
        learner: html.unescape(
            re.sub(
                r"<[^>]+>", "", (folder / learner / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
            )
        )
        for learner in ("ada", "bob")
    }
    for eid in ALL_RIGHT:
        assert f"✅ exercise {eid}: right!" in page["ada"]
        assert f"❌ exercise {eid}:" in page["bob"]
        assert SLIPS[eid][2] in page["bob"], f"the feedback does not say what check() says of {eid}"


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


@pytest.mark.slow
@pytest.mark.parametrize(
    "number",
    [
        pytest.param(p.name[:2], marks=[getattr(pytest.mark, m) for m in NEEDS.get(p.name[:2], [])])
        for p in notebook_paths()
    ],
)
def test_every_source_version_autogrades_to_full_marks(number, tmp_path):
    """The teacher's version, submitted as a learner's, autogrades to full marks with the class timeout."""
    course = tmp_path / "course"
    (assignment,) = classroom.generate(course, [number])
    classroom.nbgrader(course, "generate_assignment", assignment)
    submitted = course / "submitted" / "teacher" / assignment
    submitted.mkdir(parents=True)
    shutil.copy(course / "source" / assignment / f"{assignment}.ipynb", submitted)
    t0 = time.monotonic()
    classroom.nbgrader(course, "autograde", assignment)
    cells = classroom.timings(course)[f"teacher/{assignment}"]
    slowest = max(cells, key=cells.get)
    print(
        f"{assignment}: autograde {time.monotonic() - t0:.1f} s, slowest cell {slowest} "
        f"{cells[slowest]:.1f} s"
    )
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        graded = gradebook.find_submission(assignment, "teacher")
        assert graded.score == graded.max_score > 0, {
            g.name: g.score for n in graded.notebooks for g in n.grades
        }
