"""A training split of PNGs decoded in C++ by ImageFolderDataset where it reads the pixels Pillow
would (ImageDecoder.as_is, not augmented), in the BatchPlan's order (a sampler of positions)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Callable, Iterator

import mindspore.dataset as ds
import numpy as np

from src.scaffold.data.images import ImageDecoder, folder_listing
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.data.splits import Split
from src.scaffold.errors import DatasetError

BROKEN = re.compile(r"Invalid image, (.+?) decode failed")  # ImageFolderDataset's rejection


class PngFolder:
    """Where a split's PNGs lie: the folder and each sample's position in its listing."""

    def __init__(self, root: Path, positions: np.ndarray, classes: tuple[str, ...]) -> None:
        self.root, self.positions, self.classes = root, positions, classes

    @classmethod
    def of(cls, split: Split) -> PngFolder | None:
        """The split's folder, where ImageFolderDataset reads it as train.py would (else None)."""
        decoder = split.decode
        if not isinstance(decoder, ImageDecoder) or not decoder.as_is or not split.files:
            return None
        root = Path(split.files[0]).parent.parent
        files, labels, classes = folder_listing(root)
        where = {path: k for k, path in enumerate(files)}
        positions = np.asarray([where.get(Path(p), -1) for p in split.files], np.int64)
        if (positions < 0).any() or not np.array_equal(np.asarray(labels)[positions], split.labels):
            return None  # files of more than one folder, or labelled otherwise
        # What ImageFolderDataset finds itself (hidden files too): the same files, or none.
        if ds.ImageFolderDataset(str(root), extensions=[".png"]).get_dataset_size() != len(files):
            return None
        return cls(root, positions, classes)

    def dataset(
        self,
        plan: BatchPlan,
        first_epoch: int,
        workers: int,
        inputs: Callable[[np.ndarray], np.ndarray],
        columns: list[str],
    ) -> ds.Dataset:
        """This rank's batches from ``first_epoch`` on, made model inputs by ``inputs``."""
        data = ds.ImageFolderDataset(
            str(self.root),
            num_parallel_workers=max(1, workers),
            sampler=EpochOrder(plan, first_epoch, self.positions),
            extensions=[".png"],
            class_indexing={name: label for label, name in enumerate(self.classes)},
            decode=True,
        )
        data = data.batch(plan.batch_size, drop_remainder=True)
        data = data.map(operations=inputs, input_columns=["image"])
        return data.rename(["image", "label"], columns)


class EpochOrder(ds.Sampler):
    """Each pass (one an epoch, in order), the next epoch's samples of this rank, as positions."""

    def __init__(self, plan: BatchPlan, first_epoch: int, positions: np.ndarray) -> None:
        # A pass's length is the first epoch's: a later epoch cut short is the last.
        steps = plan.steps_in(first_epoch) - plan.skipped(first_epoch)
        super().__init__(num_samples=steps * plan.batch_size)
        self.plan, self.positions = plan, positions
        # A function: MindSpore copies the sampler with its pipeline, and a function is shared
        # by the copies, not copied, so the epochs go on counting.
        count = itertools.count(first_epoch)
        self.next_epoch = lambda: next(count)

    def __iter__(self) -> Iterator[int]:
        return iter(self.positions[self.plan.batches(self.next_epoch()).ravel()].tolist())


def broken_image(err: Exception) -> DatasetError | None:
    """The file ImageFolderDataset's decoder rejected, said as train.py says it (else None)."""
    found = BROKEN.search(str(err))
    if found is None:
        return None
    return DatasetError(
        f"{found.group(1)} cannot be read as an image: MindSpore's decoder finds it broken "
        "(truncated or damaged) or unreadable"
    )
