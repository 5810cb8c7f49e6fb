"""LeNet-5 for 1x28x28 images, and its loss and accuracy on a whole test set."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import nn

EVAL_BATCH = 1000


class LeNet5(nn.Cell):
    """conv 5x5 (pad 2) -> pool -> conv 5x5 -> pool -> 120 -> 84 -> num_classes.

    The layers and parameter count of the PyTorch project's LeNet. nn.Flatten
    keeps the batch dimension: the model takes any batch size, where the
    MindSpore sample's reshape to a fixed batch breaks on a last partial batch.
    """

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        # has_bias: MindSpore's Conv2d has none by default, PyTorch's has one.
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="pad", padding=2, has_bias=True)  # -> 28x28
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True)  # 14x14 -> 10x10
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(16 * 5 * 5, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, num_classes)

    def construct(self, images: ms.Tensor) -> ms.Tensor:
        """Class scores (N, num_classes) for images (N, 1, 28, 28)."""
        # Pooling before ReLU computes the same function with a quarter of the ReLU work.
        x = self.relu(self.pool(self.conv1(images)))
        x = self.relu(self.pool(self.conv2(x)))
        x = self.relu(self.fc1(self.flatten(x)))
        return self.fc3(self.relu(self.fc2(x)))


def evaluate(net: nn.Cell, images: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Mean cross-entropy and accuracy of net on the whole of (images, labels).

    The last batch is usually smaller than EVAL_BATCH: the network takes it as it is.
    """
    training = net.training
    net.set_train(False)
    loss = correct = 0.0
    for start in range(0, len(labels), EVAL_BATCH):
        logits = net(ms.Tensor(images[start : start + EVAL_BATCH])).asnumpy().astype(np.float64)
        target = labels[start : start + EVAL_BATCH]
        # Cross-entropy by log-sum-exp, in float64 on the host: 10 classes, cheap and exact.
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        loss -= log_probs[np.arange(len(target)), target].sum()
        correct += (logits.argmax(axis=1) == target).sum()
    net.set_train(training)
    return {"loss": float(loss) / len(labels), "accuracy": float(correct) / len(labels)}
