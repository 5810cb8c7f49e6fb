"""LeNet-5 for 1x28x28 images, the classic convolutional network for MNIST."""

from __future__ import annotations

import torch
from torch import nn


class LeNet(nn.Module):
    """conv 5x5 (pad 2) -> pool -> conv 5x5 -> pool -> 120 -> 84 -> num_classes."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        # Pooling before ReLU computes the same function as after it (both are
        # monotonic) with a quarter of the ReLU work.
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, kernel_size=5, padding=2),  # 28x28 -> 28x28
            nn.MaxPool2d(2),  # -> 14x14
            nn.ReLU(),
            nn.Conv2d(6, 16, kernel_size=5),  # -> 10x10
            nn.MaxPool2d(2),  # -> 5x5
            nn.ReLU(),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),  # keeps the batch dimension, whatever the batch size
            nn.Linear(16 * 5 * 5, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class scores (N, num_classes) for images (N, 1, 28, 28)."""
        return self.classifier(self.features(images))
