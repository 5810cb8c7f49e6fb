"""MNIST as MindSpore data: normalised once, each rank's batches cut by src/sharding.py."""

from __future__ import annotations

from collections.abc import Iterator

import mindspore.dataset as ds
import numpy as np

from src.backend_api import BatchPlan
from src.errors import ConfigError
from src.mnist import Split

# MNIST's pixel mean and standard deviation, as in the PyTorch project.
MEAN, STD = 0.1307, 0.3081


def normalised(split: Split) -> Split:
    """Images as float32 (N, 1, 28, 28), normalised once for the run, and int32 labels,
    as MindSpore's sparse cross-entropy takes them."""
    scaled = split.images.astype(np.float32)[:, None] / np.float32(255)
    images = (scaled - np.float32(MEAN)) / np.float32(STD)
    return Split(images, split.labels.astype(np.int32))


class EpochBatches:
    """An iterable source for GeneratorDataset: each pass is the next epoch's batches.

    The order depends only on (seed, epoch), through the plan: N ranks with batch
    b see exactly the samples of one process with batch N x b, and a resumed run
    the order of an unbroken one. MindSpore starts one pass per epoch, in order
    (it may start the next before the current one ends, which changes nothing here).
    """

    def __init__(self, data: Split, plan: BatchPlan, first_epoch: int) -> None:
        self.data, self.plan = data, plan
        self.next_epoch = first_epoch
        # MindSpore holds a pass to this length: a performance run that ends inside its
        # first epoch has a shorter one (a later epoch cut short is the last and ends early).
        self.steps = plan.steps_in(first_epoch)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        batches = self.plan.batches(self.next_epoch)
        self.next_epoch += 1
        for index in batches:
            # One fancy-indexing copy per batch from arrays already normalised.
            yield self.data.images[index], self.data.labels[index]


def sinks_per_epoch(sink: bool, sink_size: int, steps: int) -> int:
    """How many sinks make one epoch: 1 without sink or with sink_size -1 (a whole epoch)."""
    if not sink or sink_size == -1 or sink_size >= steps:
        return 1
    if steps % sink_size:
        raise ConfigError(f"sink_size {sink_size} must divide the {steps} steps of an epoch")
    return steps // sink_size


def train_dataset(source: EpochBatches) -> ds.GeneratorDataset:
    """The training data as a MindSpore dataset of whole batches, in the source's order."""
    # shuffle=False: the order is the source's, the same on every run and every rank.
    return ds.GeneratorDataset(source, column_names=["image", "label"], shuffle=False)
