"""Solutions for notebook 01's exercises (they need torch, like the notebook)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _mlp():
    import torch
    from torch import nn

    class MnistMLP(nn.Module):  # the notebook's class, repeated so the solution stands alone
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor(0.1307))
            self.register_buffer("std", torch.tensor(0.3081))
            self.layers = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                                        nn.ReLU(), nn.Linear(128, 10))

        def forward(self, image):
            return self.layers((image - self.mean) / self.std)

    torch.manual_seed(0)
    return MnistMLP().eval()


def solve_1(workdir: Path):
    import torch

    path = Path(workdir) / "mlp_static.onnx"
    torch.onnx.export(_mlp(), (torch.zeros(1, 1, 28, 28),), path, input_names=["image"],
                      output_names=["logits"], dynamo=True, external_data=False)
    return path


def solve_2(workdir: Path):
    import torch

    path = Path(workdir) / "mlp_external.onnx"
    torch.onnx.export(_mlp(), (torch.zeros(1, 1, 28, 28),), path, input_names=["image"],
                      output_names=["logits"], dynamo=True, dynamic_shapes=({0: "batch"},), external_data=True)
    return path


def solve_3(workdir: Path):
    import onnxruntime as ort
    import torch
    from torch import nn

    from helpers.mnist import load_mnist

    data = load_mnist()
    x = torch.tensor(data.x_train).unsqueeze(1).float() / 255  # a copy: the cached arrays are read-only
    y = torch.tensor(data.y_train).long()
    model = _mlp().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    for i in range(0, len(x), 128):
        idx = order[i:i + 128]
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    path = Path(workdir) / "mlp_one_epoch.onnx"
    torch.onnx.export(model, (torch.zeros(1, 1, 28, 28),), path, input_names=["image"], output_names=["logits"],
                      dynamo=True, dynamic_shapes=({0: "batch"},), external_data=False)
    images = (data.x_test.astype(np.float32) / 255)[:, None]
    logits = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["logits"], {"image": images})[0]
    return path, float((logits.argmax(1) == data.y_test).mean())
