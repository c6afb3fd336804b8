"""Notebook 01's checks (real exports of the MLP): right answers pass; a *_REQUIREMENTS row breaks one, named."""

from __future__ import annotations

import warnings

import onnx
import pytest
import torch
from tables import accepted, refused
from torch import nn

from helpers.grading.checks.ex01 import trained_mlp


@pytest.fixture(scope="module")
def mlp():
    return trained_mlp()


def export(module, dummies, path, names, outputs, dynamic=None, dynamo=True):
    """torch.onnx.export as a learner writes it; returns the path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer warnings
        options = (
            dict(dynamic_shapes=dynamic, external_data=False, verbose=False)
            if dynamo
            else dict(dynamic_axes={name: {0: "batch"} for name in names})
        )  # the legacy exporter's spelling
        torch.onnx.export(
            module.eval(),
            dummies,
            path,
            input_names=names,
            output_names=outputs,
            dynamo=dynamo,
            **options,
        )
    return path


IMAGE, LOGITS, BATCH = ["image"], ["logits"], ({0: "batch"},)
EXPORT_CODE = ("output_names", "input_names", "dynamic_shapes", "dynamic_axes", "{0:")


def without_code(feedback):
    """The feedback names what is wrong without handing over the export call's code to write."""
    assert not any(code in feedback.message for code in EXPORT_CODE), feedback.message


class Wrapper(nn.Module):
    """The trained MLP inside a module of the learner's, right or with one realistic ``mistake``."""

    def __init__(self, mlp, mistake=None):
        super().__init__()
        self.mlp, self.mistake = mlp, mistake


# ----------------------------------------------------------------------------------------------- 01.1 CSV rows
class Rows(Wrapper):
    """An answer to 01.1: the MLP behind rows of 784 values in 0..255, right or with one realistic mistake."""

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


def rows(
    mistake=None, dummy=ROWS, names=PIXELS, outputs=LOGITS, dynamic=BATCH, untrained=False, **kwargs
):
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
    accepted(
        "01.1",
        export(
            sequential,
            (torch.zeros(5, 784),),
            tmp_path / "a.onnx",
            PIXELS,
            LOGITS,
            {"input": {0: batch}},
        ),
    )

    class View(Wrapper):  # view instead of reshape, the division by 255 after the MLP's own layout
        def forward(self, pixels):
            return self.mlp(torch.div(pixels, 255.0).view(pixels.shape[0], 1, 28, 28))

    accepted(
        "01.1",
        export(View(mlp), (torch.zeros(2, 784),), tmp_path / "b.onnx", PIXELS, LOGITS, ({0: "n"},)),
    )
    # the notebook's own export call applied to the new case, the file checked as section 4 does
    torch.onnx.export(
        Rows(mlp),
        (torch.zeros(1, 784),),
        tmp_path / "c.onnx",
        input_names=["pixels"],
        output_names=["logits"],
        dynamo=True,
        dynamic_shapes=({0: "batch"},),
        external_data=False,
    )
    onnx.checker.check_model(tmp_path / "c.onnx", full_check=True)
    accepted("01.1", tmp_path / "c.onnx")
    # the legacy exporter: nothing data-dependent here, so its file is right too
    accepted("01.1", rows(dynamo=False)(mlp, tmp_path / "d.onnx"))


ROWS_REQUIREMENTS = {
    "input named pixels": (
        rows(names=["image"]),
        ["expected the inputs ['pixels'], found ['image']"],
    ),
    "pixels float32": (
        rows("uint8 dummy", dummy=(torch.zeros(3, 784, dtype=torch.uint8),)),
        ["input 'pixels' float32", "found tensor(uint8)"],
    ),
    "pixels [batch, 784]": (
        lambda mlp, path: export(mlp, (torch.zeros(2, 1, 28, 28),), path, PIXELS, LOGITS, BATCH),
        ["input pixels [batch, 784]", "found ['batch', 1, 28, 28]"],
    ),
    "a batch of any size": (rows(dynamic=None), ["batch of any size", "fixed for {'pixels': 3}"]),
    "output named logits": (
        rows(outputs=["scores"]),
        ["expected the outputs ['logits'], found ['scores']"],
    ),
    "logits [batch, 10]": (rows("extra axis"), ["output logits [batch, 10]"]),
    "logits float32": (rows("float64"), ["output 'logits' float32", "found tensor(double)"]),
    "pixels in 0..255": (rows("unscaled"), ["0..255 values", "divide by 255"]),
    "the image row after row": (rows("transposed"), ["column by column", "no transpose"]),
    "the trained model": (rows(untrained=True), ["differ from the trained MLP's, first in row"]),
    "logits, not probabilities": (rows("softmax"), ["returns probabilities", "'logits'"]),
}
ROWS_OWN_ROUND = {
    "normalised before the MLP normalises again": (
        rows("normalised again"),
        ["logits differ from the trained MLP's, first in row"],
    ),
    "divided by 256": (
        rows("divided by 256"),
        ["logits differ from the trained MLP's, first in row"],
    ),
}


@pytest.mark.parametrize("requirement", list(ROWS_REQUIREMENTS) + list(ROWS_OWN_ROUND))
def test_rows_requirement_broken_alone_is_named(mlp, tmp_path, requirement):
    build, words = {**ROWS_REQUIREMENTS, **ROWS_OWN_ROUND}[requirement]
    without_code(refused("01.1", build(mlp, tmp_path / "rows.onnx"), *words))


# ----------------------------------------------------------------------------------------------- 01.2 two inputs
class Temperature(Wrapper):
    def forward(self, image, temperature):
        logits = self.mlp(image.reshape(-1, 1, 28, 28) if self.mistake == "flat image" else image)
        if self.mistake == "multiply":
            scaled = logits * temperature
        elif self.mistake == "ignored":
            scaled = logits + 0 * temperature
        elif self.mistake == "first only":
            scaled = logits / temperature[0]
        elif (
            self.mistake == "vector"
        ):  # temperature [batch]: one more axis to divide [batch, 10] by it
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
        return export(
            Temperature(type(mlp)() if untrained else mlp, mistake),
            dummy,
            path,
            names,
            outputs,
            dynamic,
        )

    return build


def test_two_inputs_right_answers_pass(mlp, tmp_path):
    accepted("01.2", export(Temperature(mlp), TWO, tmp_path / "t.onnx", NAMES, PROBS, BOTH))

    class Reciprocal(
        Wrapper
    ):  # multiplies by 1 / temperature, softmax over dim 1, a dummy batch of 3
        def forward(self, image, temperature):
            return nn.functional.softmax(self.mlp(image) * temperature.reciprocal(), dim=1)

    batch = torch.export.Dim("b")
    accepted(
        "01.2",
        export(
            Reciprocal(mlp),
            (torch.zeros(3, 1, 28, 28), torch.ones(3, 1)),
            tmp_path / "t5.onnx",
            NAMES,
            PROBS,
            ({0: batch}, {0: batch}),
        ),
    )

    class LogSoftmax(Reciprocal):  # exp of log_softmax, temperature broadcast from [batch, 1]
        def forward(self, image, temperature):
            return (self.mlp(image) / temperature).log_softmax(-1).exp()

    accepted(
        "01.2",
        export(LogSoftmax(mlp), TWO, tmp_path / "t7.onnx", NAMES, PROBS, ({0: "n"}, {0: "n"})),
    )


TEMPERATURE_REQUIREMENTS = {
    "inputs image and temperature, in that order": (
        temperature(names=["temperature", "image"]),
        ["expected the inputs ['image', 'temperature']"],
    ),
    "image [batch, 1, 28, 28]": (
        temperature("flat image", dummy=(torch.zeros(1, 784), torch.ones(1, 1))),
        ["input image [batch, 1, 28, 28]", "found ['batch', 784]"],
    ),
    "temperature float32 [batch, 1]": (
        temperature("vector", dummy=(torch.zeros(2, 1, 28, 28), torch.ones(2))),
        ["input temperature [batch, 1]"],
    ),
    "a dynamic batch for both inputs": (
        temperature(dynamic=({0: "batch"}, None)),
        ["fixed for {'temperature': 1}", "every input"],
    ),
    "output named probabilities": (
        temperature(outputs=LOGITS),
        ["expected the outputs ['probabilities'], found ['logits']"],
    ),
    "probabilities float32": (temperature("float64"), ["output 'probabilities' float32"]),
    "softmax over the 10 classes": (temperature("dim0"), ["sum to 1", "dim=-1"]),
    "divided by the temperature": (
        temperature("multiply"),
        ["multiplies the logits by the temperature"],
    ),
    "the temperature used": (temperature("ignored"), ["ignores the temperature"]),
    "one temperature per image": (
        temperature("first only"),
        ["first image's temperature", "each image"],
    ),
    "the trained model": (
        temperature(untrained=True),
        ["differ from softmax(logits / temperature) of the trained"],
    ),
}
TEMPERATURE_OWN_ROUND = {
    "log-probabilities returned": (temperature("log_softmax"), ["sum to 1"]),
    "the one-input MLP exported": (
        lambda mlp, path: export(mlp, (torch.zeros(1, 1, 28, 28),), path, IMAGE, PROBS, BATCH),
        ["expected the inputs ['image', 'temperature']", "found ['image']"],
    ),
}


@pytest.mark.parametrize(
    "requirement", list(TEMPERATURE_REQUIREMENTS) + list(TEMPERATURE_OWN_ROUND)
)
def test_temperature_requirement_broken_alone_is_named(mlp, tmp_path, requirement):
    build, words = {**TEMPERATURE_REQUIREMENTS, **TEMPERATURE_OWN_ROUND}[requirement]
    without_code(refused("01.2", build(mlp, tmp_path / "temperature.onnx"), *words))


# ----------------------------------------------------------------------------------------------- 01.3 abstain
class Abstain(Wrapper):
    """The exercise's model as given (loop + if), or a rewrite with one of the usual mistakes."""

    def __init__(self, mlp, mistake="as given", threshold=0.9):
        super().__init__(mlp, mistake)
        self.threshold = threshold

    def forward(self, image):
        logits = self.mlp(image)
        if self.mistake == "as given":
            rows = []
            for row in logits:
                rows.append(
                    row if row.softmax(-1).max() >= self.threshold else torch.zeros_like(row)
                )
            return torch.stack(rows)
        if self.mistake == "per class":
            return logits * (logits.softmax(-1) >= self.threshold)
        score = (
            logits.max(-1, keepdim=True).values
            if self.mistake == "logit"
            else logits.softmax(-1).max(-1, keepdim=True).values
        )
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
        other.layers[-1].weight.add_(
            0.02
            * torch.randn(other.layers[-1].weight.shape, generator=torch.Generator().manual_seed(0))
        )
    return other


def abstain(
    mistake="right",
    names=IMAGE,
    outputs=LOGITS,
    dynamic=BATCH,
    untrained=False,
    dynamo=True,
    dummy=ONE,
    model=None,
    **kwargs,
):
    def build(mlp, path):
        module = Abstain(
            model(mlp) if model else type(mlp)() if untrained else mlp, mistake, **kwargs
        )
        return export(module, dummy, path, names, outputs, dynamic, dynamo=dynamo)

    return build


def test_the_model_as_given_does_not_export(mlp, tmp_path):
    with pytest.raises(torch.onnx.OnnxExporterError):
        export(Abstain(mlp), ONE, tmp_path / "x.onnx", IMAGE, LOGITS, BATCH)


def test_abstain_right_rewrites_pass(mlp, tmp_path):
    accepted("01.3", export(Abstain(mlp, "right"), ONE, tmp_path / "a.onnx", IMAGE, LOGITS, BATCH))

    class MaskAbstain(Wrapper):  # multiplies by a 0/1 mask computed from amax
        def forward(self, image):
            logits = self.mlp(image)
            return logits * (torch.softmax(logits, -1).amax(-1, keepdim=True) >= 0.9).to(
                logits.dtype
            )

    class WhereAbstain(MaskAbstain):  # the condition the other way round, the zero a Python float
        def forward(self, image):
            logits = self.mlp(image)
            return torch.where(logits.softmax(1).max(1, keepdim=True).values < 0.9, 0.0, logits)

    for i, module in enumerate((MaskAbstain(mlp), WhereAbstain(mlp))):
        accepted(
            "01.3",
            export(
                module, (torch.zeros(4, 1, 28, 28),), tmp_path / f"m{i}.onnx", IMAGE, LOGITS, BATCH
            ),
        )


DIGIT = (
    (torch.arange(784, dtype=torch.float32).reshape(1, 1, 28, 28) % 7) / 6,
)  # any non-blank image
ABSTAIN_REQUIREMENTS = {
    "input named image": (abstain(names=["x"]), ["expected the inputs ['image'], found ['x']"]),
    "image float32 [batch, 1, 28, 28]": (
        lambda mlp, path: export(
            nn.Sequential(nn.Unflatten(1, (1, 28, 28)), Abstain(mlp, "right")),
            (torch.zeros(1, 784),),
            path,
            IMAGE,
            LOGITS,
            BATCH,
        ),
        ["input image [batch, 1, 28, 28]", "found ['batch', 784]"],
    ),
    "a dynamic batch": (abstain(dynamic=None), ["batch of any size", "fixed for {'image': 1}"]),
    "output named logits": (
        abstain(outputs=["scores"]),
        ["expected the outputs ['logits'], found ['scores']"],
    ),
    "logits float32": (abstain("float64"), ["output 'logits' float32"]),
    "exports for any batch (dynamo=True, no loop)": (
        abstain("as given", dynamo=False, dummy=DIGIT),
        ["{'image': [2, 1, 28, 28]}", "unrolled"],
    ),
    "the decision on the top softmax probability": (
        abstain("logit"),
        ["top softmax probability below 0.9", "not the largest logit"],
    ),
    "zero the unsure rows, keep the others": (abstain("reversed"), ["condition is reversed"]),
    "the threshold 0.9": (
        abstain(threshold=0.5),
        ["with a top softmax probability below 0.9 keep their logits"],
    ),
    "the trained model's logits in the other rows": (
        abstain(model=retrained),
        ["differ from artifacts/mnist_mlp_pytorch.onnx"],
    ),
    "logits, not probabilities": (
        abstain("probabilities"),
        ["returns probabilities", "keep the MLP's logits"],
    ),
}
ABSTAIN_OWN_ROUND = {
    "the legacy fallback from a blank dummy": (
        abstain("as given", dynamo=False),
        ["no input at all", "dynamo=False"],
    ),
    "the plain MLP": (
        lambda mlp, path: export(mlp, ONE, path, IMAGE, LOGITS, BATCH),
        ["no row is all zeros"],
    ),
    "a per-class mask": (abstain("per class"), ["differ from artifacts/mnist_mlp_pytorch.onnx"]),
    "a fresh untrained MLP": (abstain(untrained=True), ["at or above it are zeroed"]),
}


@pytest.mark.parametrize("requirement", list(ABSTAIN_REQUIREMENTS) + list(ABSTAIN_OWN_ROUND))
def test_abstain_requirement_broken_alone_is_named(mlp, tmp_path, requirement):
    build, words = {**ABSTAIN_REQUIREMENTS, **ABSTAIN_OWN_ROUND}[requirement]
    without_code(refused("01.3", build(mlp, tmp_path / "abstain.onnx"), *words))
