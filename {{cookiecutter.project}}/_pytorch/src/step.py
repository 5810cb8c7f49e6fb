"""Your training step: what one batch of training does, the loss, the optimizer and the
metrics.

The scaffold calls these; it owns what is around them (devices, DDP, the learning-rate
schedule, checkpoints, the record). MindSpore projects have loss, optimizer and metrics
with the same arguments, and a train_step that returns the loss its compiled step
differentiates. ``outputs`` is what your model returns for a batch, ``labels``
the batch's labels: class indices, or float values (data: labels: values).
"""

from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F


def train_step(model: torch.nn.Module, batch: tuple, run) -> torch.Tensor:
    """One batch of training; returns its loss (for the log). Change it freely: a second
    loss term, an EMA of the weights after the step (README: Recipes). ``run`` holds what
    depends on the device and config.yaml: run.autocast() (mixed precision),
    run.backward(loss) (scaled, and averaged over the ``accumulate`` batches of a step),
    run.optimizer_step() (clipped to clip_grad_norm, stepped, cleared; True on the batch
    that stepped), run.optimizer."""
    inputs, labels = batch
    with run.autocast():
        value = loss(model(inputs), labels)
    run.backward(value)
    run.optimizer_step()
    return value


def loss(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean loss of a batch: what backward() differentiates."""
    return F.cross_entropy(outputs, labels)


def optimizer(
    params: Iterable[torch.nn.Parameter], lr: float, momentum: float
) -> torch.optim.Optimizer:
    """SGD with momentum at learning rate ``lr`` (config.yaml's lr). A parameter after lr
    named like an option of config.yaml gets its value (momentum here). The scaffold sets
    each group's lr every step, following config.yaml's schedule: (scaled by the group's
    own lr)."""
    return torch.optim.SGD(params, lr=lr, momentum=momentum)


def metrics(outputs: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-batch sums; the scaffold divides each by the number of samples (loss: the mean
    loss, accuracy: the share classified right), or by the "count" returned (the tokens of
    sequences; a derived(means) function here adds metrics made of the means: README). Kept
    on the device until the end. config.yaml's monitor: names the one that chooses the best
    checkpoint."""
    return {
        "loss": F.cross_entropy(outputs.float(), labels, reduction="sum"),
        "accuracy": (outputs.argmax(dim=1) == labels).sum(),
    }
