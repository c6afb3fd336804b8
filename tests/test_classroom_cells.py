"""The assignment cells' own code, without nbgrader (fast): what a learner reads from the check cell.

The whole course, run by nbgrader itself, is tests/test_classroom.py's (slow)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import onnx

from helpers.grading import classroom
from helpers.grading.exercises import all_exercises, check, listed
from helpers.pipeline.artifacts import notebook_paths


def test_the_repeat_hint_names_the_learners_variable(capsys):
    """A ModelProto has a class attribute ``__name__``: the hint names the variable, not ``ModelProto``."""
    feedback = classroom.graded("00.1", onnx.ModelProto())
    printed = capsys.readouterr().out
    assert f'check("00.1", answer_00_1, seed={feedback.seed}) repeats these cases' in printed
    assert "ModelProto" not in printed
    # in a notebook, where the variable's name is unknown, the hint says `answer`, not the class name
    plain = check("00.1", onnx.ModelProto(), seed=feedback.seed)
    assert f'check("00.1", answer, seed={feedback.seed})' in str(plain)


def resolved_config(folder, config_path) -> dict:
    """The settings nbgrader's ``validate`` resolves when run in ``folder``, with ``config_path`` as the venv's
    Jupyter config folder (JUPYTER_CONFIG_PATH stands in for what `make setup` installs there)."""
    code = (
        "import json\n"
        "from nbgrader.apps.validateapp import ValidateApp\n"
        "app = ValidateApp()\n"
        "app.initialize([])\n"
        "c = app.config\n"
        "print(json.dumps([c.Execute.get('timeout'), c.KernelManager.get('transport_encryption'),"
        " c.ExportApp.get('plugin_class')]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env={**os.environ, "JUPYTER_CONFIG_PATH": str(config_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "No nbgrader_config.py file found" not in run.stderr, run.stderr
    return dict(zip(("timeout", "transport_encryption", "export"), json.loads(run.stdout)))


def test_a_learners_validate_anywhere_and_the_teachers_use_the_course_settings(tmp_path):
    """Where a learner runs ``nbgrader validate`` (any folder, no nbgrader_config.py), the per-cell limit is the
    class's, not nbgrader's 30 s, and the kernel's sockets are encrypted (no "running over TCP" warning)."""
    venv_etc = tmp_path / "etc-jupyter"
    venv_etc.mkdir()
    shutil.copyfile(
        classroom.COURSE_TEMPLATE / "execution_config.py", venv_etc / "nbgrader_config.py"
    )
    learner = tmp_path / "learner"
    learner.mkdir()
    course = tmp_path / "course"
    course.mkdir()
    for name in classroom.CONFIG_FILES:
        shutil.copyfile(classroom.COURSE_TEMPLATE / name, course / name)
    for folder, export in ((learner, None), (course, "helpers.grading.grades_export.CsvExport")):
        got = resolved_config(folder, venv_etc)
        assert got["timeout"] >= 4 * 60 > 30, got
        assert got["transport_encryption"] == "auto", got
        assert got["export"] == export, got
    # the teacher's course alone, without the learners' file installed
    alone = resolved_config(course, tmp_path / "nothing-here")
    assert alone == got, alone


def test_each_release_carries_the_set_up_its_exercises_use():
    """The set-up cell: the lesson's imports, the files of earlier notebooks the checks read (built as the
    lesson builds them), the names the texts refer to; it compiles for every assignment."""
    setups = {
        path.name[:2]: classroom.setup_code(path, list(listed(path)))
        for path in notebook_paths()
        if any(e.startswith(path.name[:2] + ".") for e in all_exercises())
    }
    for number, code in setups.items():
        compile(code, f"setup of {number}", "exec")
        assert code.endswith("from helpers.grading.exercises import check"), code
    # 00.3 breaks "the tiny model", as notebook 00 writes it (copy.deepcopy(tiny)); 00.2 interprets notebook 01's
    # file, which the set-up builds the way notebook 00 does
    assert "import copy" in setups["00"].splitlines()
    assert "tiny = helper.make_model(" in setups["00"]
    assert 'mlp_path = ensure_artifact("mnist_mlp_pytorch.onnx")' in setups["00"]
    # 03's checks read notebook 01's file and (a known mistake) notebook 02's: notebook 03's own Setup statement
    assert 'ensure_artifact("mnist_mlp_pytorch.onnx")' in setups["03"]
    assert 'ensure_artifact("mnist_mlp_keras.onnx")' in setups["03"]
