"""The checks of notebook 01 name the mistake in realistic wrong answers (and accept the right ones)."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from helpers.exercises import check
from solutions.ex01 import trained_mlp


@pytest.fixture(scope="module")
def mlp():
    return trained_mlp()


def export(module, dummies, path, names, outputs, dynamic=None, dynamo=True):
    """torch.onnx.export as a learner writes it; returns the path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer warnings
        if dynamo:
            torch.onnx.export(module.eval(), dummies, path, input_names=names, output_names=outputs, dynamo=True,
                              dynamic_shapes=dynamic, external_data=False, verbose=False)
        else:
            torch.onnx.export(module.eval(), dummies, path, input_names=names, output_names=outputs, dynamo=False,
                              dynamic_axes={names[0]: {0: "batch"}})
    return path


IMAGE = ["image"]
LOGITS = ["logits"]


# ----------------------------------------------------------------------------------------------- 01.1 fixed batch
def test_static_batch_of_7_passes(mlp, tmp_path):
    feedback = check("01.1", export(mlp, (torch.zeros(7, 1, 28, 28),), tmp_path / "a.onnx", IMAGE, LOGITS))
    assert feedback.ok, str(feedback)
    assert feedback.details == ["input fixed to [7, 1, 28, 28], the dummy's shape, and ONNX Runtime refuses a batch of 1"]


def test_static_export_from_a_batch_of_1_is_named_as_such(mlp, tmp_path):
    feedback = check("01.1", export(mlp, (torch.zeros(1, 1, 28, 28),), tmp_path / "b.onnx", IMAGE, LOGITS))
    assert not feedback.ok
    assert "dummy batch of 1" in feedback.message and "torch.zeros(7, 1, 28, 28)" in feedback.message


def test_dynamic_shapes_left_in_is_named(mlp, tmp_path):
    path = export(mlp, (torch.zeros(7, 1, 28, 28),), tmp_path / "c.onnx", IMAGE, LOGITS, dynamic=({0: "batch"},))
    feedback = check("01.1", path)
    assert not feedback.ok
    assert "still dynamic ('batch')" in feedback.message and "without dynamic_shapes" in feedback.message


def test_untrained_model_is_named(tmp_path):
    fresh = type(trained_mlp())()  # the same class, fresh random weights
    feedback = check("01.1", export(fresh, (torch.zeros(7, 1, 28, 28),), tmp_path / "d.onnx", IMAGE, LOGITS))
    assert not feedback.ok
    assert "wrap the trained `model`" in feedback.message


# ----------------------------------------------------------------------------------------------- 01.2 two inputs
class Temperature(nn.Module):
    def __init__(self, mlp, mistake=None):
        super().__init__()
        self.mlp, self.mistake = mlp, mistake

    def forward(self, image, temperature):
        logits = self.mlp(image)
        if self.mistake == "multiply":
            return torch.softmax(logits * temperature, dim=-1)
        if self.mistake == "dim0":
            return torch.softmax(logits / temperature, dim=0)
        return torch.softmax(logits / temperature, dim=-1)


TWO = (torch.zeros(1, 1, 28, 28), torch.ones(1, 1))
BOTH = ({0: "batch"}, {0: "batch"})
NAMES = ["image", "temperature"]
PROBS = ["probabilities"]


def test_two_inputs_right_answer_passes(mlp, tmp_path):
    feedback = check("01.2", export(Temperature(mlp), TWO, tmp_path / "t.onnx", NAMES, PROBS, BOTH))
    assert feedback.ok, str(feedback)


def test_temperature_without_dynamic_batch_is_named(mlp, tmp_path):
    path = export(Temperature(mlp), TWO, tmp_path / "t1.onnx", NAMES, PROBS, ({0: "batch"}, None))
    feedback = check("01.2", path)
    assert not feedback.ok
    assert "['temperature'] is fixed to [1]" in feedback.message and "one entry per input" in feedback.message


def test_multiplying_by_the_temperature_is_named(mlp, tmp_path):
    path = export(Temperature(mlp, "multiply"), TWO, tmp_path / "t2.onnx", NAMES, PROBS, BOTH)
    feedback = check("01.2", path)
    assert not feedback.ok
    assert "multiplies the logits by the temperature" in feedback.message


def test_softmax_over_the_batch_is_named(mlp, tmp_path):
    path = export(Temperature(mlp, "dim0"), TWO, tmp_path / "t3.onnx", NAMES, PROBS, BOTH)
    feedback = check("01.2", path)
    assert not feedback.ok
    assert "sum to 1" in feedback.message and "dim=-1" in feedback.message


def test_one_input_model_is_told_which_inputs_are_expected(mlp, tmp_path):
    feedback = check("01.2", export(mlp, (torch.zeros(1, 1, 28, 28),), tmp_path / "t4.onnx", IMAGE, PROBS,
                                    ({0: "batch"},)))
    assert not feedback.ok
    assert "expected the inputs ['image', 'temperature']" in feedback.message and "found ['image']" in feedback.message


# ----------------------------------------------------------------------------------------------- 01.3 abstain
class Abstain(nn.Module):
    """The exercise's model as given (loop + if), or a rewrite with one of the usual mistakes."""

    def __init__(self, mlp, mistake="as given"):
        super().__init__()
        self.mlp, self.mistake = mlp, mistake

    def forward(self, image):
        logits = self.mlp(image)
        if self.mistake == "as given":
            rows = []
            for row in logits:
                rows.append(row if row.softmax(-1).max() >= 0.9 else torch.zeros_like(row))
            return torch.stack(rows)
        score = logits.max(-1, keepdim=True).values if self.mistake == "logit" else \
            logits.softmax(-1).max(-1, keepdim=True).values
        sure = score < 0.9 if self.mistake == "reversed" else score >= 0.9
        return torch.where(sure, logits, torch.zeros_like(logits))


ONE = (torch.zeros(1, 1, 28, 28),)
BATCH = ({0: "batch"},)


def test_the_model_as_given_does_not_export(mlp, tmp_path):
    with pytest.raises(torch.onnx.OnnxExporterError):
        export(Abstain(mlp), ONE, tmp_path / "x.onnx", IMAGE, LOGITS, BATCH)


def test_abstain_right_rewrite_passes(mlp, tmp_path):
    feedback = check("01.3", export(Abstain(mlp, "right"), ONE, tmp_path / "a.onnx", IMAGE, LOGITS, BATCH))
    assert feedback.ok, str(feedback)


def test_legacy_fallback_is_named(mlp, tmp_path):
    feedback = check("01.3", export(Abstain(mlp), ONE, tmp_path / "a1.onnx", IMAGE, LOGITS, dynamo=False))
    assert not feedback.ok
    assert "no input at all" in feedback.message and "dynamo=False" in feedback.message


def test_legacy_fallback_from_a_real_digit_is_named(mlp, tmp_path):
    digit = (torch.arange(784, dtype=torch.float32).reshape(1, 1, 28, 28) % 7) / 6  # any non-blank image
    feedback = check("01.3", export(Abstain(mlp), (digit,), tmp_path / "a6.onnx", IMAGE, LOGITS, dynamo=False))
    assert not feedback.ok
    assert "fails on a batch of 2" in feedback.message and "unrolled" in feedback.message


def test_plain_mlp_is_told_nothing_abstains(mlp, tmp_path):
    feedback = check("01.3", export(mlp, ONE, tmp_path / "a2.onnx", IMAGE, LOGITS, BATCH))
    assert not feedback.ok
    assert "no row is all zeros" in feedback.message


def test_threshold_on_the_logit_is_named(mlp, tmp_path):
    feedback = check("01.3", export(Abstain(mlp, "logit"), ONE, tmp_path / "a3.onnx", IMAGE, LOGITS, BATCH))
    assert not feedback.ok
    assert "top softmax probability below 0.9" in feedback.message and "not the largest logit" in feedback.message


def test_reversed_condition_is_named(mlp, tmp_path):
    feedback = check("01.3", export(Abstain(mlp, "reversed"), ONE, tmp_path / "a4.onnx", IMAGE, LOGITS, BATCH))
    assert not feedback.ok
    assert "condition is reversed" in feedback.message


def test_static_batch_is_named(mlp, tmp_path):
    feedback = check("01.3", export(Abstain(mlp, "right"), ONE, tmp_path / "a5.onnx", IMAGE, LOGITS))
    assert not feedback.ok
    assert "batch dimension is fixed to 1" in feedback.message
