"""The idx reader: every supported layout, plain and gzipped, and each way a file can be bad."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from src.mnist import DatasetError, load_mnist, read_idx

NAMES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def idx(array: np.ndarray) -> bytes:
    """The idx encoding of an uint8 array."""
    header = struct.pack(f">BBBB{array.ndim}I", 0, 0, 0x08, array.ndim, *array.shape)
    return header + array.astype(np.uint8).tobytes()


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def tiny_split(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(count, 28, 28), dtype=np.uint8)
    return images, rng.integers(0, 10, size=count, dtype=np.uint8)


def write_dataset(root: Path, layout: str, gz: bool = False) -> dict[str, tuple]:
    """Write 5 train and 3 test samples in a layout: flat, openi or torchvision."""
    arrays = {"train": tiny_split(5, 0), "test": tiny_split(3, 1)}
    for split, (images, labels) in arrays.items():
        folder = {"flat": root, "openi": root / split, "torchvision": root / "MNIST" / "raw"}
        image_name, label_name = NAMES[split]
        write(folder[layout] / image_name, idx(images), gz)
        write(folder[layout] / label_name, idx(labels), gz)
    return arrays


@pytest.mark.parametrize("layout", ["flat", "openi", "torchvision"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_reads_every_layout(tmp_path: Path, layout: str, gz: bool) -> None:
    arrays = write_dataset(tmp_path, layout, gz)
    train, test = load_mnist(tmp_path)
    for split, loaded in (("train", train), ("test", test)):
        images, labels = arrays[split]
        assert loaded.images.dtype == np.uint8 and loaded.images.shape == images.shape
        assert loaded.labels.dtype == np.int64
        np.testing.assert_array_equal(loaded.images, images)
        np.testing.assert_array_equal(loaded.labels, labels)


def test_missing_directory_names_it(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist") as err:
        load_mnist(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(err.value)
    assert "t10k-labels-idx1-ubyte" in str(err.value)


def test_missing_file_names_paths_and_expected_files(tmp_path: Path) -> None:
    write_dataset(tmp_path, "openi")
    (tmp_path / "test" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetError) as err:
        load_mnist(tmp_path)
    message = str(err.value)
    assert "t10k-labels-idx1-ubyte[.gz] not found" in message
    assert str(tmp_path / "MNIST" / "raw") in message
    assert "train-images-idx3-ubyte" in message
    assert "\n" not in message


def test_bad_magic(tmp_path: Path) -> None:
    path = write(tmp_path / "x-idx1-ubyte", b"\x00\x00\x0d\x01" + struct.pack(">I", 0))
    with pytest.raises(DatasetError, match="bad magic"):
        read_idx(path)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_truncated_file(tmp_path: Path, gz: bool) -> None:
    data = idx(np.zeros((4, 28, 28), dtype=np.uint8))
    path = write(tmp_path / "x-idx3-ubyte", data[:-10], gz)
    with pytest.raises(DatasetError, match="truncated"):
        read_idx(path)


def test_truncated_gzip_stream(tmp_path: Path) -> None:
    data = gzip.compress(idx(np.zeros((4, 28, 28), dtype=np.uint8)))
    path = tmp_path / "x-idx3-ubyte.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match="cannot read"):
        read_idx(path)


def test_count_mismatch(tmp_path: Path) -> None:
    write_dataset(tmp_path, "flat")
    write(tmp_path / "train-labels-idx1-ubyte", idx(np.zeros(4, dtype=np.uint8)))
    with pytest.raises(DatasetError, match="5 images but .* 4 labels"):
        load_mnist(tmp_path)
