"""MNIST as MindSpore datasets: normalised once, each rank's batches cut by src/sharding.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import mindspore.dataset as ds
import numpy as np

from src.config import Config
from src.mnist import load_mnist, synthetic_mnist
from src.sharding import rank_batches

# MNIST's pixel mean and standard deviation, as in the PyTorch project.
MEAN, STD = 0.1307, 0.3081
SMOKE_STEPS = 2


@dataclass(frozen=True)
class Arrays:
    """One split ready for the network: float32 images (N, 1, 28, 28) and int32 labels."""

    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def normalise(images: np.ndarray) -> np.ndarray:
    """uint8 (N, 28, 28) -> normalised float32 (N, 1, 28, 28), computed once for the run."""
    scaled = images.astype(np.float32)[:, None] / np.float32(255)
    return (scaled - np.float32(MEAN)) / np.float32(STD)


def load(cfg: Config, world_size: int) -> tuple[Arrays, Arrays]:
    """The train and test splits: MNIST from cfg.data_dir, or random data for --smoke."""
    if cfg.smoke:
        # A few steps of random data: exercises every part of a run in seconds.
        train, test = synthetic_mnist(SMOKE_STEPS * cfg.batch_size * world_size, cfg.batch_size)
    else:
        train, test = load_mnist(cfg.data_dir)
    # int32: MindSpore's sparse cross-entropy takes int32 labels.
    return (
        Arrays(normalise(train.images), train.labels.astype(np.int32)),
        Arrays(normalise(test.images), test.labels.astype(np.int32)),
    )


class EpochBatches:
    """An iterable source for GeneratorDataset: each pass is the next epoch's batches.

    The order depends only on (seed, epoch), through src/sharding.py: N ranks
    with batch b see exactly the samples of one process with batch N x b, and a
    resumed run the order of an unbroken one. MindSpore starts one pass per
    epoch, in order (it may start the next before the current one ends, which
    changes nothing here).
    """

    def __init__(
        self, data: Arrays, batch_size: int, world_size: int, rank: int, seed: int, first_epoch: int
    ) -> None:
        self.data = data
        self.batch_size = batch_size
        self.world_size = world_size
        self.rank = rank
        self.seed = seed
        self.next_epoch = first_epoch
        # Checks the batch against the data size once, before MindSpore starts.
        self.steps = len(self._batches(first_epoch))

    def _batches(self, epoch: int) -> np.ndarray:
        n = len(self.data)
        return rank_batches(n, self.batch_size, self.world_size, self.rank, self.seed, epoch)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        batches = self._batches(self.next_epoch)
        self.next_epoch += 1
        for index in batches:
            # One fancy-indexing copy per batch from arrays already normalised.
            yield self.data.images[index], self.data.labels[index]


def train_dataset(source: EpochBatches) -> ds.GeneratorDataset:
    """The training data as a MindSpore dataset of whole batches, in the source's order."""
    # shuffle=False: the order is the source's, the same on every run and every rank.
    return ds.GeneratorDataset(source, column_names=["image", "label"], shuffle=False)
