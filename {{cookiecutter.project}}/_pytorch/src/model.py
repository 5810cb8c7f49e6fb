"""Your model: the networks a run can train, chosen by `model.name` in config.yaml or
--model. lenet (the default), mlp and a small CIFAR-style resnet ship here.

Each model is one function, registered with @model: it takes the data's shape (read
from the data and recorded in hparams.json) and returns a torch.nn.Module whose
forward maps inputs (N, *shape.input) to class scores (N, shape.num_classes).
``input_shape`` is what the model takes when there is no data to read it from (a
--smoke run on a machine without the dataset).

Your own model, in two steps (README.md, "Bring your own model and data"):

    @model("mynet", input_shape=(3, 32, 32))
    def mynet(shape: DataShape) -> nn.Module:
        channels, _, _ = shape.input
        return nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
            nn.Flatten(), nn.Linear(16 * 4 * 4, shape.num_classes),
        )

and in config.yaml, under model:, name: mynet.
"""

from __future__ import annotations

import torch
from torch import nn

from src.scaffold import DataShape, image_input, model


class LeNet(nn.Module):
    """conv 5x5 (pad 2) -> pool -> conv 5x5 -> pool -> 120 -> 84 -> num_classes."""

    def __init__(self, num_classes: int = 10, channels: int = 1, size: tuple[int, int] = (28, 28)):
        super().__init__()
        # Pooling before ReLU computes the same function as after it (both are
        # monotonic) with a quarter of the ReLU work.
        self.features = nn.Sequential(
            nn.Conv2d(channels, 6, kernel_size=5, padding=2),  # 28x28 -> 28x28
            nn.MaxPool2d(2),  # -> 14x14
            nn.ReLU(),
            nn.Conv2d(6, 16, kernel_size=5),  # -> 10x10
            nn.MaxPool2d(2),  # -> 5x5
            nn.ReLU(),
        )
        # The feature map's side after the layers above, for any input size.
        height, width = ((side // 2 - 4) // 2 for side in size)
        if height < 1 or width < 1:
            raise ValueError(f"lenet needs images of at least 12x12, not {size[0]}x{size[1]}")
        self.classifier = nn.Sequential(
            nn.Flatten(),  # keeps the batch dimension, whatever the batch size
            nn.Linear(16 * height * width, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class scores (N, num_classes) for images (N, C, H, W)."""
        return self.classifier(self.features(images))


@model("lenet", input_shape=(1, 28, 28), head="classifier.5")
def lenet(shape: DataShape) -> nn.Module:
    channels, height, width = image_input("lenet", shape)
    return LeNet(shape.num_classes, channels, (height, width))


class MLP(nn.Module):
    """Two hidden layers over the flattened input: tables, or small images."""

    def __init__(self, features: int, num_classes: int, hidden: int = 256) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden // 2),
            nn.ReLU(),
        )
        self.head = nn.Linear(hidden // 2, num_classes)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(inputs))


@model("mlp", input_shape=(64,), head="head")
def mlp(shape: DataShape) -> nn.Module:
    features = 1
    for side in shape.input:
        features *= side
    return MLP(features, shape.num_classes)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a shortcut (ResNet's basic block)."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            # A 1x1 convolution matches the shortcut's shape to the block's output.
            self.shortcut = nn.Sequential(
                nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    """A small CIFAR-style ResNet: a 3x3 stem, three stages of basic blocks (widths w, 2w,
    4w; the last two halve the resolution), global average pooling and the head. Global
    pooling lets it take any image size."""

    def __init__(self, num_classes: int, channels: int, width: int = 16, blocks: int = 1):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        stages, inputs = [], width
        for stage, outputs in enumerate((width, 2 * width, 4 * width)):
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                stages.append(BasicBlock(inputs, outputs, stride))
                inputs = outputs
        self.stages = nn.Sequential(*stages)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(inputs, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.stages(self.stem(images))))


@model("resnet", input_shape=(3, 32, 32), head="head", blocks="stages")
def resnet(shape: DataShape) -> nn.Module:
    channels, _, _ = image_input("resnet", shape)
    return ResNet(shape.num_classes, channels)
