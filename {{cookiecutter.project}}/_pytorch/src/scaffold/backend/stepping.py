"""src/step.py's train_step's ``run``: the device's and config's parts of a step (precision,
scaling, accumulation, clipping), so that the step itself is yours (Lightning Fabric's shape)."""

from __future__ import annotations

from typing import Any, ContextManager

import torch

from src.scaffold.backend.precision import Precision


def default_train_step(model: Any, batch: Any, run: StepRun) -> torch.Tensor:
    """src/step.py's train_step where it has none (a step.py older than the hook)."""
    inputs, labels = batch
    with run.autocast():
        loss = run.loss_fn(model(inputs), labels)
    run.backward(loss)
    run.optimizer_step()
    return loss


class StepRun:
    """``window`` batches (accumulate, fewer at an epoch's end) share a step, after the ``last``."""

    def __init__(
        self, optimizer: torch.optim.Optimizer, precision: Precision, clip: float | None, loss: Any
    ) -> None:
        self.optimizer, self.precision, self.scaler = optimizer, precision, precision.scaler()
        self.clip, self.loss_fn = clip, loss  # clip_grad_norm, src/step.py's loss
        self.window, self.last = 1, True

    def autocast(self) -> ContextManager[Any]:
        """The forward pass's context: autocast to the run's precision (none in float32)."""
        return self.precision.autocast()

    def backward(self, loss: torch.Tensor) -> None:
        """Adds the gradients of ``loss`` / window (its share of the step's mean), scaled."""
        share = loss / self.window if self.window > 1 else loss
        (share if self.scaler is None else self.scaler.scale(share)).backward()

    def optimizer_step(self) -> bool:
        """On the step's last batch: unscale, clip, step, clear; True then, else False."""
        if not self.last:
            return False
        if self.clip is not None:
            if self.scaler is not None:
                self.scaler.unscale_(self.optimizer)
            params = [p for group in self.optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, self.clip)
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return True
