"""What each rank gets: its samples, step by step (deterministic sharding), and the CPUs."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from src.scaffold.errors import ConfigError


def epoch_order(num_samples: int, seed: int, epoch: int) -> np.ndarray:
    """A permutation depending only on (seed, epoch): alike on every rank and after a resume."""
    return np.random.default_rng([seed, epoch]).permutation(num_samples)


def whole_batches(num_samples: int, batch_size: int, world_size: int) -> int:
    """The global batches (batch_size x world_size) the samples fill; ConfigError for none."""
    global_batch = batch_size * world_size
    if num_samples < global_batch:
        raise ConfigError(
            f"batch_size {batch_size} x {world_size} devices = {global_batch} exceeds the "
            f"{num_samples} training samples; lower --batch_size"
        )
    return num_samples // global_batch


def rank_batches(
    num_samples: int, batch_size: int, world_size: int, rank: int, seed: int, epoch: int
) -> np.ndarray:
    """This rank's slice of each whole global batch of the epoch, shape (steps, batch_size)."""
    steps = whole_batches(num_samples, batch_size, world_size)
    order = epoch_order(num_samples, seed, epoch)[: steps * batch_size * world_size]
    return order.reshape(steps, world_size, batch_size)[:, rank]


def cpu_count() -> int:
    """The CPUs this process may use: fewer than the machine's in a container with a cpuset."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True)
class BatchPlan:
    """This rank's samples for each step of each epoch, cut short after ``max_steps`` in all."""

    num_samples: int
    batch_size: int
    world_size: int
    rank: int
    seed: int
    max_steps: int | None = None
    accumulate: int = 1  # batches whose gradients make one optimizer step
    begun: tuple[int, int] = (0, 0)  # a mid-epoch resume: (that epoch, its batches done)

    @property
    def steps_per_epoch(self) -> int:
        return self.num_samples // (self.batch_size * self.world_size)

    def steps_in(self, epoch: int) -> int:
        """Training steps in ``epoch``: fewer in the one where max_steps runs out."""
        if self.max_steps is None:
            return self.steps_per_epoch
        left = self.max_steps - (epoch - 1) * self.steps_per_epoch
        return max(0, min(self.steps_per_epoch, left))

    def steps_done(self, epoch: int) -> int:
        steps = epoch * self.steps_per_epoch
        return steps if self.max_steps is None else min(steps, self.max_steps)

    def last_epoch(self, epoch_size: int) -> int:
        """The epoch in which max_steps runs out (epoch_size without a limit)."""
        if self.max_steps is None:
            return epoch_size
        return min(epoch_size, -(-self.max_steps // max(self.steps_per_epoch, 1)))

    @property
    def updates_per_epoch(self) -> int:
        return -(-self.steps_per_epoch // self.accumulate)

    def updates_in(self, epoch: int) -> int:
        """Optimizer steps in ``epoch``: one per ``accumulate`` batches and on its last batch."""
        return -(-self.steps_in(epoch) // self.accumulate)

    def updates_done(self, epoch: int) -> int:
        """Optimizer steps taken by the end of ``epoch`` (what the schedule counts)."""
        return sum(self.updates_in(done) for done in range(1, epoch + 1))

    def window(self, epoch: int, index: int) -> tuple[int, bool]:
        """Batch ``index`` of ``epoch``: its optimizer step's batches, and if it is the last."""
        start = index - index % self.accumulate
        size = min(self.accumulate, self.steps_in(epoch) - start)
        return size, index == start + size - 1

    def skipped(self, epoch: int) -> int:
        """Batches of ``epoch`` an earlier attempt trained already (a mid-epoch resume)."""
        return self.begun[1] if epoch == self.begun[0] else 0

    def epoch_of(self, step: int) -> int:
        """The epoch training step ``step`` (1-based, over the run) belongs to."""
        return max(1, -(-step // max(self.steps_per_epoch, 1)))

    def updates_by(self, step: int) -> int:
        """Optimizer steps taken once training step ``step`` (1-based, over the run) is done."""
        epoch = self.epoch_of(step)
        index = step - (epoch - 1) * self.steps_per_epoch
        if index >= self.steps_in(epoch):
            return self.updates_done(epoch)
        return self.updates_done(epoch - 1) + index // self.accumulate

    def batches(self, epoch: int) -> np.ndarray:
        """This rank's sample indices for ``epoch`` from the first batch not yet trained."""
        plan = (self.num_samples, self.batch_size, self.world_size, self.rank, self.seed, epoch)
        return rank_batches(*plan)[: self.steps_in(epoch)][self.skipped(epoch) :]
