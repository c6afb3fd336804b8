"""nbgrader's settings for the course generated from the series; nbgrader reads this file from the folder it runs in
(run every nbgrader command, and the JupyterLab that shows the formgrader, from this folder)."""

from pathlib import Path

from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    OverwriteCells,
    OverwriteKernelspec,
)

c = get_config()  # noqa: F821 (nbgrader defines get_config when it loads this file)

COURSE = Path(__file__).resolve().parent
c.CourseDirectory.root = str(COURSE)
c.CourseDirectory.course_id = "onnx-pdf"
# A writable exchange inside the course: without one, the formgrader's release and collect pages log a
# traceback. A class that hands files out through a learning platform uses zip_collect instead (TEACHING.md).
c.Exchange.root = str(COURSE / "exchange")

# zip_collect: a downloaded submission is named <student id>_<assignment notebook>, e.g.
# ada-lovelace_00_inspect_onnx_file.ipynb (a student id: letters, digits and '-'; no '_').
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9-]+)_(?P<file_id>\d\d_\w+\.ipynb)$"
)

# How every nbgrader run of the course executes notebooks (per-cell timeout, kernel transport), shared with the
# learners' set-up: execution_config.py
load_subconfig(str(COURSE / "execution_config.py"))  # noqa: F821 (nbgrader defines it too)

# grades.csv: a learner who handed nothing in for an assignment gets empty scores, not nbgrader's 0.0
c.ExportApp.plugin_class = "helpers.grading.grades_export.CsvExport"

# A cell a learner deleted is put back as released before nbgrader's OverwriteCells (which restores edited
# cells, not deleted ones), with a note the feedback shows and a warning in autograde's output: nbgrader's
# default list with helpers/grading/restore_cells.py's preprocessor before OverwriteCells
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    "helpers.grading.restore_cells.RestoreMissingCells",
    OverwriteCells,
    CheckCellMetadata,
]
