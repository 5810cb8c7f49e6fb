"""Your training step: the loss, the optimizer (and its schedule) and the metrics.

The scaffold calls these; it owns the rest of the loop (devices, mixed precision,
DDP, the data loader, checkpoints). Change them here: the loss of every step
goes through ``loss``, the optimizer is built once by ``optimizer``, and
evaluation sums ``metrics`` over a split, then divides each sum by the sample count.
"""

from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F


def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean loss of a batch: what backward() differentiates."""
    return F.cross_entropy(logits, labels)


def optimizer(params: Iterable[torch.nn.Parameter], cfg) -> torch.optim.Optimizer:
    """SGD with momentum, from config.yaml's lr and momentum. The scaffold sets each
    group's lr every step, following config.yaml's schedule: (scaled by the group's own lr)."""
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum)


def metrics(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-batch sums; each is divided by the number of samples (loss: mean loss,
    accuracy: the share classified right). Kept on the device until the end."""
    return {
        "loss": F.cross_entropy(logits.float(), labels, reduction="sum"),
        "accuracy": (logits.argmax(dim=1) == labels).sum(),
    }
