"""PyTorch's own training options, declared as the shared ones are (src/scaffold/config)."""

from __future__ import annotations

from dataclasses import dataclass

from src.scaffold.config import Config, option
from src.scaffold.config.converters import integer, number


@dataclass(frozen=True)
class PTConfig(Config):
    """The options of one PyTorch training run: the optimizer step's, which
    src/step.py's train_step takes through its ``run`` (src/scaffold/backend/stepping.py)."""

    accumulate: int = option(
        1, integer(1), "batches whose gradients make one optimizer step (the schedule counts steps)"
    )
    clip_grad_norm: float | None = option(
        None, number(0), "clip the gradients' global norm to this before each optimizer step"
    )
