"""The splits as MindSpore data in data/sharding.py's order: from memory, streamed a batch per call
by loader processes (data/batches.py), or plain PNGs by ImageFolderDataset (folder.py). N ranks
with batch b see the samples of one with batch N x b; a resumed run those of an unbroken one."""

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
# Samples per evaluation step from memory (streamed: the training batch size, known to fit).
# At most this many loader processes per rank: more rarely pays for their memory.
MAX_WORKERS = 8
# Accelerators per node, at most: msrun does not say how many of the job's ranks share a node.
DEVICES_PER_NODE = 8


class EpochBatches:
    """GeneratorDataset's source: each pass (one per epoch, in order) the next epoch's batches."""

    def __init__(self, batches: Callable[[int], Iterator[Batch]], first: int, steps: int) -> None:
        self.batches, self.next_epoch, self.steps = batches, first, steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[Batch]:
        # The epoch counted at the first batch asked for, not at an iterator never read.
        epoch = self.next_epoch
        self.next_epoch += 1
        yield from self.batches(epoch)


def labels_of(split: Split) -> np.ndarray:
    """int32 class indices (what MindSpore's losses take), float32 values of a numeric target;
    a memory map's (the tokens of a corpus) left on disk, cast a batch at a time (typed)."""
    return split.labels if isinstance(split.labels, np.memmap) else typed(split.labels)


def typed(labels: np.ndarray) -> np.ndarray:
    return labels.astype(np.float32 if labels.dtype.kind == "f" else np.int32, copy=False)


def sinks_per_epoch(sink: bool, sink_size: int, steps: int) -> int:
    """How many sinks make one epoch: 1 without sink or with sink_size -1 (a whole epoch)."""
    if not sink or sink_size == -1 or sink_size >= steps:
        return 1
    if steps % sink_size:
        raise ConfigError(f"sink_size {sink_size} must divide the {steps} steps of an epoch")
    return steps // sink_size


class Loader:
    """The run's splits as MindSpore data: training batches for the loops, evaluation ones."""

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
        images = len(info.shape) == 3
        self.crop = data.random_crop if images else 0
        self.flip = data.random_flip and images
        # Augmentation draws per sample and epoch: it needs the streaming pipeline.
        self.streams = not splits.train.in_memory or bool(self.crop or self.flip)
        # By default a rank's share of this node's CPUs, less one for the rank itself.
        local = int(os.environ.get("LOCAL_WORLD_SIZE") or min(world_size, DEVICES_PER_NODE))
        auto = max(1, min(MAX_WORKERS, cpu_count() // max(local, 1) - 1))
        self.workers = auto if data.num_workers is None else data.num_workers
        self.prefetcher: Prefetcher | None = None
        # Streamed PNGs read as they are, not augmented: ImageFolderDataset decodes them.
        plain = self.streams and not (self.crop or self.flip)
        self.folder = PngFolder.of(splits.train) if plain else None
        self.memory = {
            name: (self.normalise(split.arrays), labels_of(split))
            for name, split in self._named()
            if split.arrays is not None and not (name == "train" and self.streams)
        }
        if self.folder is not None:
            threads = max(1, self.workers)
            how = f"decoded by MindSpore's ImageFolderDataset, {threads} thread"
            how += "s" if threads > 1 else ""
            log.info("data: training batches streamed (%s), normalised a batch at a time", how)
        elif self.streams:
            how = f"{self.workers} loader process{'es' if self.workers > 1 else ''}"
            how = how if self.workers else "in the main process"
            what = "augmented, normalised" if self.crop or self.flip else "normalised"
            log.info(
                "data: training batches streamed (decoded, %s, a batch per call), %s", what, how
            )
        else:
            log.info("data: training batches cut from memory, normalised once")

    def _named(self) -> Iterable[tuple[str, Split]]:
        return (("train", self.splits.train), ("val", self.splits.val), ("test", self.splits.test))

    def _streamed(self) -> Prefetcher:
        """The loader processes (started at the first batch) over the splits not in memory."""
        if self.prefetcher is None:
            readers = {}
            for name, split in self._named():
                if name not in self.memory:
                    more = (self.augment, self.crop, self.flip) if name == "train" else ()
                    readers[name] = BatchReader(split, labels_of(split), *more)
            self.prefetcher = Prefetcher(readers, self.workers)
        return self.prefetcher

    def close(self) -> None:
        if self.prefetcher is not None:
            self.prefetcher.close()

    def train(self, plan: BatchPlan, first_epoch: int) -> tuple[ds.Dataset, int]:
        """The training batches from ``first_epoch`` on, and the steps of its first epoch."""
        # MindSpore holds each pass to this length: shorter for a run that ends inside its first
        # epoch or the rest of an epoch a run resumes inside (a later one cut short ends early).
        steps = plan.steps_in(first_epoch) - plan.skipped(first_epoch)
        if self.folder is not None:
            data = self.folder.dataset(plan, first_epoch, self.workers, self._inputs, COLUMNS)
            return data, steps
        if self.streams:
            reader = self._streamed()

            def batches(epoch: int) -> Iterator[Batch]:
                order = plan.batches(epoch)
                for inputs, labels in reader.batches("train", order, epoch, plan.seed):
                    yield self.normalise(inputs), typed(labels)

        else:
            inputs, labels = self.memory["train"]

            def batches(epoch: int) -> Iterator[Batch]:
                for index in plan.batches(epoch):
                    yield inputs[index], labels[index]  # one fancy-indexing copy a batch

        source = EpochBatches(batches, first_epoch, steps)
        # shuffle=False: the order is the source's, the same on every run and every rank.
        return ds.GeneratorDataset(source, column_names=COLUMNS, shuffle=False), steps

    def _inputs(self, images: np.ndarray) -> np.ndarray:
        """ImageFolderDataset's (B, H, W, 3) images as inputs (grey PNGs come as 3 channels)."""
        channels = self.splits.info.shape[0]
        return self.normalise(np.ascontiguousarray(images.transpose(0, 3, 1, 2)[:, :channels]))

    def broken_image(self, err: Exception) -> DatasetError | None:
        return broken_image(err) if self.folder is not None else None

    def batches(self, name: str) -> Iterable[tuple[np.ndarray, np.ndarray]]:
        """The "val" or "test" split in order, in batches (the last one partial)."""
        if name in self.memory:
            inputs, labels = self.memory[name]
            size = self.splits.info.eval_batch(self.batch_size)
            spans = (slice(i, i + size) for i in range(0, len(labels), size))
            return ((inputs[span], labels[span]) for span in spans)
        count, size = len(getattr(self.splits, name)), self.batch_size
        plan = (np.arange(i, min(i + size, count)) for i in range(0, count, size))
        batches = self._streamed().batches(name, plan)
        return ((self.normalise(inputs), typed(labels)) for inputs, labels in batches)
