"""What a reader returns: splits of samples, in memory or read from files one at a time."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from src.scaffold.errors import DatasetError


@dataclass(frozen=True)
class Split:
    """Labels (N, ...): class indices (int64; (N, T) a class per position, such as the next
    token) or a numeric target (float32); inputs of ``shape`` (uint8 (C, H, W) images, float32
    (F,) rows, integer ids such as (T,) tokens) in ``arrays``, or ``files`` read by ``decode``."""

    labels: np.ndarray
    shape: tuple[int, ...]
    arrays: np.ndarray | None = None
    files: tuple[Path, ...] = ()
    decode: Callable[[Path], np.ndarray] | None = None
    classes: tuple[str, ...] = ()  # the class names in label order; () when unnamed
    features: tuple[str, ...] = ()  # a table's feature columns in input order
    tokenizer: Any = None  # ids of text: how they encode and decode it (data/tokens.py)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def numeric(self) -> bool:
        return self.labels.dtype.kind == "f"

    @property
    def in_memory(self) -> bool:
        return self.arrays is not None

    @property
    def ids(self) -> bool:
        """Inputs of integer ids (tokens): neither normalised nor augmented."""
        return len(self.shape) != 3 and bool(len(self)) and self.load(0).dtype.kind in "iu"

    @property
    def nbytes(self) -> int:
        """The inputs' size once decoded (what holding the split in memory costs): a memory
        map's ids and labels read as int64."""
        if isinstance(self.arrays, np.memmap):
            return len(self) * int(np.prod(self.shape)) * 2 * np.dtype(np.int64).itemsize
        size = self.arrays.itemsize if self.arrays is not None else 1 if len(self.shape) == 3 else 4
        return len(self) * int(np.prod(self.shape)) * size

    def load(self, index: int) -> np.ndarray:
        """Sample ``index``: ids as int64 (what embeddings take), whatever they are stored as."""
        if self.arrays is None:
            assert self.decode is not None
            return self.decode(self.files[index])
        sample = self.arrays[index]
        if len(self.shape) != 3 and sample.dtype.kind in "iu" and sample.dtype != np.int64:
            return sample.astype(np.int64)  # a copy: a memory map's pages are not held
        return sample

    def labels_at(self, indices: np.ndarray | slice) -> np.ndarray:
        """The labels of ``indices``: class indices as int64 however stored (a memory map of
        token ids), numbers as float32."""
        return np.asarray(self.labels[indices], np.float32 if self.numeric else np.int64)

    def take(self, indices: Sequence[int] | np.ndarray) -> Split:
        indices = np.asarray(indices, dtype=np.int64)
        if self.arrays is not None:
            return replace(self, labels=self.labels[indices], arrays=self.arrays[indices])
        files = tuple(self.files[i] for i in indices)
        return replace(self, labels=self.labels[indices], files=files)

    def materialised(self) -> Split:
        """The split in memory: decoded files, or a memory map's windows read (ids as int64)."""
        if isinstance(self.arrays, np.memmap):
            arrays = np.array(self.arrays, np.int64)
            return replace(self, arrays=arrays, labels=self.labels_at(slice(None)))
        if self.arrays is not None:
            return self
        if len(self):
            arrays = np.stack([self.load(i) for i in range(len(self))])
        else:
            arrays = np.zeros((0, *self.shape), dtype=np.uint8)
        return replace(self, arrays=arrays, files=(), decode=None)


def array_split(
    inputs: np.ndarray, labels: np.ndarray, classes: Sequence[str] = (), tokenizer: Any = None
) -> Split:
    """A split held in memory; class indices as int64, a numeric target as float32; ids of
    text with their ``tokenizer`` (data/tokens.py)."""
    labels = labels.astype(np.float32 if labels.dtype.kind == "f" else np.int64)
    shape = tuple(inputs.shape[1:])
    return Split(labels, shape, inputs, classes=tuple(classes), tokenizer=tokenizer)


EVAL_BATCH = 1000  # samples evaluated at a time (images, table rows)


@dataclass(frozen=True)
class DataInfo:
    """What the run learnt about its data; recorded in hparams.json."""

    format: str
    shape: tuple[int, ...]
    num_classes: int
    classes: tuple[str, ...] = ()
    mean: tuple[float, ...] = ()  # per channel or feature, in input units (0-255 for images)
    std: tuple[float, ...] = ()
    in_memory: bool = True
    # For predict.py to read inputs as the run did: a table's columns, data.resize of images.
    features: tuple[str, ...] = ()
    label_column: str | None = None
    resize: tuple[int, ...] | None = None
    numeric: bool = False
    ids: bool = False  # inputs of integer ids (tokens), not normalised
    label_shape: tuple[int, ...] = ()  # a sample's labels: () one, (T,) one a position
    tokenizer: dict[str, Any] | None = None  # ids of text: the tokenizer's description

    def eval_batch(self, batch_size: int) -> int:
        """Samples evaluated at a time: sequences of ids (a language model's) a training batch,
        as their attention grows with the square of their length; others EVAL_BATCH."""
        return batch_size if self.ids else EVAL_BATCH

    def record(self) -> dict[str, Any]:
        return {
            "data_format": self.format,
            "data_shape": list(self.shape),
            "num_classes": self.num_classes,
            "data_in_memory": self.in_memory,
            "data_mean": [round(m, 6) for m in self.mean],
            "data_std": [round(s, 6) for s in self.std],
            "classes": list(self.classes),
        }

    def checkpoint_meta(self) -> dict[str, Any]:
        """What a checkpoint carries of the data, for eval.py, predict.py and export.py."""
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
            "data_ids": self.ids,
            "label_shape": list(self.label_shape),
            "tokenizer": self.tokenizer,
        }


CHECKPOINT_META = ("model_name", "model_args", "init_from", *DataInfo("", (), 0).checkpoint_meta())


@dataclass(frozen=True)
class Splits:
    """What a run trains on, selects checkpoints by (val), reports at the end (test), and knows."""

    train: Split
    val: Split
    test: Split
    info: DataInfo


def hold_out(train: Split, fraction: float, seed: int, what: str = "val") -> tuple[Split, Split]:
    """Split off ``fraction`` of the training data by the seed alone: alike on every rank."""
    order = np.random.default_rng([seed, 0x7A1 if what == "val" else 0x7E5]).permutation(len(train))
    count = max(1, round(len(train) * fraction))
    if count >= len(train):
        name = "val_fraction" if what == "val" else "test_fraction"
        raise DatasetError(f"{name} {fraction} of {len(train)} samples leaves no training data")
    return train.take(np.sort(order[count:])), train.take(np.sort(order[:count]))


def synthetic(
    count: int,
    shape: tuple[int, ...],
    num_classes: int,
    seed: int,
    like: Split | None = None,
    ids: bool = False,
) -> Split:
    """Random inputs of ``shape`` and labels: for --smoke runs, which test plumbing only. Like
    the split ``like`` where there is one: integer ids below its largest, labels of its shape;
    without one, ``ids``: ids below the classes, a label at each position."""
    rng = np.random.default_rng(seed)
    labels = (count, *(like.labels.shape[1:] if like is not None else shape if ids else ()))
    if len(shape) == 3:
        inputs = rng.integers(0, 256, size=(count, *shape), dtype=np.uint8)
    elif like is None and ids:
        inputs = rng.integers(0, num_classes, size=(count, *shape), dtype=np.int64)
    elif like is not None and like.ids:
        size = getattr(like.tokenizer, "size", 0)  # a memory-mapped corpus is not read
        high = size or int((like.arrays if like.arrays is not None else like.load(0)).max()) + 1
        inputs = rng.integers(0, high, size=(count, *shape), dtype=np.int64)
    else:
        inputs = rng.standard_normal(size=(count, *shape)).astype(np.float32)
    return array_split(inputs, rng.integers(0, num_classes, size=labels, dtype=np.int64))


def statistics(split: Split, limit: int, seed: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Mean and std per channel or feature, from up to ``limit`` samples chosen by the seed."""
    count = len(split)
    chosen = np.arange(count)
    if count > limit:
        chosen = np.sort(np.random.default_rng([seed, 0x57A7]).choice(count, limit, replace=False))
    if split.arrays is not None:
        sample = split.arrays[chosen].astype(np.float64)  # in memory: one gather, no loop
    else:
        sample = np.stack([split.load(int(i)) for i in chosen]).astype(np.float64)
    axes = (0, 2, 3) if sample.ndim == 4 else (0,)
    mean, std = sample.mean(axis=axes), sample.std(axis=axes)
    std = np.where(std > 1e-6, std, 1.0)  # a constant channel (a blank border) would divide by 0
    return tuple(float(m) for m in mean), tuple(float(s) for s in std)
