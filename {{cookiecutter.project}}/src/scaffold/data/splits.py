"""What a reader returns: splits of samples, held in memory or read from
files one sample at a time, and the validation and test splits cut from them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from src.scaffold.errors import DatasetError


@dataclass(frozen=True)
class Split:
    """One split. Labels (N,) are class indices (int64), or the values of a numeric target
    (float32, data.labels: values); each sample's input has ``shape``:
    (C, H, W) uint8 for images, (F,) float32 for table rows.

    Either ``arrays`` holds every input (N, *shape), or ``files`` names one file a sample
    and ``decode(path)`` reads it (a module-level function, so loader workers can take it).
    """

    labels: np.ndarray
    shape: tuple[int, ...]
    arrays: np.ndarray | None = None
    files: tuple[Path, ...] = ()
    decode: Callable[[Path], np.ndarray] | None = None
    # The class names, in label order (folder names, CSV label values); () when unnamed.
    classes: tuple[str, ...] = ()
    # A table's feature columns, in input order (the csv reader's header); () otherwise.
    features: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def numeric(self) -> bool:
        """Whether the labels are values to predict rather than classes."""
        return self.labels.dtype.kind == "f"

    @property
    def in_memory(self) -> bool:
        return self.arrays is not None

    @property
    def nbytes(self) -> int:
        """The inputs' size once decoded (what holding the split in memory costs)."""
        itemsize = 1 if len(self.shape) == 3 else 4
        return len(self) * int(np.prod(self.shape)) * itemsize

    def load(self, index: int) -> np.ndarray:
        """One sample's input."""
        if self.arrays is not None:
            return self.arrays[index]
        assert self.decode is not None
        return self.decode(self.files[index])

    def take(self, indices: Sequence[int] | np.ndarray) -> Split:
        indices = np.asarray(indices, dtype=np.int64)
        if self.arrays is not None:
            return replace(self, labels=self.labels[indices], arrays=self.arrays[indices])
        return replace(
            self, labels=self.labels[indices], files=tuple(self.files[i] for i in indices)
        )

    def materialised(self) -> Split:
        """The same split with every input decoded into one array."""
        if self.arrays is not None:
            return self
        arrays = np.stack([self.load(i) for i in range(len(self))]) if len(self) else None
        if arrays is None:
            arrays = np.zeros((0, *self.shape), dtype=np.uint8)
        return replace(self, arrays=arrays, files=(), decode=None)


def array_split(inputs: np.ndarray, labels: np.ndarray, classes: Sequence[str] = ()) -> Split:
    """A split held in memory: uint8 images (N, C, H, W) or float32 rows (N, F)."""
    # Class indices as int64; a numeric target (data.labels: values) stays float32.
    labels = labels.astype(np.float32 if labels.dtype.kind == "f" else np.int64)
    return Split(labels, tuple(inputs.shape[1:]), inputs, classes=tuple(classes))


@dataclass(frozen=True)
class DataInfo:
    """What the run learnt about its data; recorded in hparams.json."""

    format: str
    shape: tuple[int, ...]
    num_classes: int
    classes: tuple[str, ...] = ()
    # Per channel (images) or per feature (tables), in the inputs' units (0-255 for images).
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    in_memory: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    # What predict.py needs to read new inputs as the run read its data: a table's feature
    # columns and its label column, and the size images were resized to (data.resize).
    features: tuple[str, ...] = ()
    label_column: str | None = None
    resize: tuple[int, ...] | None = None
    numeric: bool = False

    def record(self) -> dict[str, Any]:
        return {
            "data_format": self.format,
            "data_shape": list(self.shape),
            "num_classes": self.num_classes,
            "data_in_memory": self.in_memory,
            "data_mean": [round(m, 6) for m in self.mean],
            "data_std": [round(s, 6) for s in self.std],
            "classes": list(self.classes),
            **self.extra,
        }

    def checkpoint_meta(self) -> dict[str, Any]:
        """What a checkpoint carries of the data, so that it can be used without the run
        (eval.py, predict.py, export.py): the class names in output order, the outputs, the
        input shape and format, the normalisation, how the inputs were read."""
        return {
            "classes": list(self.classes),
            "num_classes": self.num_classes,
            "data_format": self.format,
            "data_shape": list(self.shape),
            "data_mean": list(self.mean),
            "data_std": list(self.std),
            "data_features": list(self.features),
            "label_column": self.label_column,
            "data_resize": list(self.resize) if self.resize else None,
            "numeric": self.numeric,
        }


# What a checkpoint records besides its state (DataInfo.checkpoint_meta and the model's
# name): read back by each backend's read_meta.
CHECKPOINT_META = (
    "model_name",
    "classes",
    "num_classes",
    "data_format",
    "data_shape",
    "data_mean",
    "data_std",
    "data_features",
    "label_column",
    "data_resize",
    "numeric",
)


@dataclass(frozen=True)
class Splits:
    """What a run trains on (train), selects checkpoints by (val) and reports at the end
    (test), and what it knows of them."""

    train: Split
    val: Split
    test: Split
    info: DataInfo


def hold_out(train: Split, fraction: float, seed: int, what: str = "val") -> tuple[Split, Split]:
    """Split off ``fraction`` of the training data, the same on every rank.

    The choice depends only on the seed, so a resumed run validates on the same
    samples, and the test set stays untouched until the end of training.
    """
    order = np.random.default_rng([seed, 0x7A1 if what == "val" else 0x7E5]).permutation(len(train))
    count = max(1, round(len(train) * fraction))
    if count >= len(train):
        name = "val_fraction" if what == "val" else "test_fraction"
        raise DatasetError(f"{name} {fraction} of {len(train)} samples leaves no training data")
    return train.take(np.sort(order[count:])), train.take(np.sort(order[:count]))


def synthetic(count: int, shape: tuple[int, ...], num_classes: int, seed: int) -> Split:
    """Random inputs of ``shape`` and labels: for --smoke runs, which test plumbing only."""
    rng = np.random.default_rng(seed)
    if len(shape) == 3:
        inputs = rng.integers(0, 256, size=(count, *shape), dtype=np.uint8)
    else:
        inputs = rng.standard_normal(size=(count, *shape)).astype(np.float32)
    return array_split(inputs, rng.integers(0, num_classes, size=count, dtype=np.int64))


def statistics(split: Split, limit: int, seed: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Mean and standard deviation per channel (images) or feature (rows), from up to
    ``limit`` samples of the split chosen by the seed (all of them when it holds fewer)."""
    count = len(split)
    chosen = (
        np.arange(count)
        if count <= limit
        else np.sort(np.random.default_rng([seed, 0x57A7]).choice(count, limit, replace=False))
    )
    if split.arrays is not None:
        sample = split.arrays[chosen].astype(np.float64)  # in memory: one gather, no loop
    else:
        sample = np.stack([split.load(int(i)) for i in chosen]).astype(np.float64)
    axes = (0, 2, 3) if sample.ndim == 4 else (0,)
    mean, std = sample.mean(axis=axes), sample.std(axis=axes)
    # A constant channel or feature (a blank border column) would divide by zero.
    std = np.where(std > 1e-6, std, 1.0)
    return tuple(float(m) for m in mean), tuple(float(s) for s in std)
