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
BATCH_1 = ({0: "batch"},)


# ----------------------------------------------------------------------------------------------- 01.1 CSV rows
class Rows(nn.Module):
    """An answer to 01.1: the MLP behind rows of 784 values in 0..255, right or with one realistic mistake."""

    def __init__(self, mlp, mistake=None):
        super().__init__()
        self.mlp, self.mistake = mlp, mistake

    def forward(self, pixels):
        images = pixels.reshape(-1, 1, 28, 28)
        if self.mistake == "transposed":
            images = images.transpose(2, 3)
        return self.mlp(images if self.mistake == "unscaled" else images / 255)


ROWS = (torch.zeros(3, 784),)
PIXELS = ["pixels"]


def test_rows_right_answers_written_differently_pass(mlp, tmp_path):
    class Scaled(nn.Module):
        def forward(self, rows):
            return rows * (1 / 255)

    # a Sequential of ready-made layers, its batch declared with torch.export.Dim
    sequential = nn.Sequential(Scaled(), nn.Unflatten(1, (1, 28, 28)), mlp)
    batch = torch.export.Dim("rows")
    feedback = check("01.1", export(sequential, (torch.zeros(5, 784),), tmp_path / "a.onnx", PIXELS, LOGITS,
                                    {"input": {0: batch}}))
    assert feedback.ok, str(feedback)

    class View(nn.Module):  # view instead of reshape, the division by 255 after the MLP's own layout
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, pixels):
            return self.mlp(torch.div(pixels, 255.0).view(pixels.shape[0], 1, 28, 28))

    feedback = check("01.1", export(View(mlp), (torch.zeros(2, 784),), tmp_path / "b.onnx", PIXELS, LOGITS,
                                    ({0: "n"},)))
    assert feedback.ok, str(feedback)


@pytest.mark.parametrize("mistake, names, outputs, dynamic, dummy, named", [
    (None, PIXELS, ["scores"], BATCH_1, ROWS, ["expected the outputs ['logits'], found ['scores']"]),
    (None, ["image"], LOGITS, BATCH_1, ROWS, ["expected the inputs ['pixels'], found ['image']"]),
    (None, PIXELS, LOGITS, None, ROWS, ["batch dimension is fixed ({'pixels': 3})"]),
    ("unscaled", PIXELS, LOGITS, BATCH_1, ROWS, ["0..255 values", "divide by 255"]),
    ("transposed", PIXELS, LOGITS, BATCH_1, ROWS, ["column by column", "no transpose"]),
])
def test_rows_mistakes_are_named(mlp, tmp_path, mistake, names, outputs, dynamic, dummy, named):
    feedback = check("01.1", export(Rows(mlp, mistake), dummy, tmp_path / "r.onnx", names, outputs, dynamic))
    assert not feedback.ok
    for words in named:
        assert words in feedback.message, feedback.message


def test_rows_from_an_untrained_model_show_where_they_differ(tmp_path):
    fresh = type(trained_mlp())()  # the same class, fresh random weights
    feedback = check("01.1", export(Rows(fresh), ROWS, tmp_path / "u.onnx", PIXELS, LOGITS, ({0: "batch"},)))
    assert not feedback.ok
    assert "differ from the trained MLP's, first in row" in feedback.message


def test_image_layout_instead_of_rows_is_named(mlp, tmp_path):
    feedback = check("01.1", export(mlp, (torch.zeros(2, 1, 28, 28),), tmp_path / "i.onnx", PIXELS, LOGITS,
                                    ({0: "batch"},)))
    assert not feedback.ok
    assert "expected the input pixels [batch, 784]" in feedback.message


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


def test_two_inputs_right_answers_pass(mlp, tmp_path):
    feedback = check("01.2", export(Temperature(mlp), TWO, tmp_path / "t.onnx", NAMES, PROBS, BOTH))
    assert feedback.ok, str(feedback)

    class Reciprocal(nn.Module):  # multiplies by 1 / temperature, softmax over dim 1, a dummy batch of 3
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, image, temperature):
            return nn.functional.softmax(self.mlp(image) * temperature.reciprocal(), dim=1)

    batch = torch.export.Dim("b")
    feedback = check("01.2", export(Reciprocal(mlp), (torch.zeros(3, 1, 28, 28), torch.ones(3, 1)),
                                    tmp_path / "t5.onnx", NAMES, PROBS, ({0: batch}, {0: batch})))
    assert feedback.ok, str(feedback)

    class LogSoftmax(Reciprocal):  # exp of log_softmax, temperature broadcast from [batch, 1]
        def forward(self, image, temperature):
            return (self.mlp(image) / temperature).log_softmax(-1).exp()

    feedback = check("01.2", export(LogSoftmax(mlp), TWO, tmp_path / "t7.onnx", NAMES, PROBS, ({0: "n"}, {0: "n"})))
    assert feedback.ok, str(feedback)


def test_probabilities_output_name_is_checked(mlp, tmp_path):
    feedback = check("01.2", export(Temperature(mlp), TWO, tmp_path / "t6.onnx", NAMES, LOGITS, BOTH))
    assert not feedback.ok
    assert "expected the outputs ['probabilities'], found ['logits']" in feedback.message


def test_temperature_without_dynamic_batch_is_named(mlp, tmp_path):
    path = export(Temperature(mlp), TWO, tmp_path / "t1.onnx", NAMES, PROBS, ({0: "batch"}, None))
    feedback = check("01.2", path)
    assert not feedback.ok
    assert "fixed ({'temperature': 1})" in feedback.message and "for each input" in feedback.message


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


def test_abstain_right_rewrites_pass(mlp, tmp_path):
    feedback = check("01.3", export(Abstain(mlp, "right"), ONE, tmp_path / "a.onnx", IMAGE, LOGITS, BATCH))
    assert feedback.ok, str(feedback)

    class MaskAbstain(nn.Module):  # multiplies by a 0/1 mask computed from amax
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, image):
            logits = self.mlp(image)
            return logits * (torch.softmax(logits, -1).amax(-1, keepdim=True) >= 0.9).to(logits.dtype)

    class WhereAbstain(MaskAbstain):  # the condition the other way round, the zero a Python float
        def forward(self, image):
            logits = self.mlp(image)
            return torch.where(logits.softmax(1).max(1, keepdim=True).values < 0.9, 0.0, logits)

    for i, module in enumerate((MaskAbstain(mlp), WhereAbstain(mlp))):
        feedback = check("01.3", export(module, (torch.zeros(4, 1, 28, 28),), tmp_path / f"m{i}.onnx", IMAGE,
                                        LOGITS, BATCH))
        assert feedback.ok, str(feedback)


def test_legacy_fallback_is_named(mlp, tmp_path):
    feedback = check("01.3", export(Abstain(mlp), ONE, tmp_path / "a1.onnx", IMAGE, LOGITS, dynamo=False))
    assert not feedback.ok
    assert "no input at all" in feedback.message and "dynamo=False" in feedback.message


def test_legacy_fallback_from_a_real_digit_is_named(mlp, tmp_path):
    digit = (torch.arange(784, dtype=torch.float32).reshape(1, 1, 28, 28) % 7) / 6  # any non-blank image
    feedback = check("01.3", export(Abstain(mlp), (digit,), tmp_path / "a6.onnx", IMAGE, LOGITS, dynamo=False))
    assert not feedback.ok
    assert "{'image': [2, 1, 28, 28]}" in feedback.message and "unrolled" in feedback.message


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
    assert "batch dimension is fixed ({'image': 1})" in feedback.message
