"""nbgrader's settings for the course generated from the series; nbgrader reads this file from the folder it runs in
(run every nbgrader command, and the JupyterLab that shows the formgrader, from this folder)."""

from pathlib import Path

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

# Seconds per cell when autograding (a cell that runs longer is interrupted and scores 0; the next cells still
# run). The slowest reference answer cell of the series takes SLOWEST_REFERENCE_S on a 2-core machine
# (python -m helpers.grading.classroom timings): this leaves a learner 4 times that.
SLOWEST_REFERENCE_S = 60
c.Execute.timeout = 4 * SLOWEST_REFERENCE_S
