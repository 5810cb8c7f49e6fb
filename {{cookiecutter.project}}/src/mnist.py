"""Read MNIST's idx files with numpy alone (plain or .gz), and hold out a validation split."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from src.errors import DatasetError

FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IMAGE_SIZE = 28
UBYTE = 0x08


@dataclass(frozen=True)
class Split:
    """One split: images (N, 28, 28 uint8 as read, or as a framework prepared them) and
    labels (N,)."""

    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, indices: np.ndarray) -> Split:
        return Split(self.images[indices], self.labels[indices])


@dataclass(frozen=True)
class Splits:
    """What a run trains on (train), selects checkpoints by (val) and reports at the end (test)."""

    train: Split
    val: Split
    test: Split


def read_idx(path: Path) -> np.ndarray:
    """An idx file of unsigned bytes as an array of the shape its header gives."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as stream:
            # A bytearray, so that the arrays built on it are writable.
            data = bytearray(stream.read())
    except (OSError, EOFError, zlib.error) as err:
        raise DatasetError(f"cannot read {path}: {err}") from err
    # Magic number: two zero bytes, the element type, the number of dimensions.
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != UBYTE or data[3] == 0:
        raise DatasetError(f"{path} is not an idx file of unsigned bytes (bad magic number)")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetError(f"{path} is truncated: the header is incomplete")
    shape = tuple(int(n) for n in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape))
    if len(data) != expected:
        state = "truncated" if len(data) < expected else "longer than its header says"
        raise DatasetError(
            f"{path} is {state}: {len(data)} bytes for shape {shape}, expected {expected}"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def read_split(image_path: Path, label_path: Path, num_classes: int) -> Split:
    """A split from its image and label files, checked against each other."""
    images, labels = read_idx(image_path), read_idx(label_path)
    if images.ndim != 3 or images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE):
        raise DatasetError(f"{image_path} holds images of shape {images.shape[1:]}, not 28x28")
    if labels.ndim != 1:
        raise DatasetError(f"{label_path} is not a label file: it has {labels.ndim} dimensions")
    if len(images) != len(labels):
        raise DatasetError(
            f"{image_path} holds {len(images)} images but {label_path} {len(labels)} labels"
        )
    if len(labels) and labels.max() >= num_classes:
        raise DatasetError(
            f"{label_path} holds label {labels.max()}, but the model has {num_classes} classes "
            "(--num_classes)"
        )
    return Split(images, labels.astype(np.int64))


def hold_out(train: Split, fraction: float, seed: int) -> tuple[Split, Split]:
    """Split off ``fraction`` of the training data for validation, the same on every rank.

    The choice depends only on the seed, so a resumed run validates on the same
    samples, and the test set stays untouched until the end of training.
    """
    order = np.random.default_rng([seed, 0x7A1]).permutation(len(train))
    count = max(1, round(len(train) * fraction))
    if count >= len(train):
        raise DatasetError(f"val_fraction {fraction} leaves no training data")
    return train.take(np.sort(order[count:])), train.take(np.sort(order[:count]))


def synthetic(count: int, num_classes: int, seed: int) -> Split:
    """Random images and labels in MNIST's shapes: for --smoke runs, which test plumbing only."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(count, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    return Split(images, rng.integers(0, num_classes, size=count, dtype=np.int64))
