"""Notebook 01's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts."""

from __future__ import annotations

import pytest

from helpers.grading.checks import ex01

EXPORT_CODE = ("output_names", "input_names", "dynamic_shapes", "dynamic_axes", "{0:")


@pytest.mark.parametrize("exercise", ex01.EXERCISES, ids=lambda e: e.id)
def test_no_feedback_hands_over_the_export_call(exercise):
    """Each known mistake's words name what is wrong without the export call's code to write (a property of the
    words themselves, which the generic test compares but does not read)."""
    for mistake in exercise.mistakes:
        assert not any(code in mistake.words for code in EXPORT_CODE), (mistake.name, mistake.words)


@pytest.mark.slow
def test_the_model_as_given_does_not_export(tmp_path):
    """01.3's premise, as its text states it: the wrapper with a loop and an `if` fails to export with
    dynamo=True (a fact about torch, not an answer's verdict)."""
    import torch

    module = ex01.wrappers()[2](ex01.mlp(), "as given")
    with pytest.raises(torch.onnx.OnnxExporterError):
        ex01.export(
            module,
            (torch.zeros(1, 1, 28, 28),),
            tmp_path / "x.onnx",
            ["image"],
            ["logits"],
            ({0: "batch"},),
        )
