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

# Seconds per cell when autograding: a cell that runs longer is interrupted and scores 0 (the learner's next
# cells and the rest of the class are still graded). The slowest cell of the ten teacher's versions is
# check_02_1 (it trains 02.1's CNN on the training digits): about a minute on a busy 2-core machine (measured
# by tests/test_classroom.py::test_every_release_with_the_reference_pasted_in_autogrades_to_full_marks, read back with
# `python -m helpers.grading.classroom timings`). A learner gets 4 times that: a slower right answer, a
# busier machine.
SLOWEST_REFERENCE_S = 70
c.Execute.timeout = 4 * SLOWEST_REFERENCE_S
