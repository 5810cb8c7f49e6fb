"""Your model: the networks a run can train, chosen by `model.name` in config.yaml or
--model. lenet (the default), mlp and a small CIFAR-style resnet ship here.

Each model is one function, registered with @model: it takes the data's shape (read
from the data and recorded in hparams.json) and returns a mindspore.nn.Cell whose
construct maps inputs (N, *shape.input) to class scores (N, shape.num_classes).
``input_shape`` is what the model takes when there is no data to read it from (a
--smoke run on a machine without the dataset).

Your own model, in two steps (README.md, "Bring your own model and data"):

    @model("mynet", input_shape=(3, 32, 32))
    def mynet(shape: DataShape) -> nn.Cell:
        channels, height, width = shape.input
        return nn.SequentialCell(
            nn.Conv2d(channels, 16, 3, pad_mode="same", has_bias=True), nn.ReLU(),
            nn.MaxPool2d(2, 2), nn.Flatten(),
            nn.Dense(16 * (height // 2) * (width // 2), shape.num_classes),
        )

and in config.yaml, under model:, name: mynet.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops

from src.scaffold import DataShape, image_input, model


class LeNet5(nn.Cell):
    """conv 5x5 (pad 2) -> pool -> conv 5x5 -> pool -> 120 -> 84 -> num_classes.

    The layers and parameter count of the PyTorch project's LeNet. nn.Flatten
    keeps the batch dimension: the model takes any batch size, where the
    MindSpore sample's reshape to a fixed batch breaks on a last partial batch.
    """

    def __init__(
        self, num_classes: int = 10, channels: int = 1, size: tuple[int, int] = (28, 28)
    ) -> None:
        super().__init__()
        # The feature map's side after the layers below, for any input size.
        height, width = ((side // 2 - 4) // 2 for side in size)
        if height < 1 or width < 1:
            raise ValueError(f"lenet needs images of at least 12x12, not {size[0]}x{size[1]}")
        # has_bias: MindSpore's Conv2d has none by default, PyTorch's has one.
        self.conv1 = nn.Conv2d(channels, 6, 5, pad_mode="pad", padding=2, has_bias=True)
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True)  # 14x14 -> 10x10
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        # Layer names as in earlier versions: their checkpoints still load.
        self.fc1 = nn.Dense(16 * height * width, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, num_classes)

    def construct(self, images: ms.Tensor) -> ms.Tensor:
        """Class scores (N, num_classes) for images (N, C, H, W)."""
        # Pooling before ReLU computes the same function with a quarter of the ReLU work.
        x = self.relu(self.pool(self.conv1(images)))
        x = self.relu(self.pool(self.conv2(x)))
        x = self.relu(self.fc1(self.flatten(x)))
        return self.fc3(self.relu(self.fc2(x)))


@model("lenet", input_shape=(1, 28, 28), head="fc3")
def lenet(shape: DataShape) -> nn.Cell:
    channels, height, width = image_input("lenet", shape)
    return LeNet5(shape.num_classes, channels, (height, width))


class MLP(nn.Cell):
    """Two hidden layers over the flattened input: tables, or small images."""

    def __init__(self, features: int, num_classes: int, hidden: int = 256) -> None:
        super().__init__()
        self.layers = nn.SequentialCell(
            nn.Flatten(),
            nn.Dense(features, hidden),
            nn.ReLU(),
            nn.Dense(hidden, hidden // 2),
            nn.ReLU(),
        )
        self.head = nn.Dense(hidden // 2, num_classes)

    def construct(self, inputs: ms.Tensor) -> ms.Tensor:
        return self.head(self.layers(inputs))


@model("mlp", input_shape=(64,), head="head")
def mlp(shape: DataShape) -> nn.Cell:
    features = 1
    for side in shape.input:
        features *= side
    return MLP(features, shape.num_classes)


class BasicBlock(nn.Cell):
    """Two 3x3 convolutions with a shortcut (ResNet's basic block)."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, pad_mode="pad", padding=1)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, pad_mode="pad", padding=1)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.relu = nn.ReLU()
        self.shortcut: nn.Cell = nn.Identity()
        if stride != 1 or inputs != outputs:
            # A 1x1 convolution matches the shortcut's shape to the block's output.
            self.shortcut = nn.SequentialCell(
                nn.Conv2d(inputs, outputs, 1, stride), nn.BatchNorm2d(outputs)
            )

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Cell):
    """A small CIFAR-style ResNet: a 3x3 stem, three stages of basic blocks (widths w, 2w,
    4w; the last two halve the resolution), global average pooling and the head. Global
    pooling lets it take any image size."""

    def __init__(self, num_classes: int, channels: int, width: int = 16, blocks: int = 1):
        super().__init__()
        self.stem = nn.SequentialCell(
            nn.Conv2d(channels, width, 3, 1, pad_mode="pad", padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
        )
        stages, inputs = [], width
        for stage, outputs in enumerate((width, 2 * width, 4 * width)):
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                stages.append(BasicBlock(inputs, outputs, stride))
                inputs = outputs
        self.stages = nn.SequentialCell(*stages)
        self.head = nn.Dense(inputs, num_classes)

    def construct(self, images: ms.Tensor) -> ms.Tensor:
        features = self.stages(self.stem(images))
        # Global average pooling: the mean over height and width.
        return self.head(ops.mean(features, axis=(2, 3)))


@model("resnet", input_shape=(3, 32, 32), head="head", blocks="stages")
def resnet(shape: DataShape) -> nn.Cell:
    channels, _, _ = image_input("resnet", shape)
    return ResNet(shape.num_classes, channels)
