"""Your training step: the loss of one batch of training, the loss, the optimizer and
the metrics.

The scaffold calls these; it owns the loop around them (devices, mixed precision, loss
scaling, gradient averaging over the ranks, data sink, checkpoints). PyTorch projects have
loss, optimizer and metrics with the same arguments, and a train_step that also takes the
backward pass and the optimizer step. ``outputs`` is what your model returns for a batch,
``labels`` the batch's labels: int32 class indices, or float32 values (data: labels: values)."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import nn, ops


def loss(outputs: ms.Tensor, labels: ms.Tensor) -> ms.Tensor:
    """The mean loss of a batch: what the training step differentiates. It runs inside
    the compiled step (graph mode): use mindspore.ops, not numpy."""
    return ops.cross_entropy(outputs, labels)


def train_step(net: nn.Cell, batch: tuple) -> ms.Tensor:
    """One batch of training: the loss the scaffold differentiates (it scales, averages
    over the ranks, clips and steps the optimizer). Compiled with the step: a second loss
    term, or one on an intermediate output of your model, goes here (see the README's
    Recipes)."""
    inputs, labels = batch
    return loss(net(inputs), labels)


def optimizer(params: list, lr, momentum: float) -> nn.Optimizer:
    """SGD with momentum at learning rate ``lr``. A parameter after lr named like an option
    of config.yaml gets its value (momentum here). MindSpore's optimizer owns the schedule:
    with config.yaml's schedule: other than constant, ``lr`` is a list of one learning
    rate per step, which it looks up by its step count."""
    return nn.Momentum(params, lr, momentum)


def metrics(outputs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Per-batch sums; the scaffold divides each by the number of samples (loss: the mean
    loss, accuracy: the share classified right), or by the "count" returned (the tokens of
    sequences; a derived(means) function here adds metrics made of the means: README).
    Computed on the host with numpy, from the outputs the scaffold copied back. config.yaml's
    monitor: names the one that chooses the best checkpoint."""
    outputs = outputs.astype(np.float64)
    # Cross-entropy by log-sum-exp, in float64: a few classes, cheap and exact.
    shifted = outputs - outputs.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return {
        "loss": float(-log_probs[np.arange(len(labels)), labels].sum()),
        "accuracy": float((outputs.argmax(axis=1) == labels).sum()),
    }
