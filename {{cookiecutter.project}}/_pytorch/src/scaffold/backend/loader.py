"""Batches for the PyTorch loop: held on the device, normalised once (data that fits, with no
augmentation), or streamed by a DataLoader's workers as uint8 and normalised on the device."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from src.scaffold.data.sharding import BatchPlan, cpu_count
from src.scaffold.data.splits import EVAL_BATCH, Split

Batch = Tuple[torch.Tensor, torch.Tensor]


def auto_workers(local_devices: int) -> int:
    """Loader processes per rank: the CPUs shared among this node's ranks, at most 8."""
    return max(1, min(8, cpu_count() // max(local_devices, 1)))


class Normalise:
    """(x - mean) / std per channel or feature; images to [0, 1] first, as MindSpore's side."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], ndim: int, device) -> None:
        view = (1, -1, 1, 1) if ndim == 3 else (1, -1)
        self.scale = 255.0 if ndim == 3 else 1.0
        mean, std = ([value / self.scale for value in values] for values in (mean, std))
        self.mean = torch.tensor(mean, dtype=torch.float32, device=device).view(view)
        self.std = torch.tensor(std, dtype=torch.float32, device=device).view(view)

    def __call__(self, inputs: torch.Tensor) -> torch.Tensor:
        if not self.mean.numel():  # integer ids (tokens): as they are
            return inputs
        inputs = inputs.float()
        inputs = inputs.div_(self.scale) if self.scale != 1.0 else inputs
        return inputs.sub_(self.mean).div_(self.std)


class SplitDataset(Dataset):
    """One split's samples as (input, label), augmented when asked (training only)."""

    def __init__(
        self, split: Split, augment: Callable | None = None, crop: int = 0, flip: bool = False
    ) -> None:
        self.split, self.augment, self.crop, self.flip = split, augment, crop, flip
        self.rng: np.random.Generator | None = None

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        sample = self.split.load(index)
        if self.augment is not None and (self.crop or self.flip):
            if self.rng is None:
                self.rng = np.random.default_rng(torch.initial_seed())  # one stream per worker
            sample = self.augment(sample, self.rng, self.crop, self.flip)
        return torch.from_numpy(np.asarray(sample)), torch.from_numpy(self.split.labels_at(index))


class PlanSampler(DistributedSampler):
    """DistributedSampler in the BatchPlan's order (a resumed run reads what an unbroken would)."""

    def __init__(self, dataset: Dataset, plan: BatchPlan) -> None:
        super().__init__(dataset, plan.world_size, plan.rank, seed=plan.seed, drop_last=True)
        self.plan = plan

    def __iter__(self) -> Iterator[int]:
        return iter(self.plan.batches(self.epoch).reshape(-1).tolist())

    def __len__(self) -> int:
        return int(self.plan.batches(self.epoch).size)


class InMemory:
    """A split on the device, normalised once."""

    def __init__(self, split: Split, normalise: Normalise, device: torch.device) -> None:
        assert split.arrays is not None
        self.inputs = normalise(torch.from_numpy(split.arrays).to(device))
        self.labels = torch.from_numpy(split.labels).to(device)

    def epoch(self, plan: BatchPlan, epoch: int) -> Iterator[Batch]:
        indices = torch.from_numpy(plan.batches(epoch)).to(self.inputs.device)
        yield from ((self.inputs[index], self.labels[index]) for index in indices)

    def batches(self, size: int = EVAL_BATCH) -> Iterator[Batch]:
        for start in range(0, len(self.labels), size):
            yield self.inputs[start : start + size], self.labels[start : start + size]


class Streamed:
    """A split read from disk by worker processes."""

    def __init__(
        self,
        split: Split,
        normalise: Normalise,
        device: torch.device,
        workers: int,
        batch_size: int,
        augment: Callable | None = None,
        crop: int = 0,
        flip: bool = False,
    ) -> None:
        self.normalise, self.device = normalise, device
        self.dataset = SplitDataset(split, augment, crop, flip)
        self.workers, self.batch_size = workers, batch_size
        self.pin = device.type == "cuda"  # pinned host memory: the copy to a GPU overlaps the step
        self.loader: DataLoader | None = None

    def _to_device(self, inputs: torch.Tensor, labels: torch.Tensor) -> Batch:
        inputs = inputs.to(self.device, non_blocking=self.pin)
        return self.normalise(inputs), labels.to(self.device, non_blocking=self.pin)

    def epoch(self, plan: BatchPlan, epoch: int) -> Iterator[Batch]:
        if self.loader is None:
            self.loader = DataLoader(
                self.dataset,
                batch_size=self.batch_size,
                sampler=PlanSampler(self.dataset, plan),
                num_workers=self.workers,
                pin_memory=self.pin,
                drop_last=True,
                persistent_workers=self.workers > 0,  # forking them each epoch costs seconds
            )
        self.loader.sampler.set_epoch(epoch)
        yield from (self._to_device(inputs, labels) for inputs, labels in self.loader)

    def batches(self, size: int = EVAL_BATCH) -> Iterator[Batch]:
        loader = DataLoader(self.dataset, batch_size=size, num_workers=self.workers)
        yield from (self._to_device(inputs, labels) for inputs, labels in loader)
