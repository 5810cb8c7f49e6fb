"""The splits as MindSpore data, each rank's batches cut by src/scaffold/data/sharding.py.

Two paths. Data held in memory is normalised once and batches are cut from it by
index. Data streamed from disk (data.in_memory false, or augmentation on) goes
through a mindspore.dataset pipeline: worker processes decode, augment and
normalise one sample at a time, in the order a sampler following the same
BatchPlan gives. Either way N ranks with batch b see exactly the samples of one
process with batch N x b, and a resumed run the order of an unbroken one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator

import mindspore.dataset as ds
import numpy as np

from src.scaffold.backend.api import BatchPlan
from src.scaffold.config import Config
from src.scaffold.data.normalise import Normalise
from src.scaffold.data.sharding import cpu_count
from src.scaffold.data.splits import Split, Splits
from src.scaffold.errors import ConfigError

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
    """An iterable source for GeneratorDataset: each pass is the next epoch's batches,
    cut from inputs already normalised.

    MindSpore starts one pass per epoch, in order (it may start the next before the
    current one ends, which changes nothing here).
    """

    def __init__(
        self, inputs: np.ndarray, labels: np.ndarray, plan: BatchPlan, first_epoch: int
    ) -> None:
        self.inputs, self.labels, self.plan = inputs, labels, plan
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
            # One fancy-indexing copy per batch.
            yield self.inputs[index], self.labels[index]


class Samples:
    """A random-access source for GeneratorDataset: one sample decoded (split.load),
    augmented and normalised, with its label. Picklable: worker processes run it.

    Index ``epoch * len(split) + i`` is sample i in that epoch (DistributedPlanSampler
    yields such indices): its augmentation is drawn from (seed, epoch, i), the same
    whatever the number of workers, and after a resume.
    """

    def __init__(
        self,
        split: Split,
        normalise: Normalise,
        seed: int = 0,
        augment: Callable | None = None,
        crop: int = 0,
        flip: bool = False,
    ) -> None:
        self.split, self.normalise = split, normalise
        self.seed, self.augment, self.crop, self.flip = seed, augment, crop, flip

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        epoch, i = divmod(int(index), len(self.split))
        sample = self.split.load(i)
        if self.augment is not None and (self.crop or self.flip):
            rng = np.random.default_rng([self.seed, epoch, i])
            sample = self.augment(sample, rng, self.crop, self.flip)
        # The label as a 0-d array: MindSpore takes no numpy scalars from a source.
        return self.normalise(sample), np.array(self.split.labels[i], dtype=label_type(self.split))


class DistributedPlanSampler(ds.Sampler):
    """Shard ``shard_id`` of ``num_shards`` (this rank of the plan's ranks), like
    ds.DistributedSampler, but in the plan's order: each step, the rank's slice of
    the global batch. Batched by batch_size, the samples are the plan's batches.

    Each pass over it (one per epoch, in order) is the next epoch.
    """

    def __init__(self, plan: BatchPlan, first_epoch: int) -> None:
        # MindSpore holds each pass to num_samples: see EpochBatches.steps.
        super().__init__(num_samples=plan.steps_in(first_epoch) * plan.batch_size)
        self.plan, self.next_epoch = plan, first_epoch
        self.num_shards, self.shard_id = plan.world_size, plan.rank

    def __iter__(self) -> Iterator[int]:
        epoch = self.next_epoch
        self.next_epoch += 1
        # Offset by the epoch, for the source's augmentation (see Samples).
        offset = epoch * self.plan.num_samples
        for index in self.plan.batches(epoch).ravel():
            yield offset + int(index)


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
        self, splits: Splits, cfg: Config, world_size: int, augment: Callable | None = None
    ) -> None:
        self.splits, self.cfg, self.augment = splits, cfg, augment
        info = splits.info
        self.normalise = Normalise(info.mean, info.std, len(info.shape))
        images = len(splits.info.shape) == 3
        self.crop = cfg.data_random_crop if images else 0
        self.flip = cfg.data_random_flip and images
        if (cfg.data_random_crop or cfg.data_random_flip) and not images:
            log.warning("data.random_crop and random_flip apply to images: ignored for rows")
        # Augmentation draws per sample and epoch: it needs the streaming pipeline.
        self.streams = not splits.train.in_memory or bool(self.crop or self.flip)
        self.workers = (
            auto_workers(world_size) if cfg.data_num_workers is None else cfg.data_num_workers
        )
        # Normalised once, for the run: the splits held in memory.
        self.memory = {
            name: (self.normalise(split.arrays), split.labels.astype(label_type(split)))
            for name, split in self._named()
            if split.arrays is not None and not (name == "train" and self.streams)
        }
        if self.streams:
            how = f"{self.workers} loader process{'es' if self.workers > 1 else ''}"
            if not self.workers:
                how = "in the main process"
            log.info(
                "data: training samples streamed (decoded, %s), %s",
                "augmented, normalised" if self.crop or self.flip else "normalised",
                how,
            )
        else:
            log.info("data: training batches cut from memory, normalised once")

    def _named(self) -> Iterable[tuple[str, Split]]:
        return (("train", self.splits.train), ("val", self.splits.val), ("test", self.splits.test))

    def _pipeline(self, source: Samples, **sampling: object) -> ds.GeneratorDataset:
        # num_workers 0, as in PyTorch's DataLoader: decode in this process.
        return ds.GeneratorDataset(
            source,
            column_names=COLUMNS,
            num_parallel_workers=max(1, self.workers),
            python_multiprocessing=self.workers > 0,
            **sampling,
        )

    def train(self, plan: BatchPlan, first_epoch: int) -> tuple[ds.Dataset, int]:
        """The training data from ``first_epoch`` on, as a dataset of whole batches, and
        the steps of its first epoch (what a sink holds)."""
        if not self.streams:
            source = EpochBatches(*self.memory["train"], plan, first_epoch)
            # shuffle=False: the order is the source's, the same on every run and every rank.
            return ds.GeneratorDataset(source, column_names=COLUMNS, shuffle=False), source.steps
        samples = Samples(
            self.splits.train, self.normalise, plan.seed, self.augment, self.crop, self.flip
        )
        sampler = DistributedPlanSampler(plan, first_epoch)
        dataset = self._pipeline(samples, sampler=sampler)
        # drop_remainder: every step has the same shape, and sinks a fixed step count.
        return dataset.batch(plan.batch_size, drop_remainder=True), plan.steps_in(first_epoch)

    def batches(self, name: str) -> Iterable[tuple[np.ndarray, np.ndarray]]:
        """The "val" or "test" split in order, in batches (the last one partial)."""
        if name in self.memory:
            inputs, labels = self.memory[name]
            return (
                (inputs[start : start + EVAL_BATCH], labels[start : start + EVAL_BATCH])
                for start in range(0, len(labels), EVAL_BATCH)
            )
        dataset = self._pipeline(Samples(getattr(self.splits, name), self.normalise), shuffle=False)
        dataset = dataset.batch(self.cfg.batch_size, drop_remainder=False)
        return dataset.create_tuple_iterator(num_epochs=1, output_numpy=True)
