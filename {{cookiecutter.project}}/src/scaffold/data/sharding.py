"""What each rank gets: its samples, step by step (deterministic sharding), and the CPUs."""

from __future__ import annotations

import os

import numpy as np

from src.scaffold.errors import ConfigError


def epoch_order(num_samples: int, seed: int, epoch: int) -> np.ndarray:
    """A permutation of the samples that depends only on (seed, epoch).

    Every rank computes the same order without communicating, and a resumed
    run sees the same order as an uninterrupted one, whatever else has drawn
    from the global random generators.
    """
    return np.random.default_rng([seed, epoch]).permutation(num_samples)


def whole_batches(num_samples: int, batch_size: int, world_size: int) -> int:
    """The steps of an epoch: the global batches (batch_size x world_size) the samples
    fill. ConfigError where they fill none."""
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
    """This rank's sample indices for one epoch, shape (steps, batch_size).

    Each step takes a global batch of batch_size * world_size samples from the
    epoch's order and gives rank r its r-th contiguous slice, so N ranks see
    exactly the samples one process would with an N times larger batch. The
    incomplete last global batch is dropped: every rank runs the same steps.
    """
    global_batch = batch_size * world_size
    steps = whole_batches(num_samples, batch_size, world_size)
    order = epoch_order(num_samples, seed, epoch)[: steps * global_batch]
    return order.reshape(steps, world_size, batch_size)[:, rank]


def cpu_count() -> int:
    """The CPUs this process may use: fewer than the machine's in a container with a cpuset."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
