"""Batches read ahead by loader processes (src/scaffold/data/batches.py): the same batches in
the same order whatever the workers, augmentation drawn per sample and epoch, and a loader
process that dies is one line, not a hang."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from src.scaffold.data.batches import BatchReader, Prefetcher
from src.scaffold.data.splits import Split
from src.scaffold.errors import DatasetError

SHAPE = (1, 4, 4)


def split_of(tmp_path: Path, count: int) -> Split:
    """Sample i is a file holding an image filled with i."""
    files = []
    for i in range(count):
        path = tmp_path / f"{i}.npy"
        np.save(path, np.full(SHAPE, i, np.uint8))
        files.append(path)
    return Split(np.arange(count) % 10, SHAPE, files=tuple(files), decode=np.load)


def flip_all(sample: np.ndarray, rng: np.random.Generator, crop: int, flip: bool) -> np.ndarray:
    # Marks the sample with a draw of its own stream: equal draws give equal batches.
    out = sample.copy()
    out[0, 0, 0] = rng.integers(0, 256)
    return out


def read(prefetcher: Prefetcher, plan: list[np.ndarray], epoch: int = 1) -> list[tuple]:
    try:
        return list(prefetcher.batches("train", plan, epoch, seed=7))
    finally:
        prefetcher.close()


@pytest.mark.parametrize("augment", [False, True])
def test_workers_give_the_batches_of_one_process_in_order(tmp_path: Path, augment: bool) -> None:
    split = split_of(tmp_path, 40)
    labels = split.labels.astype(np.int32)
    plan = [np.random.default_rng(i).permutation(40)[:8] for i in range(9)]
    options = (flip_all, 0, True) if augment else ()
    got = {
        workers: read(Prefetcher({"train": BatchReader(split, labels, *options)}, workers), plan)
        for workers in (0, 2)
    }
    assert len(got[0]) == len(got[2]) == len(plan)
    for (alone, labels_a), (ahead, labels_b), indices in zip(got[0], got[2], plan):
        assert alone.dtype == np.uint8 and alone.shape == (8, *SHAPE)
        np.testing.assert_array_equal(alone, ahead)
        np.testing.assert_array_equal(labels_a, labels_b)
        np.testing.assert_array_equal(labels_a, indices % 10)
        if not augment:
            np.testing.assert_array_equal(alone[:, 0, 1, 1], indices)


def test_a_loader_process_that_dies_is_one_line(tmp_path: Path) -> None:
    split = split_of(tmp_path, 16)
    prefetcher = Prefetcher({"train": BatchReader(split, split.labels)}, 1)
    batches = prefetcher.batches("train", [np.arange(4)] * 50)
    next(batches)
    assert prefetcher.pool is not None
    for pid in list(prefetcher.pool._processes):
        os.kill(pid, signal.SIGKILL)
    with pytest.raises(DatasetError, match="a loader process died"):
        list(batches)
    prefetcher.close()
