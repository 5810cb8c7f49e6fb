"""Your training step: the loss of one batch of training, the loss, the optimizer and
the metrics, for a language model: a class (the next token) at each position.

The scaffold calls these; it owns the loop around them (devices, mixed precision, loss
scaling, gradient averaging over the ranks, data sink, checkpoints). PyTorch projects have
loss, optimizer and metrics with the same arguments, and a train_step that also takes the
backward pass and the optimizer step. ``outputs`` is what your model returns for a batch,
scores (N, T, vocabulary); ``labels`` the batch's labels, the next ids (N, T)."""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import nn, ops


def loss(outputs: ms.Tensor, labels: ms.Tensor) -> ms.Tensor:
    """The mean cross-entropy over every token of the batch: what the training step
    differentiates. It runs inside the compiled step (graph mode): use mindspore.ops."""
    return ops.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), labels.reshape(-1))


def train_step(net: nn.Cell, batch: tuple) -> ms.Tensor:
    """One batch of training: the loss the scaffold differentiates (it scales, averages
    over the ranks, clips and steps the optimizer). Compiled with the step: a second loss
    term goes here (see the README's Recipes)."""
    inputs, labels = batch
    return loss(net(inputs), labels)


def optimizer(params: list, lr, weight_decay: float = 0.1) -> nn.Optimizer:
    """AdamW at learning rate ``lr``, decaying the matrices (weights, embeddings) by
    ``weight_decay`` and not the biases and norms. A parameter after lr named like an option of
    config.yaml gets its value; weight_decay is none, so this default holds. MindSpore's
    optimizer owns the schedule: with config.yaml's schedule: other than constant, ``lr`` is a
    list of one learning rate per step, which it looks up by its step count."""
    matrices = [p for p in params if len(p.shape) >= 2]
    others = [p for p in params if len(p.shape) < 2]
    groups = [
        {"params": matrices, "weight_decay": weight_decay},
        {"params": others, "weight_decay": 0.0},
    ]
    return nn.AdamWeightDecay(groups, lr, beta1=0.9, beta2=0.95, eps=1e-8)


def metrics(outputs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Per-batch sums over the tokens, and their "count": the scaffold divides each sum by
    the count of all batches (loss: the mean loss a token). Computed on the host with numpy,
    from the outputs the scaffold copied back. config.yaml's monitor: names the one that
    chooses the best checkpoint (loss, min)."""
    scores = outputs.reshape(-1, outputs.shape[-1]).astype(np.float64)
    scores -= scores.max(axis=1, keepdims=True)
    log_probs = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    labels = labels.reshape(-1)
    total = -log_probs[np.arange(len(labels)), labels].sum()
    return {"loss": float(total), "count": labels.size}


def derived(means: dict[str, float]) -> dict[str, float]:
    """Metrics made of the means: perplexity, e to the mean loss a token."""
    return {"perplexity": math.exp(means["loss"])}
