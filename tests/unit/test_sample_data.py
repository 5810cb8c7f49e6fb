"""The digits every project ships: what generator.render.sample_data writes, in MNIST's format."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from generator.render.sample_data import (
    TEMPLATE_DATA_DIR,
    digits_as_mnist,
    idx_bytes,
    write_idx,
    write_sample_dataset,
)

SHIPPED = sorted(
    path.relative_to(TEMPLATE_DATA_DIR).as_posix() for path in TEMPLATE_DATA_DIR.rglob("*.gz")
)


def test_the_template_ships_the_four_files() -> None:
    assert SHIPPED == [
        "test/t10k-images-idx3-ubyte.gz",
        "test/t10k-labels-idx1-ubyte.gz",
        "train/train-images-idx3-ubyte.gz",
        "train/train-labels-idx1-ubyte.gz",
    ]
    assert sum((TEMPLATE_DATA_DIR / name).stat().st_size for name in SHIPPED) < 200_000


def test_shipped_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    written = write_sample_dataset(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == SHIPPED
    for name in SHIPPED:
        shipped, fresh = (TEMPLATE_DATA_DIR / name).read_bytes(), (tmp_path / name).read_bytes()
        # The data first, so that a real change reads differently from a zlib
        # build that compresses the same data to other bytes.
        assert gzip.decompress(shipped) == gzip.decompress(fresh), f"{name}: the data changed"
        assert shipped == fresh, (
            f"{name}: same data, other gzip bytes (another zlib build?); "
            "regenerate with python -m generator.render.sample_data"
        )


def test_writing_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    first = [p.read_bytes() for p in write_sample_dataset(tmp_path / "a")]
    second = [p.read_bytes() for p in write_sample_dataset(tmp_path / "b")]
    assert first == second


def test_digits_in_mnist_shape() -> None:
    arrays = digits_as_mnist()
    assert arrays.train_images.shape == (1438, 28, 28)
    assert arrays.test_images.shape == (359, 28, 28)
    assert arrays.train_images.dtype == arrays.train_labels.dtype == np.uint8
    assert arrays.train_images.max() == 255
    # The 2-pixel border stays empty, as MNIST centres its digits.
    assert not arrays.train_images[:, :2].any() and not arrays.train_images[:, :, -2:].any()
    # Stratified: every class is about 20 % of the test split.
    test_counts = np.bincount(arrays.test_labels, minlength=10)
    all_counts = test_counts + np.bincount(arrays.train_labels, minlength=10)
    assert np.all(np.abs(test_counts - 0.2 * all_counts) <= 1)


def test_idx_header_and_gzip(tmp_path: Path) -> None:
    array = np.arange(6, dtype=np.uint8).reshape(2, 3)
    assert idx_bytes(array) == struct.pack(">BBBBII", 0, 0, 8, 2, 2, 3) + bytes(range(6))
    path = write_idx(tmp_path / "x-idx2-ubyte", array)
    assert path.name == "x-idx2-ubyte.gz"
    assert gzip.decompress(path.read_bytes()) == idx_bytes(array)
    with pytest.raises(ValueError, match="uint8"):
        idx_bytes(array.astype(np.int64))
