"""The course's ``nbgrader export`` (``classroom/nbgrader_config.py`` names it as ``ExportApp.plugin_class``).

Its own module: nbgrader takes seconds to import, and ``helpers.grading.classroom`` is imported by every
assignment's set-up cell."""

from __future__ import annotations

import csv

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins.export import CsvExportPlugin

from helpers.data.atomic import atomic_path


class CsvExport(CsvExportPlugin):
    """nbgrader's grades.csv, the same rows and columns, except that a learner who handed nothing in for an
    assignment gets empty scores: nbgrader writes 0.0, which reads as a submission that earned nothing."""

    def export(self, gradebook: Gradebook) -> None:
        super().export(gradebook)
        path = self.to or "grades.csv"
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            fields, rows = reader.fieldnames, list(reader)
        for row in rows:
            try:
                gradebook.find_submission(row["assignment"], row["student_id"])
            except MissingEntry:
                row.update(raw_score="", late_submission_penalty="", score="")
        with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:  # complete or untouched
            writer = csv.DictWriter(f, fields, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
