"""Your training step: the loss, the optimizer (its learning rate follows the schedule) and
the metrics.

The scaffold calls these; it owns the rest of the loop (devices, mixed precision,
loss scaling, gradient averaging over the ranks, data sink, checkpoints). Change
them here: every training step differentiates the cell ``loss`` returns, the
optimizer is built once by ``optimizer``, and evaluation sums ``metrics`` over a
split, then divides each sum by the sample count.
"""

from __future__ import annotations

from typing import Iterable

import mindspore as ms
import numpy as np
from mindspore import nn


def loss() -> nn.Cell:
    """The loss cell: (logits, int32 labels) -> the mean loss of the batch."""
    return nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")


def optimizer(params: list, cfg, lr) -> nn.Optimizer:
    """SGD with momentum (config.yaml's momentum). ``lr`` is config.yaml's lr, or with a
    schedule: a LearningRateSchedule giving each step's (config.yaml's schedule:)."""
    return nn.Momentum(params, lr, cfg.momentum)


def metrics(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Per-batch sums; each is divided by the number of samples (loss: mean loss,
    accuracy: the share classified right)."""
    logits = logits.astype(np.float64)
    # Cross-entropy by log-sum-exp, in float64 on the host: a few classes, cheap and exact.
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return {
        "loss": float(-log_probs[np.arange(len(labels)), labels].sum()),
        "accuracy": float((logits.argmax(axis=1) == labels).sum()),
    }


def evaluate(net: nn.Cell, batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """The mean of each metric over every sample of ``batches`` (inputs, labels).

    The last batch is usually smaller than the others: the network takes it as it is.
    """
    training = net.training
    net.set_train(False)  # BatchNorm uses its running statistics
    sums: dict[str, float] = {}
    count = 0
    for inputs, labels in batches:
        logits = net(ms.Tensor(inputs)).asnumpy()
        for name, value in metrics(logits, np.asarray(labels)).items():
            sums[name] = sums.get(name, 0.0) + value
        count += len(labels)
    net.set_train(training)
    return {name: total / max(count, 1) for name, total in sums.items()}
