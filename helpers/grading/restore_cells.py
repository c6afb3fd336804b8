"""The course's remedy for cells a learner deleted, run by ``nbgrader autograde`` before nbgrader's own
``OverwriteCells`` (``classroom/nbgrader_config.py`` lists it among ``Autograde.sanitize_preprocessors``).

nbgrader 0.9.6 puts back the teacher's version of a read-only cell a learner *edited*, but not one a learner
*deleted*: its ``--OverwriteCells.add_missing_cells=True`` restores grade and task cells only (never a check
cell or the set-up), and places a missing grade cell after its predecessor in the source, looked up among the
submission's grade and solution cells: here a check cell, so it fails with a ``KeyError``. This preprocessor
puts back every cell of the release that a submission lacks, where the release has it, with a note above it
that the feedback page shows, and says so in autograde's output.

Its own module: nbgrader takes seconds to import, and ``helpers.grading.classroom`` is imported by every
assignment's set-up cell."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

NOTE = (
    "**Put back by autograding:** the cell below (`{grade_id}`) was missing from this submission; it was run "
    "as released."
)


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


class RestoreMissingCells(NbGraderPreprocessor):
    """Every cell of the released notebook that the submission lacks (the set-up, a text, an answer cell as
    released, a check or a graded cell), inserted after the nearest earlier released cell the submission has,
    a markdown note above it; a warning per cell names the learner and the cell."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        course = CourseDirectory(config=self.config)
        release = (
            Path(course.format_path(course.release_directory, ".", info["assignment"]))
            / f"{info['notebook']}.ipynb"
        )
        if not release.is_file():
            self.log.warning("No released notebook %s: missing cells cannot be put back", release)
            return nb, resources
        released = nbformat.read(release, as_version=4).cells
        present = {_grade_id(cell) for cell in nb.cells} - {None}
        for k, cell in enumerate(released):
            grade_id = _grade_id(cell)
            if grade_id is None or grade_id in present:
                continue
            anchor = next(
                (_grade_id(c) for c in reversed(released[:k]) if _grade_id(c) in present), None
            )
            at = 0
            if anchor is not None:
                at = 1 + max(i for i, c in enumerate(nb.cells) if _grade_id(c) == anchor)
            note = nbformat.v4.new_markdown_cell(NOTE.format(grade_id=grade_id))
            nb.cells[at:at] = [note, copy.deepcopy(cell)]
            present.add(grade_id)
            self.log.warning(
                "%s deleted cell %s of %s: put back as released",
                info.get("student", "?"),
                grade_id,
                info["notebook"],
            )
        return nb, resources
