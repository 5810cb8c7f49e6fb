"""The learning rate of every step for both frameworks: config.yaml's schedule (constant, step,
cosine) after a linear warmup; steps count over the whole run, so a resume continues the curve."""

from __future__ import annotations

import math
from dataclasses import dataclass

from src.scaffold.config import ScheduleOptions
from src.scaffold.errors import ConfigError


@dataclass(frozen=True)
class Schedule:
    """The learning rate at each of total_steps steps."""

    base: float
    name: str = "constant"
    total_steps: int = 1
    steps_per_epoch: int = 1
    warmup_steps: int = 0
    step_epochs: int = 1
    gamma: float = 0.1
    min_lr: float = 0.0

    @classmethod
    def of(cls, asked: ScheduleOptions, lr: float, steps_per_epoch: int, total: int) -> Schedule:
        """The schedule config.yaml's schedule: asks for at ``lr``, over ``total`` steps."""
        if asked.name == "cosine" and asked.min_lr >= lr:
            raise ConfigError(f"schedule.min_lr {asked.min_lr:g} must be below lr {lr:g}")
        return cls(
            base=lr,
            name=asked.name,
            total_steps=max(total, 1),
            steps_per_epoch=max(steps_per_epoch, 1),
            warmup_steps=round(asked.warmup_epochs * steps_per_epoch),
            step_epochs=asked.step_epochs,
            gamma=asked.gamma,
            min_lr=asked.min_lr,
        )

    @property
    def constant(self) -> bool:
        """True when every step trains at base: frameworks may then pass a plain number."""
        return self.name == "constant" and self.warmup_steps == 0

    def lr(self, step: int) -> float:
        """The learning rate of step ``step`` (0 is the first step of the run)."""
        if step < self.warmup_steps:
            return self.base * (step + 1) / self.warmup_steps
        if self.name == "step":
            return self.base * self.gamma ** (step // (self.step_epochs * self.steps_per_epoch))
        if self.name == "cosine":
            span = max(self.total_steps - 1 - self.warmup_steps, 1)
            progress = min(max(step - self.warmup_steps, 0) / span, 1.0)
            half = (self.base - self.min_lr) * 0.5
            return self.min_lr + half * (1 + math.cos(math.pi * progress))
        return self.base

    def scaled(self, base: float, step: int) -> float:
        """lr(step) for a parameter group whose own lr is ``base`` (exact for the schedule's)."""
        value = self.lr(step)
        return value if base == self.base else base * value / self.base

    def values(self) -> list[float]:
        """Every step's learning rate, in order (MindSpore's optimizer reads them by step)."""
        return [self.lr(step) for step in range(self.total_steps)]
