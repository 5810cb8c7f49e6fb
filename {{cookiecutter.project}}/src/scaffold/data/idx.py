"""MNIST's idx files (plain or .gz) read with numpy alone, in every layout platforms use."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from src.scaffold.data.splits import Split, array_split
from src.scaffold.errors import DatasetError

FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
EXPECTED = ", ".join(name for pair in FILES.values() for name in pair) + " (each may end in .gz)"
LAYOUTS = ("", "train", "test", "MNIST/raw", "train/MNIST/raw", "test/MNIST/raw")  # shallow first
MAX_DEPTH = 5


def read_idx(path: Path) -> np.ndarray:
    """An idx file of unsigned bytes as an array of the shape its header gives."""
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as stream:
            data = bytearray(stream.read())  # so that the arrays built on it are writable
    except (OSError, EOFError, zlib.error) as err:
        raise DatasetError(f"cannot read {path}: {err}") from err
    # Magic number: two zero bytes, the element type (0x08: unsigned byte), the dimensions.
    if len(data) < 4 or data[:3] != b"\x00\x00\x08" or data[3] == 0:
        raise DatasetError(f"{path} is not an idx file of unsigned bytes (bad magic number)")
    ndim, header = data[3], 4 + 4 * data[3]
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


def read_split(image_path: Path, label_path: Path) -> Split:
    """A split from its image and label files, checked against each other: uint8 (N, 1, H, W)."""
    images, labels = read_idx(image_path), read_idx(label_path)
    if images.ndim != 3:
        raise DatasetError(f"{image_path} holds {images.ndim}-d data, not images (N, H, W)")
    if labels.ndim != 1:
        raise DatasetError(f"{label_path} is not a label file: it has {labels.ndim} dimensions")
    if len(images) != len(labels):
        raise DatasetError(
            f"{image_path} holds {len(images)} images but {label_path} {len(labels)} labels"
        )
    return array_split(images[:, None], labels)


def idx_found(directory: Path, split: str = "train") -> str | None:
    """The layout in which ``split``'s image file sits in directory, else None."""
    name = FILES[split][0]
    for layout in LAYOUTS:
        if any((directory / layout / f).is_file() for f in (name, f"{name}.gz")):
            return layout or "flat"
    return None


def find_file(directory: Path, name: str) -> Path:
    """``name`` or ``name.gz`` in a known layout of directory, else the shallowest copy."""
    for candidate in (directory / layout / n for layout in LAYOUTS for n in (name, f"{name}.gz")):
        if candidate.is_file():
            return candidate
    level = [directory]
    for _ in range(MAX_DEPTH):
        found = sorted(p for d in level for p in (d / name, d / f"{name}.gz") if p.is_file())
        if found:
            return found[0]
        level = sorted(p for d in level for p in d.iterdir() if p.is_dir())
    raise DatasetError(
        f"{name}[.gz] not found in {directory} (searched {MAX_DEPTH} levels); expected {EXPECTED}"
    )
