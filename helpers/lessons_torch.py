"""The lessons' torch code, collected from the notebooks' ``#@save`` cells (generated: don't edit it directly).

Edit the notebook cell named above each definition, then run ``python -m helpers.series sync``.
"""

import torch
from torch import nn

from helpers.lessons import MNIST_MEAN, MNIST_STD


# Defined in notebooks/01_export_pytorch_mlp.ipynb
class MnistMLP(nn.Module):
    def __init__(self, mean=MNIST_MEAN, std=MNIST_STD):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean))
        self.register_buffer("std", torch.tensor(std))
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(28 * 28, 256),
            nn.ReLU(),
            nn.Linear(256, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        )

    def forward(self, image):
        return self.layers((image - self.mean) / self.std)


# Defined in notebooks/05_quantize_models.ipynb
class MnistCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor(MNIST_MEAN))  # the contract: normalization inside
        self.register_buffer("std", torch.tensor(MNIST_STD))
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, stride=2, padding=1),
            nn.ReLU(),  # 28×28 -> 8×14×14
            nn.Conv2d(8, 16, kernel_size=3, stride=2, padding=1),
            nn.ReLU(),  # -> 16×7×7
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)
        )

    def forward(self, image):
        return self.classifier(self.features((image - self.mean) / self.std))
