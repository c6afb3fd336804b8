"""The assignment cells' own code, without nbgrader (fast): what a learner reads from the check cell.

The whole course, run by nbgrader itself, is tests/test_classroom.py's (slow)."""

from __future__ import annotations

import onnx

from helpers.grading import classroom
from helpers.grading.exercises import check


def test_the_repeat_hint_names_the_learners_variable(capsys):
    """A ModelProto has a class attribute ``__name__``: the hint names the variable, not ``ModelProto``."""
    feedback = classroom.graded("00.1", onnx.ModelProto())
    printed = capsys.readouterr().out
    assert f'check("00.1", answer_00_1, seed={feedback.seed}) repeats these cases' in printed
    assert "ModelProto" not in printed
    # in a notebook, where the variable's name is unknown, the hint says `answer`, not the class name
    plain = check("00.1", onnx.ModelProto(), seed=feedback.seed)
    assert f'check("00.1", answer, seed={feedback.seed})' in str(plain)
