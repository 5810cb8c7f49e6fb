"""Sharding: N ranks together see what one process sees, in an order fixed by (seed, epoch)."""

from __future__ import annotations

import numpy as np
import pytest

from src.scaffold.data.sharding import BatchPlan, epoch_order, rank_batches
from src.scaffold.errors import ConfigError


def test_ranks_split_each_global_batch_of_one_process() -> None:
    single = rank_batches(100, 8, world_size=1, rank=0, seed=3, epoch=2)
    shards = [rank_batches(100, 4, world_size=2, rank=r, seed=3, epoch=2) for r in range(2)]
    assert single.shape == (12, 8)  # 100 // 8 steps; the 4 left over are dropped
    np.testing.assert_array_equal(np.concatenate(shards, axis=1), single)


def test_every_rank_runs_the_same_steps_on_disjoint_samples() -> None:
    shards = [rank_batches(1000, 7, world_size=3, rank=r, seed=0, epoch=1) for r in range(3)]
    assert {s.shape for s in shards} == {(47, 7)}
    seen = np.concatenate([s.ravel() for s in shards])
    assert len(np.unique(seen)) == len(seen)


def test_order_depends_on_seed_and_epoch_only() -> None:
    first = epoch_order(50, seed=1, epoch=1)
    np.random.seed(123)  # the global generator must not matter
    np.random.rand(10)
    np.testing.assert_array_equal(epoch_order(50, seed=1, epoch=1), first)
    assert not np.array_equal(epoch_order(50, seed=1, epoch=2), first)
    assert not np.array_equal(epoch_order(50, seed=2, epoch=1), first)
    assert sorted(first) == list(range(50))


def test_global_batch_larger_than_dataset() -> None:
    with pytest.raises(ConfigError, match="exceeds the 10 training samples"):
        rank_batches(10, 8, world_size=2, rank=0, seed=0, epoch=1)


def test_max_steps_cuts_the_epoch_where_it_runs_out() -> None:
    # 1,294 samples in batches of 32: 40 steps an epoch.
    inside_the_first = BatchPlan(1294, 32, 1, 0, 0, max_steps=30)
    assert inside_the_first.steps_in(1) == len(inside_the_first.batches(1)) == 30
    assert inside_the_first.last_epoch(12) == 1
    into_the_second = BatchPlan(1294, 32, 1, 0, 0, max_steps=50)
    assert [into_the_second.steps_in(e) for e in (1, 2, 3)] == [40, 10, 0]
    assert len(into_the_second.batches(2)) == 10 and into_the_second.last_epoch(12) == 2
    assert BatchPlan(1294, 32, 1, 0, 0).steps_in(7) == 40


def test_a_resumed_epoch_starts_at_its_first_batch_not_trained() -> None:
    plan = BatchPlan(100, 8, 1, 0, seed=3)  # 12 steps an epoch
    resumed = BatchPlan(100, 8, 1, 0, seed=3, begun=(2, 5))
    np.testing.assert_array_equal(resumed.batches(2), plan.batches(2)[5:])
    np.testing.assert_array_equal(resumed.batches(3), plan.batches(3))
    assert (resumed.skipped(2), resumed.skipped(3)) == (5, 0)


def test_optimizer_steps_are_counted_by_training_step() -> None:
    # 12 batches an epoch, 5 a step: steps end at batches 5, 10 and 12 (the epoch's end).
    plan = BatchPlan(100, 8, 1, 0, seed=0, accumulate=5)
    assert [plan.updates_by(step) for step in (0, 4, 5, 9, 10, 11, 12, 13, 17)] == [
        *(0, 0, 1, 1, 2, 2, 3, 3, 4),
    ]
