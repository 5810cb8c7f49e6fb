"""The streaming loader: each rank reads its own shard, the shards together are one process's
batches, and streamed batches equal the in-memory ones."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from src.scaffold.backend import loader
from src.scaffold.backend.loader import InMemory, Normalise, PlanSampler, SplitDataset, Streamed
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.data.splits import synthetic

SAMPLES, BATCH = 100, 8


def shard(rank: int, world_size: int, epoch: int) -> np.ndarray:
    dataset = SplitDataset(synthetic(SAMPLES, (1, 4, 4), 3, seed=0))
    sampler = PlanSampler(dataset, BatchPlan(SAMPLES, BATCH, world_size, rank, seed=1))
    sampler.set_epoch(epoch)
    return np.array(list(sampler)).reshape(-1, BATCH)


def test_two_ranks_read_disjoint_halves_of_one_process_batches() -> None:
    for epoch in (1, 2):
        rank0, rank1 = shard(0, 2, epoch), shard(1, 2, epoch)
        assert not set(rank0.ravel()) & set(rank1.ravel())
        one = BatchPlan(SAMPLES, 2 * BATCH, 1, 0, seed=1).batches(epoch)
        # Step by step, the two ranks' batches are the single process's batch of 16.
        assert len(rank0) == len(rank1) == len(one)
        for step, batch in enumerate(one):
            assert sorted(batch) == sorted([*rank0[step], *rank1[step]])
    assert not np.array_equal(shard(0, 2, 1), shard(0, 2, 2))  # a new order each epoch


def test_streamed_batches_equal_the_in_memory_ones() -> None:
    split = synthetic(SAMPLES, (1, 4, 4), 3, seed=0)
    normalise = Normalise([100.0], [50.0], 3, torch.device("cpu"))
    plan = BatchPlan(SAMPLES, BATCH, 1, 0, seed=1)
    held = list(InMemory(split, normalise, torch.device("cpu")).epoch(plan, 1))
    streamed = list(Streamed(split, normalise, torch.device("cpu"), 0, BATCH).epoch(plan, 1))
    assert len(held) == len(streamed) == SAMPLES // BATCH
    for (a, la), (b, lb) in zip(held, streamed):
        # The same uint8 pixels through the same float operations: equal, not just close.
        assert torch.equal(a, b) and torch.equal(la, lb)


def test_workers_default_from_the_cpus_and_devices(monkeypatch) -> None:
    monkeypatch.setattr(loader, "cpu_count", lambda: 16)
    assert [loader.auto_workers(n) for n in (1, 2, 4, 8, 32)] == [8, 8, 4, 2, 1]


def test_the_loader_pins_for_a_gpu_and_keeps_its_workers() -> None:
    split = synthetic(SAMPLES, (1, 4, 4), 3, seed=0)
    normalise = Normalise([0.0], [1.0], 3, torch.device("cpu"))
    # Pinning pays only for a copy to a GPU; the device is only named here, not used.
    assert Streamed(split, normalise, torch.device("cuda", 0), 2, BATCH).pin
    streamed = Streamed(split, normalise, torch.device("cpu"), 1, BATCH)
    assert not streamed.pin
    plan = BatchPlan(SAMPLES, BATCH, 1, 0, seed=1)
    assert len(list(streamed.epoch(plan, 1))) == SAMPLES // BATCH
    first = streamed.loader
    assert first.persistent_workers and first.num_workers == 1
    assert isinstance(first.sampler, DistributedSampler)
    list(streamed.epoch(plan, 2))
    assert streamed.loader is first  # the same worker processes serve every epoch
