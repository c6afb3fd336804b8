"""Notebook 01's exercises: the learner's exported files, run by ONNX Runtime on digits they never tried.

An answer is the path of an exported file. Its outcome on a case is what the file declares (inputs, outputs) and
what it returns on the case's batch; the expected values are the series' own ``mnist_mlp_pytorch.onnx``'s (the
trained MLP every answer wraps), so the references (torch exports, seconds each) are not run during a check.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from helpers.grading.checks._common import (
    Exported,
    as_model_path,
    exported_once,
    reference_logits,
    test_images,
)
from helpers.grading.checks._common import session as _session
from helpers.grading.examiner import Case, Exercise, Mistake, Requirement, judge_says_it
from helpers.preprocess import softmax

# the notebook's own file: the trained MLP's logits on contract images
_logits = functools.partial(reference_logits, "mnist_mlp_pytorch.onnx")
SETUP = "from helpers.grading.checks.ex01 import trained_mlp"


def trained_mlp():
    """Notebook 01's MnistMLP with the trained weights of artifacts/mnist_mlp_pytorch.onnx.

    In the notebook ``model`` is already there; a solution file has to rebuild it.
    """
    import onnx
    import torch
    from onnx import numpy_helper

    from helpers.lessons_torch import MnistMLP
    from helpers.pipeline.artifacts import existing_artifact

    model = MnistMLP()
    weights = {
        init.name: torch.from_numpy(numpy_helper.to_array(init).copy())
        for init in onnx.load(existing_artifact("mnist_mlp_pytorch.onnx")).graph.initializer
    }
    model.load_state_dict({name: weights[name] for name in model.state_dict()})
    return model.eval()


def _fresh_images(rng, n: int):
    """Test digits picked with the check's seed, not the first ones a learner tries."""
    images, _ = test_images(10_000)
    return images[rng.choice(len(images), n, replace=False)]


def run_file(answer, case: Case) -> dict:
    """What the file declares, and what it returns on the case's inputs when its inputs are those asked for (the
    first output; ``error``: what ONNX Runtime says when it cannot run it). A missing or unreadable file stays a
    ``Wrong`` from ``as_model_path``/``session``: there is nothing to run, only the path or file to fix."""
    session = _session(as_model_path(answer))
    signature = {
        "inputs": [(i.name, i.type, list(i.shape)) for i in session.get_inputs()],
        "outputs": [(o.name, o.type, list(o.shape)) for o in session.get_outputs()],
    }
    feeds = case.args[0]
    if [name for name, _, _ in signature["inputs"]] != list(feeds) or any(
        kind != "tensor(float)" for _, kind, _ in signature["inputs"]
    ):
        return {**signature, "result": None, "error": None}
    try:
        return {**signature, "result": session.run(None, feeds)[0], "error": None}
    except Exception as err:  # InvalidArgument, Fail, ... from onnxruntime
        return {**signature, "result": None, "error": str(err).splitlines()[0][:200]}


def is_path(answer) -> bool:
    return isinstance(answer, (str, os.PathLike))


# --- the contract's tensors, as the requirements read them ----------------------------------------------------


def _names(kind: str, wanted: list[str]):
    def judge(case, got, want):
        found = [name for name, _, _ in got[kind]]
        if found == wanted:
            return None
        hint = (
            ": no input at all, as the dynamo=False fallback records the loop and the `if` for the dummy only"
            if kind == "inputs" and not found
            else ""
        )
        return f"expected the {kind} {wanted}, found {found}{hint}"

    return judge


def _spec(got, kind: str, name: str):
    return next(spec for spec in got[kind] if spec[0] == name)


def _float32(kind: str, name: str):
    def judge(case, got, want):
        found = _spec(got, kind, name)[1]
        return (
            None
            if found == "tensor(float)"
            else f"expected {name} float32 (tensor(float)), found {found}"
        )

    return judge


def _dims(kind: str, name: str, dims: list[int]):
    def judge(case, got, want):
        shape = _spec(got, kind, name)[2]
        if len(shape) == 1 + len(dims) and shape[1:] == dims:
            return None
        return f"expected {name} [batch, {', '.join(map(str, dims))}], found {shape}"

    return judge


def _tensor(kind: str, name: str, dims: list[int]):
    """float32, then [batch, *dims]."""
    dtype, shape = _float32(kind, name), _dims(kind, name, dims)
    return lambda case, got, want: dtype(case, got, want) or shape(case, got, want)


def _dynamic_batch(case, got, want):
    fixed = {name: shape[0] for name, _, shape in got["inputs"] if not isinstance(shape[0], str)}
    return None if not fixed else f"the batch is fixed for {fixed}, not of any size"


def _result(got, n: int, dims: list[int]):
    """The file's first output on the case, or what went wrong: a message."""
    if got["error"] is not None:
        return None, f"ONNX Runtime cannot run it: {got['error']}"
    result = got["result"]
    if list(result.shape) != [n, *dims]:
        return (
            None,
            f"expected [{n}, {', '.join(map(str, dims))}] for {n} rows, got {list(result.shape)}",
        )
    return result, None


def _declared_and_run(name: str, dims: list[int]):
    """Declared [batch, *dims], and so returned on the case's batch (ONNX Runtime running the file)."""
    declared = _dims("outputs", name, dims)

    def judge(case, got, want):
        n = len(next(iter(case.args[0].values())))
        return declared(case, got, want) or _result(got, n, dims)[1]

    return judge


def _close(a, b, atol=1e-4) -> bool:
    return a is not None and a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-4, atol=atol))


def _spot(variant, atol=1e-4):
    """A known mistake told from the learner's outcomes: on every case, the file returns ``variant(case)`` (the
    trained MLP's artifact run on what the mistake feeds it, computed here: exporting the mistake's own file would
    cost seconds per check)."""
    return lambda cases, got: all(
        isinstance(g, dict) and _close(g["result"], variant(c), atol) for c, g in zip(cases, got)
    )


# --- the known mistakes' files, exported on first use (the generic test's rows; never during a check) ---------


def export(module, dummies, path, names, outputs, dynamic=None, dynamo=True):
    """torch.onnx.export as a learner writes it (the legacy exporter's spelling when ``dynamo=False``)."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer warnings
        options = (
            dict(dynamic_shapes=dynamic, external_data=False, verbose=False)
            if dynamo
            else dict(dynamic_axes={name: {0: "batch"} for name in names})
        )
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


@functools.cache
def mlp():
    return trained_mlp()


@functools.cache
def wrappers():
    """The learners' modules around the trained MLP, right or with one realistic ``mistake`` (torch, imported when
    a known mistake's file is first exported)."""
    import torch
    from torch import nn

    class Wrapper(nn.Module):
        def __init__(self, mlp, mistake=None, threshold=0.9):
            super().__init__()
            self.mlp, self.mistake, self.threshold = mlp, mistake, threshold

    class Rows(Wrapper):
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

    class Temperature(Wrapper):
        def forward(self, image, temperature):
            logits = self.mlp(
                image.reshape(-1, 1, 28, 28) if self.mistake == "flat image" else image
            )
            if self.mistake == "multiply":
                scaled = logits * temperature
            elif self.mistake == "ignored":
                scaled = logits + 0 * temperature
            elif self.mistake == "first only":
                scaled = logits / temperature[0]
            # temperature [batch]: one more axis to divide [batch, 10] by it
            elif self.mistake == "vector":
                scaled = logits / temperature.unsqueeze(-1)
            else:
                scaled = logits / temperature
            if self.mistake == "log_softmax":
                return torch.log_softmax(scaled, dim=-1)
            probabilities = torch.softmax(scaled, dim=0 if self.mistake == "dim0" else -1)
            return probabilities.double() if self.mistake == "float64" else probabilities

    class Abstain(Wrapper):
        """The exercise's model as given (loop + if), or a rewrite with one of the usual mistakes."""

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

    return Rows, Temperature, Abstain


def untrained():
    """The same class, fresh random weights."""
    import torch

    torch.manual_seed(0)
    return type(mlp())().eval()


def retrained():
    """The same MLP trained again: as sure of itself, other logits (its last layer's weights moved a little)."""
    import copy

    import torch

    other = copy.deepcopy(mlp())
    with torch.no_grad():
        layer = other.layers[-1].weight
        layer.add_(0.02 * torch.randn(layer.shape, generator=torch.Generator().manual_seed(0)))
    return other


def _zeros(*shape, dtype="float32"):
    import torch

    return torch.zeros(*shape, dtype=getattr(torch, dtype))


# --- 01.1 Rows from a CSV file --------------------------------------------------------------------------------


def export_rows(path="mlp_rows.onnx"):
    """Rows of 784 values in 0..255: reshape to the contract's layout and scale inside forward."""
    import torch
    from torch import nn

    class FromRows(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, pixels):
            return self.mlp(pixels.reshape(-1, 1, 28, 28) / 255)

    torch.onnx.export(
        FromRows(trained_mlp()).eval(),
        (torch.zeros(2, 784),),
        path,
        input_names=["pixels"],
        output_names=["logits"],
        dynamo=True,
        dynamic_shapes=({0: "batch"},),
        external_data=False,
    )
    return path


def rows_cases(rng):
    """Two batches of fresh test digits as CSV rows (0..255, row after row), of sizes new with each seed."""
    cases = []
    for n in (int(rng.integers(2, 9)), int(rng.integers(20, 60))):
        images = _fresh_images(rng, n)
        rows = images.reshape(n, 784) * 255
        cases.append(Case(f"a batch of {n} fresh rows", ({"pixels": rows},), images))
    return cases


def _rows_logits(case):
    return _logits(case.data)


def _rows_scaled(case, got, want):
    result, _ = _result(got, len(case.data), [10])
    if _close(result, _logits(case.data * 255)):
        return (
            "the file gives the MLP the 0..255 values; it was trained on 0..1: divide by 255 inside"
        )
    return None


def _rows_layout(case, got, want):
    result, _ = _result(got, len(case.data), [10])
    if _close(result, _logits(case.data.transpose(0, 1, 3, 2).copy())):
        return (
            "the file reads each row's 784 values column by column; a row holds the image row after row: "
            "reshape to [batch, 1, 28, 28], no transpose"
        )
    return None


def _rows_not_probabilities(case, got, want):
    result, _ = _result(got, len(case.data), [10])
    if _close(result, softmax(_logits(case.data)), atol=1e-5):
        return (
            "the file returns probabilities (each row the softmax of the MLP's logits); the output 'logits' is "
            "the trained MLP's logits as they are"
        )
    return None


def _rows_trained(case, got, want):
    result, _ = _result(got, len(case.data), [10])
    return (
        None if _close(result, _logits(case.data)) else "the logits differ from the trained MLP's"
    )


def _sequential(path):
    """A Sequential of ready-made layers, its batch declared with torch.export.Dim."""
    import torch
    from torch import nn

    class Scaled(nn.Module):
        def forward(self, rows):
            return rows * (1 / 255)

    batch = torch.export.Dim("rows")
    sequential = nn.Sequential(Scaled(), nn.Unflatten(1, (1, 28, 28)), mlp())
    return export(
        sequential, (_zeros(5, 784),), path, ["pixels"], ["logits"], {"input": {0: batch}}
    )


def _view(path):
    """view instead of reshape, the division by 255 first, the batch named n."""
    import torch
    from torch import nn

    class View(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, pixels):
            return self.mlp(torch.div(pixels, 255.0).view(pixels.shape[0], 1, 28, 28))

    return export(View(mlp()), (_zeros(2, 784),), path, ["pixels"], ["logits"], ({0: "n"},))


def _notebook_call(path):
    """The notebook's own export call applied to the new case, the file checked as section 4 does."""
    import onnx
    import torch

    rows_module = wrappers()[0]
    torch.onnx.export(
        rows_module(mlp()),
        (torch.zeros(1, 784),),
        path,
        input_names=["pixels"],
        output_names=["logits"],
        dynamo=True,
        dynamic_shapes=({0: "batch"},),
        external_data=False,
    )
    onnx.checker.check_model(path, full_check=True)
    return path


def rows(
    mistake=None,
    dummy=(3, 784),
    names=("pixels",),
    outputs=("logits",),
    dynamic=({0: "batch"},),
    **kw,
):
    """A build of 01.1's answer with one mistake (``model``: the MLP it wraps)."""
    model, dtype, dynamo = kw.get("model"), kw.get("dtype", "float32"), kw.get("dynamo", True)

    def build(path):
        module = wrappers()[0]((model or mlp)(), mistake)
        return export(
            module,
            (_zeros(*dummy, dtype=dtype),),
            path,
            list(names),
            list(outputs),
            dynamic,
            dynamo,
        )

    return build


def _plain_mlp(names, outputs):
    return lambda path: export(
        mlp(), (_zeros(2, 1, 28, 28),), path, names, outputs, ({0: "batch"},)
    )


R1 = dict(
    pixels="input named pixels",
    logits_name="output named logits",
    pixels32="pixels float32",
    logits32="logits float32",
    pixels_shape="pixels [batch, 784]",
    logits_shape="logits [batch, 10]",
    batch="a batch of any size",
    scaled="pixels in 0..255",
    layout="the image row after row",
    not_probabilities="logits, not probabilities",
    trained="the trained MLP's logits",
)


ROWS = Exercise(
    id="01.1",
    expects="the path of your .onnx file (a str or Path)",
    reference=exported_once(export_rows),
    answer="answer = export_rows()",
    cases=rows_cases,
    run=run_file,
    accepts=is_path,
    judged_alone=True,  # the expected logits are the artifact's, which the reference wraps (a torch export)
    requirements=[
        Requirement(R1["pixels"], _names("inputs", ["pixels"])),
        Requirement(R1["logits_name"], _names("outputs", ["logits"])),
        Requirement(R1["pixels32"], _float32("inputs", "pixels")),
        Requirement(R1["logits32"], _float32("outputs", "logits")),
        Requirement(R1["pixels_shape"], _dims("inputs", "pixels", [784])),
        Requirement(R1["batch"], _dynamic_batch),
        Requirement(R1["logits_shape"], _declared_and_run("logits", [10])),
        Requirement(R1["scaled"], _rows_scaled),
        Requirement(R1["layout"], _rows_layout),
        Requirement(R1["not_probabilities"], _rows_not_probabilities),
        Requirement(R1["trained"], _rows_trained),
    ],
    mistakes=[
        Mistake(
            "input named image",
            Exported("rows named image", rows(names=("image",))),
            "expected the inputs ['pixels'], found ['image']",
            R1["pixels"],
            judge_says_it,
        ),
        Mistake(
            "output named scores",
            Exported("rows to scores", rows(outputs=("scores",))),
            "expected the outputs ['logits'], found ['scores']",
            R1["logits_name"],
            judge_says_it,
        ),
        Mistake(
            "a uint8 dummy",
            Exported("rows from uint8", rows("uint8 dummy", dtype="uint8")),
            "expected pixels float32 (tensor(float)), found tensor(uint8)",
            R1["pixels32"],
            judge_says_it,
        ),
        Mistake(
            "float64 logits",
            Exported("rows float64", rows("float64")),
            "expected logits float32 (tensor(float)), found tensor(double)",
            R1["logits32"],
            judge_says_it,
        ),
        Mistake(
            "the MLP's own input",
            Exported("rows as images", _plain_mlp(["pixels"], ["logits"])),
            "expected pixels [batch, 784], found ['batch', 1, 28, 28]",
            R1["pixels_shape"],
            judge_says_it,
        ),
        Mistake(
            "an extra axis",
            Exported("rows extra axis", rows("extra axis")),
            "expected logits [batch, 10], found ['batch', 1, 10]",
            R1["logits_shape"],
            judge_says_it,
        ),
        Mistake(
            "a fixed batch",
            Exported("rows fixed batch", rows(dynamic=None)),
            "the batch is fixed for {'pixels': 3}, not of any size",
            R1["batch"],
            judge_says_it,
        ),
        Mistake(
            "unscaled",
            Exported("rows unscaled", rows("unscaled")),
            "the file gives the MLP the 0..255 values; it was trained on 0..1: divide by 255 inside",
            R1["scaled"],
            judge_says_it,
        ),
        Mistake(
            "transposed",
            Exported("rows transposed", rows("transposed")),
            "the file reads each row's 784 values column by column; a row holds the image row after row: "
            "reshape to [batch, 1, 28, 28], no transpose",
            R1["layout"],
            judge_says_it,
        ),
        Mistake(
            "softmax",
            Exported("rows softmax", rows("softmax")),
            "the file returns probabilities (each row the softmax of the MLP's logits); the output 'logits' is "
            "the trained MLP's logits as they are",
            R1["not_probabilities"],
            judge_says_it,
        ),
        Mistake(
            "an untrained MLP",
            Exported("rows untrained", rows(model=untrained)),
            "the logits differ from the trained MLP's",
            R1["trained"],
            judge_says_it,
        ),
        Mistake(
            "normalised before the MLP normalises again",
            Exported("rows normalised", rows("normalised again")),
            "the file normalises the pixels, and the MLP normalises them again: only divide by 255",
            R1["trained"],
            _spot(lambda case: _logits((case.data - 0.1307) / 0.3081)),
        ),
        Mistake(
            "divided by 256",
            Exported("rows by 256", rows("divided by 256")),
            "the file divides by 256: the pixels go up to 255, divide by 255",
            R1["trained"],
            _spot(lambda case: _logits(case.data * 255 / 256), atol=1e-5),
        ),
    ],
    alternatives=[
        Exported("a Sequential", _sequential),
        Exported("view", _view),
        Exported("the notebook's call", _notebook_call),
        Exported("the legacy exporter", rows(dynamo=False)),
    ],
    marks=("slow",),
    setup=SETUP,
)


# --- 01.2 Two inputs ------------------------------------------------------------------------------------------


def export_temperature(path="mlp_temperature.onnx"):
    """Two forward arguments: two dummies in the tuple, two names, one dynamic_shapes entry each."""
    import torch
    from torch import nn

    class WithTemperature(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, image, temperature):
            return torch.softmax(self.mlp(image) / temperature, dim=-1)

    torch.onnx.export(
        WithTemperature(trained_mlp()).eval(),
        (torch.zeros(1, 1, 28, 28), torch.ones(1, 1)),
        path,
        input_names=["image", "temperature"],
        output_names=["probabilities"],
        dynamo=True,
        dynamic_shapes=({0: "batch"}, {0: "batch"}),
        external_data=False,
    )
    return path


def temperature_cases(rng):
    """Two batches of fresh test digits, each image with its own temperature (0.2 to 5), sizes new each seed."""
    cases = []
    for n in (int(rng.integers(2, 9)), int(rng.integers(9, 40))):
        images = _fresh_images(rng, n)
        temperature = rng.uniform(0.2, 5, (n, 1)).astype(np.float32)
        feeds = {"image": images, "temperature": temperature}
        cases.append(
            Case(f"a batch of {n} fresh images, each with its own temperature", (feeds,), feeds)
        )
    return cases


def _probabilities_of(case, scale=None):
    """softmax(logits / temperature), or of the logits scaled otherwise by ``scale(logits, temperature)``."""
    logits, temperature = _logits(case.data["image"]), case.data["temperature"]
    return softmax(scale(logits, temperature) if scale else logits / temperature)


def _result_of(case, got):
    return _result(got, len(case.data["image"]), [10])[0]


def _over_classes(case, got, want):
    sums = _result_of(case, got).sum(axis=1)
    if np.allclose(sums, 1.0, atol=1e-4):
        return None
    return "the rows do not each sum to 1: a softmax over the 10 classes (dim=-1) does"


def _unlike(scale, words: str):
    """Not met when the file returns softmax of the logits scaled by ``scale`` (a mistake its requirement names)."""

    def judge(case, got, want):
        return (
            words if _close(_result_of(case, got), _probabilities_of(case, scale), 1e-5) else None
        )

    return judge


def _temperature_trained(case, got, want):
    if _close(_result_of(case, got), _probabilities_of(case), 1e-5):
        return None
    return "the probabilities differ from softmax(logits / temperature) of the trained MLP"


def _reciprocal(path):
    """Multiplies by 1 / temperature, softmax over dim 1, a dummy batch of 3 declared with torch.export.Dim."""
    import torch
    from torch import nn

    class Reciprocal(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, image, temperature):
            return nn.functional.softmax(self.mlp(image) * temperature.reciprocal(), dim=1)

    batch = torch.export.Dim("b")
    dummies = (_zeros(3, 1, 28, 28), torch.ones(3, 1))
    return export(
        Reciprocal(mlp()), dummies, path, TWO_NAMES, ["probabilities"], ({0: batch}, {0: batch})
    )


def _exp_log_softmax(path):
    """exp of log_softmax, the batch named n."""
    import torch
    from torch import nn

    class LogSoftmax(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, image, temperature):
            return (self.mlp(image) / temperature).log_softmax(-1).exp()

    dummies = (_zeros(1, 1, 28, 28), torch.ones(1, 1))
    return export(
        LogSoftmax(mlp()), dummies, path, TWO_NAMES, ["probabilities"], ({0: "n"}, {0: "n"})
    )


TWO_NAMES = ["image", "temperature"]


def temperature(
    mistake=None, dummy=((1, 1, 28, 28), (1, 1)), names=TWO_NAMES, outputs=("probabilities",), **kw
):
    """A build of 01.2's answer with one mistake."""
    model, dynamic = kw.get("model"), kw.get("dynamic", ({0: "batch"}, {0: "batch"}))

    def build(path):
        import torch

        module = wrappers()[1]((model or mlp)(), mistake)
        dummies = (_zeros(*dummy[0]), torch.ones(*dummy[1]))
        return export(module, dummies, path, list(names), list(outputs), dynamic)

    return build


R2 = dict(
    names="inputs image and temperature, in that order",
    output="output named probabilities",
    image="image float32 [batch, 1, 28, 28]",
    temperature="temperature float32 [batch, 1]",
    probabilities="probabilities float32 [batch, 10]",
    batch="a dynamic batch for both inputs",
    softmax="softmax over the 10 classes",
    divided="divided by the temperature",
    used="the temperature used",
    each="one temperature per image",
    trained="the trained model",
)


def _probabilities_float32_and_run():
    dtype, shape = _float32("outputs", "probabilities"), _declared_and_run("probabilities", [10])
    return lambda case, got, want: dtype(case, got, want) or shape(case, got, want)


TEMPERATURE = Exercise(
    id="01.2",
    expects="the path of your .onnx file (a str or Path)",
    reference=exported_once(export_temperature),
    answer="answer = export_temperature()",
    cases=temperature_cases,
    run=run_file,
    accepts=is_path,
    judged_alone=True,  # the expected probabilities come from the artifact the reference wraps (a torch export)
    requirements=[
        Requirement(R2["names"], _names("inputs", TWO_NAMES)),
        Requirement(R2["output"], _names("outputs", ["probabilities"])),
        Requirement(R2["image"], _tensor("inputs", "image", [1, 28, 28])),
        Requirement(R2["temperature"], _tensor("inputs", "temperature", [1])),
        Requirement(R2["batch"], _dynamic_batch),
        Requirement(R2["probabilities"], _probabilities_float32_and_run()),
        Requirement(R2["softmax"], _over_classes),
        Requirement(
            R2["divided"],
            _unlike(
                lambda logits, t: logits * t,
                "the file multiplies the logits by the temperature; divide them (a higher temperature should "
                "flatten the probabilities)",
            ),
        ),
        Requirement(
            R2["used"],
            _unlike(
                lambda logits, t: logits,
                "the file ignores the temperature: divide the logits by it before softmax",
            ),
        ),
        Requirement(
            R2["each"],
            _unlike(
                lambda logits, t: logits / t[:1],
                "the file divides every image's logits by the first image's temperature: each image has its own",
            ),
        ),
        Requirement(R2["trained"], _temperature_trained),
    ],
    mistakes=[
        Mistake(
            "inputs swapped",
            Exported("temperature first", temperature(names=["temperature", "image"])),
            "expected the inputs ['image', 'temperature'], found ['temperature', 'image']",
            R2["names"],
            judge_says_it,
        ),
        Mistake(
            "the one-input MLP exported",
            Exported(
                "one input",
                lambda path: export(
                    mlp(),
                    (_zeros(1, 1, 28, 28),),
                    path,
                    ["image"],
                    ["probabilities"],
                    ({0: "batch"},),
                ),
            ),
            "expected the inputs ['image', 'temperature'], found ['image']",
            R2["names"],
            judge_says_it,
        ),
        Mistake(
            "output named logits",
            Exported("temperature to logits", temperature(outputs=["logits"])),
            "expected the outputs ['probabilities'], found ['logits']",
            R2["output"],
            judge_says_it,
        ),
        Mistake(
            "a flat image",
            Exported("flat image", temperature("flat image", dummy=((1, 784), (1, 1)))),
            "expected image [batch, 1, 28, 28], found ['batch', 784]",
            R2["image"],
            judge_says_it,
        ),
        Mistake(
            "a temperature vector",
            Exported("temperature vector", temperature("vector", dummy=((2, 1, 28, 28), (2,)))),
            "expected temperature [batch, 1], found ['batch']",
            R2["temperature"],
            judge_says_it,
        ),
        Mistake(
            "float64 probabilities",
            Exported("temperature float64", temperature("float64")),
            "expected probabilities float32 (tensor(float)), found tensor(double)",
            R2["probabilities"],
            judge_says_it,
        ),
        Mistake(
            "the temperature's batch fixed",
            Exported("temperature fixed", temperature(dynamic=({0: "batch"}, None))),
            "the batch is fixed for {'temperature': 1}, not of any size",
            R2["batch"],
            judge_says_it,
        ),
        Mistake(
            "a softmax over the batch",
            Exported("softmax dim 0", temperature("dim0")),
            "the rows do not each sum to 1: a softmax over the 10 classes (dim=-1) does",
            R2["softmax"],
            judge_says_it,
        ),
        Mistake(
            "log-probabilities returned",
            Exported("log_softmax", temperature("log_softmax")),
            "the file returns log-probabilities (log_softmax): return the probabilities, a softmax",
            R2["softmax"],
            _spot(lambda case: np.log(_probabilities_of(case)), atol=1e-4),
        ),
        Mistake(
            "multiplied by the temperature",
            Exported("multiplied", temperature("multiply")),
            "the file multiplies the logits by the temperature; divide them (a higher temperature should "
            "flatten the probabilities)",
            R2["divided"],
            judge_says_it,
        ),
        Mistake(
            "the temperature ignored",
            Exported("ignored", temperature("ignored")),
            "the file ignores the temperature: divide the logits by it before softmax",
            R2["used"],
            judge_says_it,
        ),
        Mistake(
            "the first image's temperature for all",
            Exported("first only", temperature("first only")),
            "the file divides every image's logits by the first image's temperature: each image has its own",
            R2["each"],
            judge_says_it,
        ),
        Mistake(
            "an untrained MLP",
            Exported("temperature untrained", temperature(model=untrained)),
            "the probabilities differ from softmax(logits / temperature) of the trained MLP",
            R2["trained"],
            judge_says_it,
        ),
    ],
    alternatives=[
        Exported("reciprocal", _reciprocal),
        Exported("exp of log_softmax", _exp_log_softmax),
    ],
    marks=("slow",),
    setup=SETUP,
)


# --- 01.3 Make it export --------------------------------------------------------------------------------------

THRESHOLD = 0.9


def export_abstain(path="mlp_abstain.onnx"):
    """The loop and the `if` become one torch.where over the whole batch."""
    import torch
    from torch import nn

    class Abstain(nn.Module):
        def __init__(self, mlp, threshold=0.9):
            super().__init__()
            self.mlp, self.threshold = mlp, threshold

        def forward(self, image):
            logits = self.mlp(image)
            sure = logits.softmax(-1).max(dim=-1, keepdim=True).values >= self.threshold
            return torch.where(sure, logits, torch.zeros_like(logits))

    torch.onnx.export(
        Abstain(trained_mlp()).eval(),
        (torch.zeros(1, 1, 28, 28),),
        path,
        input_names=["image"],
        output_names=["logits"],
        dynamo=True,
        dynamic_shapes=({0: "batch"},),
        external_data=False,
    )
    return path


def abstain_cases(rng):
    """One fresh image, a small batch, and a large batch of test images (its size new with each seed): the large
    one holds images the MLP is unsure of."""
    images, _ = test_images(10_000)
    cases = []
    for n in (1, int(rng.integers(2, 7)), int(rng.integers(1500, 3000))):
        picked = images[rng.choice(len(images), n, replace=False)]
        name = "one fresh image" if n == 1 else f"a batch of {n} fresh images"
        cases.append(Case(name, ({"image": picked},), picked))
    return cases


def _kept_rows(case, got):
    result = _result(got, len(case.data), [10])[0]
    return result, ~(result == 0).all(axis=1)


def _any_batch(case, got, want):
    return _result(got, len(case.data), [10])[1]


def _whole_rows(case, got, want):
    result, kept = _kept_rows(case, got)
    if ((result == 0).any(axis=1) & kept).any():
        return "some rows have single logits zeroed, not the whole row"
    return None


def _abstain_not_probabilities(case, got, want):
    result, kept = _kept_rows(case, got)
    if kept.any() and _close(result[kept], softmax(_logits(case.data)[kept]), 1e-5):
        return (
            "in the rows it does not zero, the file returns probabilities (the softmax of the logits): keep the "
            "MLP's logits there, and use the softmax only for the decision"
        )
    return None


def _abstain_trained(case, got, want):
    result, kept = _kept_rows(case, got)
    # the rows the text keeps (the MLP sure of them) and the file keeps: the others are the decision's
    top = _top(case)
    kept = kept & (top >= THRESHOLD) & (np.abs(top - THRESHOLD) > 1e-5)
    if _close(result[kept], _logits(case.data)[kept]):
        return None
    return (
        "in the rows it does not zero, the logits differ from those of artifacts/mnist_mlp_pytorch.onnx, the "
        "trained `model` (trained it again? run sections 3 and 4 again)"
    )


def _top(case):
    return softmax(_logits(case.data)).max(axis=1)


def _decision(case, got, want):
    result, kept = _kept_rows(case, got)
    top = _top(case)
    clear = np.abs(top - THRESHOLD) > 1e-5  # rows too close to the threshold may round either way
    unsure, zeroed = top < THRESHOLD, ~kept
    if (zeroed == unsure)[clear].all():
        return None
    rows = unsure & kept & clear
    changed = result[rows]
    if rows.any() and not _close(changed, _logits(case.data)[rows]):
        # unsure rows neither zeros nor the MLP's logits of their images: something else was zeroed
        same = len(changed) >= 2 and np.allclose(changed, changed[0], atol=1e-5)
        return (
            f"the {len(changed)} row(s) with a top softmax probability below {THRESHOLD} are not zeros, nor the "
            "MLP's logits of their images"
            + (", but all the same logits, those of one and the same input" if same else "")
            + ": zero the rows of logits, not the images"
        )
    if not zeroed.any():
        return (
            f"no row is all zeros, but some images have a top softmax probability below {THRESHOLD}: compare the "
            "probability (not the largest logit, almost always above 0.9), and keep the decision in the graph"
        )
    if (zeroed == ~unsure)[clear].all():
        return "the file zeroes the confident rows and keeps the unsure ones: the condition is reversed"
    kept_unsure, zeroed_sure = (
        int((unsure & kept)[clear].sum()),
        int((~unsure & zeroed)[clear].sum()),
    )
    return (
        f"{kept_unsure} rows with a top softmax probability below {THRESHOLD} keep their logits and "
        f"{zeroed_sure} at or above it are zeroed"
    )


def _another_threshold(cases, got) -> bool:
    """The zeroed rows are exactly those least sure, on a threshold other than 0.9 (some rows kept, some not)."""
    case, outcome = cases[-1], got[-1]
    if not _ran(outcome) or outcome["result"].shape != (len(case.data), 10):
        return False
    top, zeroed = _top(case), (outcome["result"] == 0).all(axis=1)
    clear = np.abs(top - THRESHOLD) > 1e-5
    if not (zeroed.any() and (~zeroed).any()) or (zeroed == (top < THRESHOLD))[clear].all():
        return False
    return bool(top[zeroed].max() < top[~zeroed].min())


def _ran(outcome) -> bool:
    """The file was run on the case (not an answer that raised)."""
    return isinstance(outcome, dict) and outcome["result"] is not None


def _all_zeroed(cases, got) -> bool:
    return _ran(got[-1]) and bool((got[-1]["result"] == 0).all())


def _runs_on_one_image_only(cases, got) -> bool:
    """A batch of any size declared, right on one image, ONNX Runtime failing on the batches: a loop unrolled
    for a dummy of one."""
    if not all(isinstance(g, dict) for g in got):
        return False
    dynamic = all(isinstance(shape[0], str) for _, _, shape in got[0]["inputs"])
    return dynamic and got[0]["result"] is not None and all(g["error"] for g in got[1:])


def _per_class(case):
    logits = _logits(case.data)
    return logits * (softmax(logits) >= THRESHOLD)


def _mask_abstain(path):
    """Multiplies by a 0/1 mask computed from amax, a dummy batch of 4."""
    import torch
    from torch import nn

    class MaskAbstain(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, image):
            logits = self.mlp(image)
            return logits * (torch.softmax(logits, -1).amax(-1, keepdim=True) >= 0.9).to(
                logits.dtype
            )

    return export(
        MaskAbstain(mlp()), (_zeros(4, 1, 28, 28),), path, ["image"], ["logits"], ({0: "batch"},)
    )


def _where_abstain(path):
    """The condition the other way round, the zero a Python float."""
    import torch
    from torch import nn

    class WhereAbstain(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, image):
            logits = self.mlp(image)
            return torch.where(logits.softmax(1).max(1, keepdim=True).values < 0.9, 0.0, logits)

    return export(
        WhereAbstain(mlp()), (_zeros(4, 1, 28, 28),), path, ["image"], ["logits"], ({0: "batch"},)
    )


# any non-blank image: the legacy exporter records the `if` for it
def _digit():
    import torch

    return (torch.arange(784, dtype=torch.float32).reshape(1, 1, 28, 28) % 7) / 6


def abstain(mistake="right", names=("image",), outputs=("logits",), dynamic=({0: "batch"},), **kw):
    """A build of 01.3's answer with one mistake (``dummy``: a function making it)."""
    model, dynamo, threshold = (
        kw.get("model"),
        kw.get("dynamo", True),
        kw.get("threshold", THRESHOLD),
    )
    dummy = kw.get("dummy", lambda: _zeros(1, 1, 28, 28))

    def build(path):
        module = wrappers()[2]((model or mlp)(), mistake, threshold)
        return export(module, (dummy(),), path, list(names), list(outputs), dynamic, dynamo)

    return build


def _flat_abstain(path):
    from torch import nn

    module = nn.Sequential(nn.Unflatten(1, (1, 28, 28)), wrappers()[2](mlp(), "right"))
    return export(module, (_zeros(1, 784),), path, ["image"], ["logits"], ({0: "batch"},))


R3 = dict(
    image="input named image",
    logits_name="output named logits",
    image_t="image float32 [batch, 1, 28, 28]",
    logits_t="logits float32 [batch, 10]",
    batch="a dynamic batch",
    any_batch="exports for any batch (dynamo=True, no loop)",
    whole_rows="whole rows zeroed, never single logits",
    not_probabilities="logits, not probabilities",
    trained="the trained model's logits in the other rows",
    decision=f"zero the rows whose top softmax probability is below {THRESHOLD}",
)

ABSTAIN = Exercise(
    id="01.3",
    expects="the path of your .onnx file (a str or Path)",
    reference=exported_once(export_abstain),
    answer="answer = export_abstain()",
    cases=abstain_cases,
    run=run_file,
    accepts=is_path,
    judged_alone=True,  # the expected logits are the artifact's, which the reference wraps (a torch export)
    requirements=[
        Requirement(R3["image"], _names("inputs", ["image"])),
        Requirement(R3["logits_name"], _names("outputs", ["logits"])),
        Requirement(R3["image_t"], _tensor("inputs", "image", [1, 28, 28])),
        Requirement(R3["logits_t"], _tensor("outputs", "logits", [10])),
        Requirement(R3["batch"], _dynamic_batch),
        Requirement(R3["any_batch"], _any_batch),
        Requirement(R3["whole_rows"], _whole_rows),
        Requirement(R3["not_probabilities"], _abstain_not_probabilities),
        Requirement(R3["trained"], _abstain_trained),
        Requirement(R3["decision"], _decision),
    ],
    mistakes=[
        Mistake(
            "the legacy fallback from a blank dummy",
            Exported("legacy blank", abstain("as given", dynamo=False)),
            "expected the inputs ['image'], found []: no input at all, as the dynamo=False fallback records the "
            "loop and the `if` for the dummy only",
            R3["image"],
            judge_says_it,
        ),
        Mistake(
            "input named x",
            Exported("abstain named x", abstain(names=["x"])),
            "expected the inputs ['image'], found ['x']",
            R3["image"],
            judge_says_it,
        ),
        Mistake(
            "output named scores",
            Exported("abstain to scores", abstain(outputs=["scores"])),
            "expected the outputs ['logits'], found ['scores']",
            R3["logits_name"],
            judge_says_it,
        ),
        Mistake(
            "flat images",
            Exported("abstain flat", _flat_abstain),
            "expected image [batch, 1, 28, 28], found ['batch', 784]",
            R3["image_t"],
            judge_says_it,
        ),
        Mistake(
            "float64 logits",
            Exported("abstain float64", abstain("float64")),
            "expected logits float32 (tensor(float)), found tensor(double)",
            R3["logits_t"],
            judge_says_it,
        ),
        Mistake(
            "a fixed batch",
            Exported("abstain fixed", abstain(dynamic=None)),
            "the batch is fixed for {'image': 1}, not of any size",
            R3["batch"],
            judge_says_it,
        ),
        Mistake(
            "the legacy fallback from a digit",
            Exported("legacy digit", abstain("as given", dynamo=False, dummy=_digit)),
            "the file runs on one image only: the dynamo=False fallback unrolls the loop over the batch for the "
            "dummy's size; write forward with tensor operations and export with dynamo=True",
            R3["any_batch"],
            _runs_on_one_image_only,
        ),
        Mistake(
            "a per-class mask",
            Exported("per class", abstain("per class")),
            f"the file zeroes each logit whose own class probability is below {THRESHOLD}, one by one: give up on "
            "whole rows, comparing each row's top probability (the max over the classes) with the threshold",
            R3["whole_rows"],
            _spot(_per_class),
        ),
        Mistake(
            "probabilities kept",
            Exported("abstain probabilities", abstain("probabilities")),
            "in the rows it does not zero, the file returns probabilities (the softmax of the logits): keep the "
            "MLP's logits there, and use the softmax only for the decision",
            R3["not_probabilities"],
            judge_says_it,
        ),
        Mistake(
            "a retrained MLP",
            Exported("abstain retrained", abstain(model=retrained)),
            "in the rows it does not zero, the logits differ from those of artifacts/mnist_mlp_pytorch.onnx, the "
            "trained `model` (trained it again? run sections 3 and 4 again)",
            R3["trained"],
            judge_says_it,
        ),
        Mistake(
            "the plain MLP",
            Exported(
                "plain MLP",
                lambda path: export(
                    mlp(), (_zeros(1, 1, 28, 28),), path, ["image"], ["logits"], ({0: "batch"},)
                ),
            ),
            f"no row is all zeros, but some images have a top softmax probability below {THRESHOLD}: compare the "
            "probability (not the largest logit, almost always above 0.9), and keep the decision in the graph",
            R3["decision"],
            judge_says_it,
        ),
        Mistake(
            "the largest logit compared",
            Exported("logit", abstain("logit")),
            f"no row is all zeros, but some images have a top softmax probability below {THRESHOLD}: compare the "
            "probability (not the largest logit, almost always above 0.9), and keep the decision in the graph",
            R3["decision"],
            judge_says_it,
        ),
        Mistake(
            "the condition reversed",
            Exported("reversed", abstain("reversed")),
            "the file zeroes the confident rows and keeps the unsure ones: the condition is reversed",
            R3["decision"],
            judge_says_it,
        ),
        Mistake(
            "another threshold",
            Exported("threshold 0.5", abstain(threshold=0.5)),
            f"the file zeroes the least sure rows, but on another threshold than {THRESHOLD}",
            R3["decision"],
            _another_threshold,
        ),
        Mistake(
            "an untrained MLP",
            Exported("abstain untrained", abstain(model=untrained)),
            "the file zeroes every row: is it the trained `model` inside? (an untrained MLP is sure of nothing)",
            R3["decision"],
            _all_zeroed,
        ),
    ],
    alternatives=[
        Exported("a 0/1 mask", _mask_abstain),
        Exported("where, reversed", _where_abstain),
    ],
    marks=("slow",),
    setup=SETUP,
)

EXERCISES = [ROWS, TEMPERATURE, ABSTAIN]
