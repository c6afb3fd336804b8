"""Solutions for notebook 01's exercises (they need torch, like the notebook)."""

from __future__ import annotations

from pathlib import Path


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
