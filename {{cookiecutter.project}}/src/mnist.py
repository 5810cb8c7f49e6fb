"""Read MNIST's idx files with numpy alone (plain or .gz), wherever the platform put them."""

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
# Flat, OpenI's train/ and test/ folders, and torchvision's download layout.
SUBDIRS = ("", "train", "test", "MNIST/raw")
EXPECTED = ", ".join(name for pair in FILES.values() for name in pair) + " (each may end in .gz)"
IMAGE_SIZE = 28
NUM_CLASSES = 10
UBYTE = 0x08


@dataclass(frozen=True)
class Split:
    """One split: uint8 images (N, 28, 28) and int64 labels (N,)."""

    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def find_file(root: Path, name: str) -> Path:
    """The first of ``name`` or ``name.gz`` in the known layouts under root."""
    for subdir in SUBDIRS:
        for candidate in (root / subdir / name, root / subdir / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    searched = ", ".join(str(root / subdir) for subdir in SUBDIRS)
    raise DatasetError(f"{name}[.gz] not found in {searched}; expected {EXPECTED}")


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


def load_split(root: Path, split: str) -> Split:
    """Load the ``train`` or ``test`` split found under root."""
    image_name, label_name = FILES[split]
    image_path, label_path = find_file(root, image_name), find_file(root, label_name)
    images, labels = read_idx(image_path), read_idx(label_path)
    if images.ndim != 3 or images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE):
        raise DatasetError(f"{image_path} holds images of shape {images.shape[1:]}, not 28x28")
    if labels.ndim != 1:
        raise DatasetError(f"{label_path} is not a label file: it has {labels.ndim} dimensions")
    if len(images) != len(labels):
        raise DatasetError(
            f"{image_path} holds {len(images)} images but {label_path} {len(labels)} labels"
        )
    if len(labels) and labels.max() >= NUM_CLASSES:
        raise DatasetError(f"{label_path} holds label {labels.max()}; MNIST labels are 0-9")
    return Split(images, labels.astype(np.int64))


def load_mnist(root: Path) -> tuple[Split, Split]:
    """The train and test splits under root; one DatasetError names what is missing."""
    if not root.is_dir():
        raise DatasetError(f"dataset directory {root} does not exist; expected {EXPECTED} in it")
    return load_split(root, "train"), load_split(root, "test")


def synthetic_mnist(num_train: int, num_test: int, seed: int = 0) -> tuple[Split, Split]:
    """Random images and labels in MNIST's shapes: for --smoke runs, which test plumbing only."""
    rng = np.random.default_rng(seed)

    def split(count: int) -> Split:
        images = rng.integers(0, 256, size=(count, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
        return Split(images, rng.integers(0, NUM_CLASSES, size=count, dtype=np.int64))

    return split(num_train), split(num_test)
