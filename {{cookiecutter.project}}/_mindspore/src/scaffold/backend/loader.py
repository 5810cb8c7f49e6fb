"""The splits as MindSpore data, each rank's batches cut by src/scaffold/data/sharding.py.

Three paths. Data held in memory is normalised once and batches are cut from it by
index. Data streamed from disk (data.in_memory false, or augmentation on) is read a
whole batch at a time by loader processes (src/scaffold/data/batches.py), in the
order of the same BatchPlan, handed over as uint8 and normalised a batch at a
time; a GeneratorDataset passes the batches on (one Python call a batch, not a
sample: the training process's interpreter lock is not held once per sample).
Streamed PNGs that need no conversion and no augmentation are read by MindSpore's
own ImageFolderDataset instead, in the plan's order (folder.py), and normalised a
batch at a time. Each way N ranks with batch b see exactly the samples of one
process with batch N x b, and a resumed run the order of an unbroken one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator

import mindspore.dataset as ds
import numpy as np

from src.scaffold.backend.folder import PngFolder, broken_image
from src.scaffold.config import DataOptions
from src.scaffold.data.batches import Batch, BatchReader, Prefetcher
from src.scaffold.data.normalise import Normalise
from src.scaffold.data.sharding import BatchPlan, cpu_count
from src.scaffold.data.splits import Split, Splits
from src.scaffold.errors import ConfigError, DatasetError

log = logging.getLogger(__name__)
COLUMNS = ["inputs", "labels"]
# Samples per evaluation step for data in memory; streamed data is evaluated in
# batches of the training size, which the device is known to hold.
EVAL_BATCH = 1000
# At most this many loader processes per rank: more rarely pays for their memory.
MAX_WORKERS = 8
# Accelerators per node, at most: msrun does not say how many of the job's ranks
# share this node.
DEVICES_PER_NODE = 8


def auto_workers(world_size: int) -> int:
    """Loader processes per rank: this node's CPUs shared by its ranks, one CPU of
    each share left to the rank's own process."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE") or min(world_size, DEVICES_PER_NODE))
    return max(1, min(MAX_WORKERS, cpu_count() // max(local, 1) - 1))


class EpochBatches:
    """An iterable source for GeneratorDataset: each pass is the next epoch's batches, as
    ``batches(epoch)`` gives them (cut from memory, or streamed).

    MindSpore starts one pass per epoch, in order (it may start the next before the
    current one ends, which changes nothing here).
    """

    def __init__(
        self, batches: Callable[[int], Iterator[Batch]], plan: BatchPlan, first_epoch: int
    ) -> None:
        self.batches, self.next_epoch = batches, first_epoch
        # MindSpore holds a pass to this length: a performance run that ends inside its
        # first epoch has a shorter one (a later epoch cut short is the last and ends early),
        # as has the rest of an epoch a run resumes inside (a dataset of its own).
        self.steps = plan.steps_in(first_epoch) - plan.skipped(first_epoch)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[Batch]:
        # A generator: the epoch is counted at the first batch asked for, not when
        # MindSpore makes an iterator it may never read.
        epoch = self.next_epoch
        self.next_epoch += 1
        yield from self.batches(epoch)


def label_type(split: Split) -> type:
    """int32 class indices (what MindSpore's losses take), float32 values of a numeric target."""
    return np.float32 if split.numeric else np.int32


def sinks_per_epoch(sink: bool, sink_size: int, steps: int) -> int:
    """How many sinks make one epoch: 1 without sink or with sink_size -1 (a whole epoch)."""
    if not sink or sink_size == -1 or sink_size >= steps:
        return 1
    if steps % sink_size:
        raise ConfigError(f"sink_size {sink_size} must divide the {steps} steps of an epoch")
    return steps // sink_size


class Loader:
    """The run's splits as MindSpore data: training batches for the loops, evaluation
    batches for the backend's evaluate."""

    def __init__(
        self,
        splits: Splits,
        data: DataOptions,
        batch_size: int,
        world_size: int,
        augment: Callable | None = None,
    ) -> None:
        self.splits, self.batch_size, self.augment = splits, batch_size, augment
        info = splits.info
        self.normalise = Normalise(info.mean, info.std, len(info.shape))
        images = len(splits.info.shape) == 3
        self.crop = data.random_crop if images else 0
        self.flip = data.random_flip and images
        if (data.random_crop or data.random_flip) and not images:
            log.warning("data.random_crop and random_flip apply to images: ignored for rows")
        # Augmentation draws per sample and epoch: it needs the streaming pipeline.
        self.streams = not splits.train.in_memory or bool(self.crop or self.flip)
        self.workers = auto_workers(world_size) if data.num_workers is None else data.num_workers
        self.prefetcher: Prefetcher | None = None
        # Streamed PNGs read as they are, not augmented: MindSpore's ImageFolderDataset
        # decodes them (None: the loader processes do).
        plain = self.streams and not (self.crop or self.flip)
        self.folder = PngFolder.of(splits.train) if plain else None
        # Normalised once, for the run: the splits held in memory.
        self.memory = {
            name: (self.normalise(split.arrays), split.labels.astype(label_type(split)))
            for name, split in self._named()
            if split.arrays is not None and not (name == "train" and self.streams)
        }
        if self.folder is not None:
            threads = max(1, self.workers)
            log.info(
                "data: training batches streamed (decoded by MindSpore's ImageFolderDataset, "
                "%d thread%s), normalised a batch at a time",
                threads,
                "s" if threads > 1 else "",
            )
        elif self.streams:
            how = f"{self.workers} loader process{'es' if self.workers > 1 else ''}"
            if not self.workers:
                how = "in the main process"
            log.info(
                "data: training batches streamed (decoded, %s, a batch per call), %s",
                "augmented, normalised" if self.crop or self.flip else "normalised",
                how,
            )
        else:
            log.info("data: training batches cut from memory, normalised once")

    def _named(self) -> Iterable[tuple[str, Split]]:
        return (("train", self.splits.train), ("val", self.splits.val), ("test", self.splits.test))

    def _streamed(self) -> Prefetcher:
        """The splits not in memory, read by the loader processes (started at the first
        batch); the training split augmented."""
        if self.prefetcher is None:
            readers = {
                name: BatchReader(
                    split,
                    split.labels.astype(label_type(split)),
                    *((self.augment, self.crop, self.flip) if name == "train" else ()),
                )
                for name, split in self._named()
                if name not in self.memory
            }
            self.prefetcher = Prefetcher(readers, self.workers)
        return self.prefetcher

    def close(self) -> None:
        """Stop the loader processes."""
        if self.prefetcher is not None:
            self.prefetcher.close()

    def train(self, plan: BatchPlan, first_epoch: int) -> tuple[ds.Dataset, int]:
        """The training data from ``first_epoch`` on, as a dataset of whole batches, and
        the steps of its first epoch (what a sink holds)."""
        if self.folder is not None:
            data = self.folder.dataset(plan, first_epoch, self.workers, self._inputs, COLUMNS)
            return data, plan.steps_in(first_epoch) - plan.skipped(first_epoch)
        if self.streams:
            # Read from disk ahead of the step by the loader processes, normalised here.
            reader = self._streamed()

            def batches(epoch: int) -> Iterator[Batch]:
                order = plan.batches(epoch)
                for inputs, labels in reader.batches("train", order, epoch, plan.seed):
                    yield self.normalise(inputs), labels

        else:
            inputs, labels = self.memory["train"]

            def batches(epoch: int) -> Iterator[Batch]:
                for index in plan.batches(epoch):
                    yield inputs[index], labels[index]  # one fancy-indexing copy a batch

        source = EpochBatches(batches, plan, first_epoch)
        # shuffle=False: the order is the source's, the same on every run and every rank.
        return ds.GeneratorDataset(source, column_names=COLUMNS, shuffle=False), source.steps

    def _inputs(self, images: np.ndarray) -> np.ndarray:
        """A batch of ImageFolderDataset's images (B, H, W, 3) as the model's inputs: the
        channels first (grey PNGs come back as three equal channels), normalised."""
        channels = self.splits.info.shape[0]
        return self.normalise(np.ascontiguousarray(images.transpose(0, 3, 1, 2)[:, :channels]))

    def broken_image(self, err: Exception) -> DatasetError | None:
        """A file ImageFolderDataset could not decode, named (None: ``err`` is another)."""
        return broken_image(err) if self.folder is not None else None

    def batches(self, name: str) -> Iterable[tuple[np.ndarray, np.ndarray]]:
        """The "val" or "test" split in order, in batches (the last one partial)."""
        if name in self.memory:
            inputs, labels = self.memory[name]
            return (
                (inputs[start : start + EVAL_BATCH], labels[start : start + EVAL_BATCH])
                for start in range(0, len(labels), EVAL_BATCH)
            )
        count, size = len(getattr(self.splits, name)), self.batch_size
        plan = (np.arange(i, min(i + size, count)) for i in range(0, count, size))
        batches = self._streamed().batches(name, plan)
        return ((self.normalise(inputs), labels) for inputs, labels in batches)
