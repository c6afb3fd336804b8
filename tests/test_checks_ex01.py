"""The checks of notebook 01: every requirement the exercise text states, broken alone, is refused with feedback
naming it (the tables below: each answer is a real torch.onnx.export of the trained MLP); right answers written
differently from solutions/ pass."""
from __future__ import annotations

import warnings

import onnx
import pytest
import torch
from torch import nn

from helpers.grading.exercises import check
from solutions.ex01 import trained_mlp
from tables import refused, unique


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
                              dynamic_axes={name: {0: "batch"} for name in names})
    return path


IMAGE, LOGITS, BATCH = ["image"], ["logits"], ({0: "batch"},)


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
        if self.mistake == "normalised again":
            images = (images / 255 - 0.1307) / 0.3081
        elif self.mistake == "divided by 256":
            images = images / 256
        elif self.mistake != "unscaled":
            images = images / 255
        logits = self.mlp(images.float() if self.mistake == "uint8 dummy" else images)
        if self.mistake == "softmax":
            return logits.softmax(-1)
        if self.mistake == "float64":
            return logits.double()
        return logits.unsqueeze(1) if self.mistake == "extra axis" else logits


ROWS, PIXELS = (torch.zeros(3, 784),), ["pixels"]


def rows(mistake=None, dummy=ROWS, names=PIXELS, outputs=LOGITS, dynamic=BATCH, untrained=False, **kwargs):
    def build(mlp, path):
        model = type(mlp)() if untrained else mlp  # the same class, fresh random weights
        return export(Rows(model, mistake), dummy, path, names, outputs, dynamic, **kwargs)
    return build


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
    # the notebook's own export call applied to the new case, the file checked as section 4 does
    onnx_program = torch.onnx.export(Rows(mlp), (torch.zeros(1, 784),), tmp_path / "c.onnx",
                                     input_names=["pixels"], output_names=["logits"], dynamo=True,
                                     dynamic_shapes=({0: "batch"},), external_data=False)
    onnx.checker.check_model(tmp_path / "c.onnx", full_check=True)
    assert onnx_program is not None
    feedback = check("01.1", tmp_path / "c.onnx")
    assert feedback.ok, str(feedback)
    # the legacy exporter: nothing data-dependent here, so its file is right too
    feedback = check("01.1", rows(dynamo=False)(mlp, tmp_path / "d.onnx"))
    assert feedback.ok, str(feedback)


# The exercise text's requirements for 01.1, and a wrong answer breaking each alone, refused naming it.
ROWS_REQUIREMENTS = {
    "input named pixels": (rows(names=["image"]), ["expected the inputs ['pixels'], found ['image']"]),
    "pixels float32": (rows("uint8 dummy", dummy=(torch.zeros(3, 784, dtype=torch.uint8),)),
                       ["input 'pixels' float32", "found tensor(uint8)"]),
    "pixels [batch, 784]": (lambda mlp, path: export(mlp, (torch.zeros(2, 1, 28, 28),), path, PIXELS, LOGITS, BATCH),
                            ["input pixels [batch, 784]", "found ['batch', 1, 28, 28]"]),
    "a batch of any size": (rows(dynamic=None), ["batch dimension is fixed ({'pixels': 3})"]),
    "output named logits": (rows(outputs=["scores"]), ["expected the outputs ['logits'], found ['scores']"]),
    "logits [batch, 10]": (rows("extra axis"), ["output logits [batch, 10]"]),
    "logits float32": (rows("float64"), ["output 'logits' float32", "found tensor(double)"]),
    "pixels in 0..255": (rows("unscaled"), ["0..255 values", "divide by 255"]),
    "the image row after row": (rows("transposed"), ["column by column", "no transpose"]),
    "the trained model": (rows(untrained=True), ["differ from the trained MLP's, first in row"]),
    "logits, not probabilities": (rows("softmax"), ["returns probabilities", "'logits'"]),
}
ROWS_OWN_ROUND = {
    "forgot to divide by 255": ROWS_REQUIREMENTS["pixels in 0..255"],
    "transposed rows": ROWS_REQUIREMENTS["the image row after row"],
    "softmax at the end": ROWS_REQUIREMENTS["logits, not probabilities"],
    "uint8 dummy": ROWS_REQUIREMENTS["pixels float32"],
    "normalised before the MLP normalises again": (rows("normalised again"),
                                                    ["logits differ from the trained MLP's, first in row"]),
    "divided by 256": (rows("divided by 256"), ["logits differ from the trained MLP's, first in row"]),
    "output unsqueezed": ROWS_REQUIREMENTS["logits [batch, 10]"],
    "double output": ROWS_REQUIREMENTS["logits float32"],
    "fresh untrained MLP": ROWS_REQUIREMENTS["the trained model"],
}


@pytest.mark.parametrize("requirement", unique(ROWS_REQUIREMENTS, ROWS_OWN_ROUND))
def test_rows_requirement_broken_alone_is_named(mlp, tmp_path, requirement):
    build, words = {**ROWS_REQUIREMENTS, **ROWS_OWN_ROUND}[requirement]
    refused("01.1", build(mlp, tmp_path / "rows.onnx"), *words)


# ----------------------------------------------------------------------------------------------- 01.2 two inputs
class Temperature(nn.Module):
    def __init__(self, mlp, mistake=None):
        super().__init__()
        self.mlp, self.mistake = mlp, mistake

    def forward(self, image, temperature):
        logits = self.mlp(image.reshape(-1, 1, 28, 28) if self.mistake == "flat image" else image)
        if self.mistake == "multiply":
            scaled = logits * temperature
        elif self.mistake == "ignored":
            scaled = logits + 0 * temperature
        elif self.mistake == "first only":
            scaled = logits / temperature[0]
        elif self.mistake == "vector":  # temperature [batch]: one more axis to divide [batch, 10] by it
            scaled = logits / temperature.unsqueeze(-1)
        else:
            scaled = logits / temperature
        if self.mistake == "log_softmax":
            return torch.log_softmax(scaled, dim=-1)
        probabilities = torch.softmax(scaled, dim=0 if self.mistake == "dim0" else -1)
        return probabilities.double() if self.mistake == "float64" else probabilities


TWO, BOTH = (torch.zeros(1, 1, 28, 28), torch.ones(1, 1)), ({0: "batch"}, {0: "batch"})
NAMES, PROBS = ["image", "temperature"], ["probabilities"]


def temperature(mistake=None, dummy=TWO, names=NAMES, outputs=PROBS, dynamic=BOTH, untrained=False):
    def build(mlp, path):
        return export(Temperature(type(mlp)() if untrained else mlp, mistake), dummy, path, names, outputs, dynamic)
    return build


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


# The exercise text's requirements for 01.2, and a wrong answer breaking each alone, refused naming it.
TEMPERATURE_REQUIREMENTS = {
    "inputs image and temperature, in that order": (temperature(names=["temperature", "image"]),
                                                    ["expected the inputs ['image', 'temperature']"]),
    "image [batch, 1, 28, 28]": (temperature("flat image", dummy=(torch.zeros(1, 784), torch.ones(1, 1))),
                                 ["input image [batch, 1, 28, 28]", "found ['batch', 784]"]),
    "temperature float32 [batch, 1]": (temperature("vector", dummy=(torch.zeros(2, 1, 28, 28), torch.ones(2))),
                                       ["input temperature [batch, 1]"]),
    "a dynamic batch for both inputs": (temperature(dynamic=({0: "batch"}, None)),
                                        ["fixed ({'temperature': 1})", "for each input"]),
    "output named probabilities": (temperature(outputs=LOGITS),
                                   ["expected the outputs ['probabilities'], found ['logits']"]),
    "probabilities float32": (temperature("float64"), ["output 'probabilities' float32"]),
    "softmax over the 10 classes": (temperature("dim0"), ["sum to 1", "dim=-1"]),
    "divided by the temperature": (temperature("multiply"), ["multiplies the logits by the temperature"]),
    "the temperature used": (temperature("ignored"), ["ignores the temperature"]),
    "one temperature per image": (temperature("first only"), ["first image's temperature", "each image"]),
    "the trained model": (temperature(untrained=True), ["differ from softmax(logits / temperature) of the trained"]),
}
TEMPERATURE_OWN_ROUND = {
    "multiplied": TEMPERATURE_REQUIREMENTS["divided by the temperature"],
    "temperature ignored": TEMPERATURE_REQUIREMENTS["the temperature used"],
    "softmax over the batch": TEMPERATURE_REQUIREMENTS["softmax over the 10 classes"],
    "the first temperature for the whole batch": TEMPERATURE_REQUIREMENTS["one temperature per image"],
    "temperature as a [batch] vector": TEMPERATURE_REQUIREMENTS["temperature float32 [batch, 1]"],
    "log-probabilities returned": (temperature("log_softmax"), ["sum to 1"]),
    "only the image's batch dynamic": TEMPERATURE_REQUIREMENTS["a dynamic batch for both inputs"],
    "the one-input MLP exported": (lambda mlp, path: export(mlp, (torch.zeros(1, 1, 28, 28),), path, IMAGE, PROBS,
                                                            BATCH),
                                   ["expected the inputs ['image', 'temperature']", "found ['image']"]),
}


@pytest.mark.parametrize("requirement", unique(TEMPERATURE_REQUIREMENTS, TEMPERATURE_OWN_ROUND))
def test_temperature_requirement_broken_alone_is_named(mlp, tmp_path, requirement):
    build, words = {**TEMPERATURE_REQUIREMENTS, **TEMPERATURE_OWN_ROUND}[requirement]
    refused("01.2", build(mlp, tmp_path / "temperature.onnx"), *words)


# ----------------------------------------------------------------------------------------------- 01.3 abstain
class Abstain(nn.Module):
    """The exercise's model as given (loop + if), or a rewrite with one of the usual mistakes."""

    def __init__(self, mlp, mistake="as given", threshold=0.9):
        super().__init__()
        self.mlp, self.mistake, self.threshold = mlp, mistake, threshold

    def forward(self, image):
        logits = self.mlp(image)
        if self.mistake == "as given":
            rows = []
            for row in logits:
                rows.append(row if row.softmax(-1).max() >= self.threshold else torch.zeros_like(row))
            return torch.stack(rows)
        if self.mistake == "per class":
            return logits * (logits.softmax(-1) >= self.threshold)
        score = logits.max(-1, keepdim=True).values if self.mistake == "logit" else \
            logits.softmax(-1).max(-1, keepdim=True).values
        sure = score < self.threshold if self.mistake == "reversed" else score >= self.threshold
        kept = logits.softmax(-1) if self.mistake == "probabilities" else logits
        out = torch.where(sure, kept, torch.zeros_like(logits))
        return out.double() if self.mistake == "float64" else out


ONE = (torch.zeros(1, 1, 28, 28),)


def retrained(mlp):
    """The same MLP trained again: as sure of itself, other logits (here its last layer's weights moved a little)."""
    import copy

    other = copy.deepcopy(mlp)
    with torch.no_grad():
        other.layers[-1].weight.add_(0.02 * torch.randn(other.layers[-1].weight.shape,
                                                        generator=torch.Generator().manual_seed(0)))
    return other


def abstain(mistake="right", names=IMAGE, outputs=LOGITS, dynamic=BATCH, untrained=False, dynamo=True, dummy=ONE,
            model=None, **kwargs):
    def build(mlp, path):
        module = Abstain(model(mlp) if model else type(mlp)() if untrained else mlp, mistake, **kwargs)
        return export(module, dummy, path, names, outputs, dynamic, dynamo=dynamo)
    return build


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


DIGIT = ((torch.arange(784, dtype=torch.float32).reshape(1, 1, 28, 28) % 7) / 6,)  # any non-blank image
# The exercise text's requirements for 01.3, and a wrong answer breaking each alone, refused naming it.
ABSTAIN_REQUIREMENTS = {
    "input named image": (abstain(names=["x"]), ["expected the inputs ['image'], found ['x']"]),
    "image float32 [batch, 1, 28, 28]": (
        lambda mlp, path: export(nn.Sequential(nn.Unflatten(1, (1, 28, 28)), Abstain(mlp, "right")),
                                 (torch.zeros(1, 784),), path, IMAGE, LOGITS, BATCH),
        ["input image [batch, 1, 28, 28]", "found ['batch', 784]"]),
    "a dynamic batch": (abstain(dynamic=None), ["batch dimension is fixed ({'image': 1})"]),
    "output named logits": (abstain(outputs=["scores"]), ["expected the outputs ['logits'], found ['scores']"]),
    "logits float32": (abstain("float64"), ["output 'logits' float32"]),
    "exports for any batch (dynamo=True, no loop)": (abstain("as given", dynamo=False, dummy=DIGIT),
                                                     ["{'image': [2, 1, 28, 28]}", "unrolled"]),
    "the decision on the top softmax probability": (abstain("logit"), ["top softmax probability below 0.9",
                                                                       "not the largest logit"]),
    "zero the unsure rows, keep the others": (abstain("reversed"), ["condition is reversed"]),
    "the threshold 0.9": (abstain(threshold=0.5), ["with a top softmax probability below 0.9 keep their logits"]),
    "the trained model's logits in the other rows": (abstain(model=retrained),
                                                     ["differ from artifacts/mnist_mlp_pytorch.onnx"]),
    "logits, not probabilities": (abstain("probabilities"), ["returns probabilities", "keep the MLP's logits"]),
}
ABSTAIN_OWN_ROUND = {
    "the legacy fallback from a blank dummy": (abstain("as given", dynamo=False), ["no input at all", "dynamo=False"]),
    "the legacy fallback from a real digit": ABSTAIN_REQUIREMENTS["exports for any batch (dynamo=True, no loop)"],
    "the plain MLP": (lambda mlp, path: export(mlp, ONE, path, IMAGE, LOGITS, BATCH), ["no row is all zeros"]),
    "threshold on the largest logit": ABSTAIN_REQUIREMENTS["the decision on the top softmax probability"],
    "condition reversed": ABSTAIN_REQUIREMENTS["zero the unsure rows, keep the others"],
    "threshold 0.5": ABSTAIN_REQUIREMENTS["the threshold 0.9"],
    "a per-class mask": (abstain("per class"), ["differ from artifacts/mnist_mlp_pytorch.onnx"]),
    "probabilities kept": ABSTAIN_REQUIREMENTS["logits, not probabilities"],
    "a fresh untrained MLP": (abstain(untrained=True), ["at or above it are zeroed"]),
    "static batch": ABSTAIN_REQUIREMENTS["a dynamic batch"],
}


@pytest.mark.parametrize("requirement", unique(ABSTAIN_REQUIREMENTS, ABSTAIN_OWN_ROUND))
def test_abstain_requirement_broken_alone_is_named(mlp, tmp_path, requirement):
    build, words = {**ABSTAIN_REQUIREMENTS, **ABSTAIN_OWN_ROUND}[requirement]
    refused("01.3", build(mlp, tmp_path / "abstain.onnx"), *words)
