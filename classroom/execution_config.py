"""How nbgrader runs the course's notebooks, wherever it runs them: loaded by this folder's nbgrader_config.py
(the teacher's commands) and installed by `make setup` as the venv's etc/jupyter/nbgrader_config.py, which
nbgrader reads from any folder (a learner's `nbgrader validate`, JupyterLab's Validate button)."""

import warnings

from sqlalchemy.exc import SAWarning

c = get_config()  # noqa: F821 (nbgrader defines get_config when it loads this file)

# Seconds per cell: a cell that runs longer is interrupted and scores 0 (the learner's next cells and the rest
# of the class are still graded). The slowest check cell of the teacher's versions is check_02_1 (it trains
# 02.1's CNN on the training digits): 30 s on a busy 2-core machine; the slowest cell of all is a set-up that
# builds an earlier notebook's file the first time (03's runs notebooks 01 and 02: 92 s), once per machine.
# Measured by tests/test_classroom.py::test_every_release_with_the_reference_pasted_in_autogrades_to_full_marks,
# read back with `python -m helpers.grading.classroom timings`. A learner gets 4 times a minute: a slower right
# answer, a busier machine. nbgrader's own default, 30 s, would stop a right answer's check.
SLOWEST_REFERENCE_S = 70
c.Execute.timeout = 4 * SLOWEST_REFERENCE_S

# The kernel's sockets encrypted with CurveZMQ keys the kernel manager provisions (the kernelspec that
# `ipykernel install` writes declares `supported_encryption: ["curve"]`): without it ipykernel warns, once per
# notebook run, "Kernel is running over TCP without encryption".
c.KernelManager.transport_encryption = "auto"

# nbgrader 0.9.6 builds a new submission's rows while SQLAlchemy 2's autoflush runs, which warns
# "Object of type <SubmittedAssignment> not in session, add operation along ... will not proceed" (three
# tracebacks per new learner); nbgrader adds the submission, and with it those rows, right after
# (Gradebook.add_submission). The warning, and only it, is silenced.
warnings.filterwarnings(
    "ignore",
    message=r"Object of type <\w+> not in session, add operation along",
    category=SAWarning,
)
