"""Your training step: what one batch of training does, the loss, the optimizer and the
metrics, for a language model: the cross-entropy of each next token.

The scaffold calls these; it owns what is around them (devices, DDP, the learning-rate
schedule, checkpoints, the record). ``outputs`` is what your model returns for a batch, scores
(batch, T, vocabulary); ``labels`` the batch's next tokens (batch, T), int64.
"""

from __future__ import annotations

import math
from typing import Iterable

import torch
import torch.nn.functional as F


def train_step(model: torch.nn.Module, batch: tuple, run) -> torch.Tensor:
    """One batch of training; returns its loss (for the log). ``run`` holds what depends on
    the device and config.yaml: run.autocast() (mixed precision), run.backward(loss) (scaled,
    and averaged over the ``accumulate`` batches of a step), run.optimizer_step() (clipped to
    clip_grad_norm, stepped, cleared; True on the batch that stepped), run.optimizer."""
    inputs, labels = batch
    with run.autocast():
        value = loss(model(inputs), labels)
    run.backward(value)
    run.optimizer_step()
    return value


def loss(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy over every token of the batch: what backward() differentiates."""
    return F.cross_entropy(outputs.flatten(0, -2), labels.flatten())


def optimizer(
    params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float = 0.1
) -> torch.optim.Optimizer:
    """AdamW at learning rate ``lr`` (config.yaml's lr), decaying the matrices (embeddings and
    linear layers), not the biases and norms, as nanoGPT does. The scaffold sets each group's
    lr every step, following config.yaml's schedule:."""
    params = [p for p in params if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def metrics(outputs: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-batch sums, divided by the tokens ("count"): the loss per token. Kept on the device
    until the end. config.yaml's monitor: names the one that chooses the best checkpoint."""
    total = F.cross_entropy(outputs.flatten(0, -2).float(), labels.flatten(), reduction="sum")
    return {"loss": total, "count": labels.numel()}


def derived(means: dict[str, float]) -> dict[str, float]:
    """Metrics made of the means: the perplexity, e to the loss per token."""
    return {"perplexity": math.exp(means["loss"])}
