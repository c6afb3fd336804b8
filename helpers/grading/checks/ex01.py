"""Checks for notebook 01's exercises against its ``mnist_mlp_pytorch.onnx`` run by ONNX Runtime."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from helpers.grading.checks._common import (
    Wrong,
    as_model_path,
    reference_logits,
    rng,
    test_images,
)
from helpers.grading.checks._common import (
    session as _session,
)
from helpers.preprocess import softmax

_reference_logits = functools.partial(
    reference_logits, "mnist_mlp_pytorch.onnx"
)  # the notebook's own file


def _fresh_images(
    n: int,
):  # test digits picked with the check's seed, not the first ones a learner tries
    images, _ = test_images(10_000)
    return images[rng().choice(len(images), n, replace=False)]


def _opened(answer, inputs: dict, outputs: dict):
    """A session for the file, its tensors named, float32 and shaped [dynamic batch, ...] as ``inputs``/``outputs``."""
    session = _session(as_model_path(answer))
    found_in, found_out = (
        [i.name for i in session.get_inputs()],
        [o.name for o in session.get_outputs()],
    )
    if found_in != list(inputs):
        raise Wrong(
            f"expected the inputs {list(inputs)}, found {found_in}: one input per argument of forward, "
            "in order, named as the export call names them"
            + (
                " (no input at all: the dynamo=False fallback records the loop and "
                "the `if` for the dummy only)"
                if not found_in
                else ""
            )
        )
    if found_out != list(outputs):
        raise Wrong(
            f"expected the outputs {list(outputs)}, found {found_out}: the exporter names the outputs "
            "itself unless the export call names them"
        )
    for kind, specs, wanted in (
        ("input", session.get_inputs(), inputs),
        ("output", session.get_outputs(), outputs),
    ):
        for spec in specs:
            if spec.type != "tensor(float)":
                raise Wrong(
                    f"expected the {kind} {spec.name!r} float32 (tensor(float)), found {spec.type}: "
                    + (
                        "the dummy's dtype is the input's"
                        if kind == "input"
                        else "return float32 values"
                    )
                )
            if (
                len(spec.shape) != 1 + len(wanted[spec.name])
                or list(spec.shape[1:]) != wanted[spec.name]
            ):
                raise Wrong(
                    f"expected the {kind} {spec.name} [batch, {', '.join(map(str, wanted[spec.name]))}], "
                    f"found {spec.shape}"
                )
    fixed = {i.name: i.shape[0] for i in session.get_inputs() if not isinstance(i.shape[0], str)}
    if fixed:
        raise Wrong(
            f"expected a batch of any size for every input; in your file it is fixed for {fixed}: the "
            "exporter fixes a dimension to the dummy's size unless the export call says it is dynamic"
        )
    return session


def _run(
    session, feeds: dict, hint: str = ""
):  # the first output, or a Wrong with what ONNX Runtime says
    try:
        return session.run(None, feeds)[0]
    except Exception as err:  # InvalidArgument, Fail, ... from onnxruntime
        raise Wrong(
            f"expected the file to run on float32 inputs { ({k: list(v.shape) for k, v in feeds.items()}) }"
            f"{hint}; ONNX Runtime says: {str(err).splitlines()[0][:200]}"
        ) from err


def _first_row(got, want) -> int:
    return int(np.argmax(~np.isclose(got, want, rtol=1e-4, atol=1e-4).all(axis=1)))


def check_flat_input(answer):
    session = _opened(answer, {"pixels": [784]}, {"logits": [10]})
    images = _fresh_images(37)
    for n in (3, 37):  # batch sizes and digits the learner never tried
        rows, want = images[:n].reshape(n, 784) * 255, _reference_logits(images[:n])
        got = _run(session, {"pixels": rows})
        if got.shape != want.shape:
            raise Wrong(f"expected logits [{n}, 10] for {n} rows, got {list(got.shape)}")
        if np.allclose(got, want, rtol=1e-4, atol=1e-4):
            continue
        if np.allclose(got, _reference_logits(rows.reshape(n, 1, 28, 28)), rtol=1e-4, atol=1e-4):
            raise Wrong(
                "the file gives the MLP the 0..255 values; it was trained on 0..1: divide by 255 inside"
            )
        if np.allclose(
            got, _reference_logits(images[:n].transpose(0, 1, 3, 2).copy()), rtol=1e-4, atol=1e-4
        ):
            raise Wrong(
                "the file reads each row's 784 values column by column; a row holds the image row after "
                "row: reshape to [batch, 1, 28, 28], no transpose"
            )
        if np.allclose(got, softmax(want), atol=1e-5):
            raise Wrong(
                "the file returns probabilities (each row the softmax of the MLP's logits); the output "
                "'logits' is the trained MLP's logits as they are"
            )
        raise Wrong(
            f"on a batch of {n} fresh rows, the logits differ from the trained MLP's, first in row "
            f"{_first_row(got, want)}"
        )
    return [
        "input pixels [batch, 784] in 0..255, output logits: the trained MLP's logits on fresh rows"
    ]


def check_two_inputs(answer):
    session = _opened(answer, {"image": [1, 28, 28], "temperature": [1]}, {"probabilities": [10]})
    images = _fresh_images(6)
    temperature = rng(1).uniform(0.2, 5, (6, 1)).astype(np.float32)
    got, logits = (
        _run(session, {"image": images, "temperature": temperature}),
        _reference_logits(images),
    )
    if got.shape != (6, 10):
        raise Wrong(f"expected probabilities [6, 10] for 6 images, got {list(got.shape)}")
    if not np.allclose(got.sum(axis=1), 1.0, atol=1e-4):
        raise Wrong(
            f"each image's probabilities should sum to 1 (softmax over the 10 classes, dim=-1); the sums "
            f"are {np.round(got.sum(axis=1), 3).tolist()}"
        )
    if np.allclose(got, softmax(logits / temperature), atol=1e-5):
        return [
            "two inputs, each with a dynamic batch; probabilities = softmax(logits / temperature)"
        ]
    for wrong, why in (
        (logits * temperature, "multiplies the logits by the temperature; divide them"),
        (logits, "ignores the temperature: divide the logits by it before softmax"),
        (
            logits / temperature[:1],
            "divides every image's logits by the first image's temperature: each image has its own",
        ),
    ):
        if np.allclose(got, softmax(wrong), atol=1e-5):
            raise Wrong(f"the file {why} (a higher temperature should flatten the probabilities)")
    raise Wrong(
        f"the probabilities differ from softmax(logits / temperature) of the trained MLP, first in row "
        f"{_first_row(got, softmax(logits / temperature))}"
    )


THRESHOLD = 0.9


def check_abstain(answer):
    session = _opened(answer, {"image": [1, 28, 28]}, {"logits": [10]})
    images, _ = test_images(10_000)
    _run(
        session,
        {"image": images[:2]},
        " (a loop over the batch unrolled for the dummy's batch size, as the "
        "dynamo=False fallback does, fails: write it with tensor operations and export with dynamo=True)",
    )
    got, logits = _run(session, {"image": images}), _reference_logits(images)
    if got.shape != (10_000, 10):
        raise Wrong(f"expected logits [10000, 10] for 10000 images, got {list(got.shape)}")
    top = softmax(logits).max(axis=1)
    clear = np.abs(top - THRESHOLD) > 1e-5  # rows too close to the threshold may round either way
    unsure, zero_rows = top < THRESHOLD, (got == 0).all(axis=1)
    if (~zero_rows).any() and np.allclose(got[~zero_rows], softmax(logits[~zero_rows]), atol=1e-5):
        raise Wrong(
            "in the rows it does not zero, the file returns probabilities (the softmax of the logits): "
            "keep the MLP's logits there, and use the softmax only for the decision"
        )
    if not np.allclose(got[~zero_rows], logits[~zero_rows], rtol=1e-4, atol=1e-4):
        raise Wrong(
            "in the rows it does not zero, the file's logits differ from artifacts/mnist_mlp_pytorch.onnx: "
            "wrap the trained `model` of the notebook (if you trained it again, run sections 3 and 4 again)"
        )
    if (zero_rows == unsure)[clear].all():
        return [
            f"{unsure.sum()} of 10000 test images have a top probability below {THRESHOLD}: all zeros",
            "every other row is the MLP's logits, for any batch size",
        ]
    if not zero_rows.any():
        raise Wrong(
            f"no row is all zeros, but some test images have a top softmax probability below {THRESHOLD}: "
            "compare the probability (not the largest logit, almost always above 0.9), and keep the decision "
            "in the graph"
        )
    if (zero_rows == ~unsure)[clear].all():
        raise Wrong(
            "the file zeroes the confident rows and keeps the unsure ones: the condition is reversed"
        )
    kept, zeroed = int((unsure & ~zero_rows)[clear].sum()), int((~unsure & zero_rows)[clear].sum())
    raise Wrong(
        f"of the 10000 test images, {kept} with a top softmax probability below {THRESHOLD} keep their "
        f"logits and {zeroed} at or above it are zeroed: zero a row exactly when its top softmax "
        f"probability is below {THRESHOLD}"
    )


CHECKS = {"01.1": check_flat_input, "01.2": check_two_inputs, "01.3": check_abstain}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)
# (they need torch, like the notebook)


def trained_mlp():
    """Notebook 01's MnistMLP with the trained weights of artifacts/mnist_mlp_pytorch.onnx.

    In the notebook ``model`` is already there; a solution file has to rebuild it.
    """
    import onnx
    import torch
    from onnx import numpy_helper

    from helpers.lessons_torch import MnistMLP
    from helpers.pipeline.artifacts import built_artifact

    model = MnistMLP()
    weights = {
        init.name: torch.from_numpy(numpy_helper.to_array(init).copy())
        for init in onnx.load(built_artifact("mnist_mlp_pytorch.onnx")).graph.initializer
    }
    model.load_state_dict({name: weights[name] for name in model.state_dict()})
    return model.eval()


def solve_1(workdir: Path):
    """Rows of 784 values in 0..255: reshape to the contract's layout and scale inside forward."""
    import torch
    from torch import nn

    class FromRows(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, pixels):
            return self.mlp(pixels.reshape(-1, 1, 28, 28) / 255)

    path = Path(workdir) / "mlp_rows.onnx"
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


def solve_2(workdir: Path):
    """Two forward arguments: two dummies in the tuple, two names, one dynamic_shapes entry each."""
    import torch
    from torch import nn

    class WithTemperature(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.mlp = mlp

        def forward(self, image, temperature):
            return torch.softmax(self.mlp(image) / temperature, dim=-1)

    path = Path(workdir) / "mlp_temperature.onnx"
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


def solve_3(workdir: Path):
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

    path = Path(workdir) / "mlp_abstain.onnx"
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
