"""The built-in readers: how a dataset directory becomes samples, and the default augmentation.

Three formats, chosen by `data.format` in config.yaml (auto tries each in turn, then
yours from src/data.py, in the order defined there):

- mnist: MNIST's idx files (train-images-idx3-ubyte[.gz] ...), in any of the
  layouts platforms use;
- imagefolder: one folder of PNG or JPEG images per class, under train/ and
  test/ (and an optional val/), or one folder of class folders, split by
  data.test_fraction;
- csv: a table with a header row, numeric feature columns and a label column
  (data.label_column), as train.csv and test.csv (val.csv optional) or one file;
  with data.labels: values the label column is a number to predict, not a class.

A reader of your own is a Reader subclass marked with @reader("name") in src/data.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from src.scaffold.data.formats import Reader, reader, unwrap
from src.scaffold.data.idx import FILES, find_file, idx_found, read_split
from src.scaffold.data.images import ImageFolderReader
from src.scaffold.data.splits import Split
from src.scaffold.data.tables import CsvReader
from src.scaffold.errors import DatasetError

__all__ = ["BUILTIN", "Reader", "Readers", "augment", "detect", "looked_for", "reader"]

log = logging.getLogger(__name__)


@reader("mnist")
class MnistReader(Reader):
    looks_for = "MNIST idx files (train-images-idx3-ubyte[.gz] and the other three)"

    def found(self, directory: Path) -> str | None:
        directory = unwrap(directory)
        where = idx_found(directory, "train") or idx_found(directory, "test")
        return f"idx files ({where} layout)" if where else None

    def read(self, directory: Path) -> dict[str, Split]:
        directory = unwrap(directory)
        splits = {}
        for split, (images, labels) in FILES.items():
            try:
                image_file = find_file(directory, images)
            except DatasetError:
                continue
            splits[split] = read_split(image_file, find_file(directory, labels))
        if not splits:
            find_file(directory, FILES["train"][0])  # raises the line naming what was searched
        return splits


Readers = Mapping[str, type]


def detect(
    readers: Readers, directory: Path, chosen: str, options: dict[str, object]
) -> tuple[Reader, str] | None:
    """The reader for ``directory`` and why: data.format's, or with auto the first that
    recognises it (mnist, imagefolder, csv, then yours)."""
    names: Sequence[str] = list(readers) if chosen == "auto" else [chosen]
    for name in names:
        if name not in readers:
            raise DatasetError(
                f"data.format {name!r} is no reader here; there are auto, {', '.join(readers)}"
            )
        candidate = readers[name](options)
        why = candidate.found(directory)
        if why:
            return candidate, why
    return None


def looked_for(readers: Readers, chosen: str) -> str:
    """What the readers look for, for the line shown when none matches."""
    names = list(readers) if chosen == "auto" else [chosen]
    return "; ".join(readers[name].looks_for for name in names if name in readers)


def augment(image: np.ndarray, rng: np.random.Generator, crop: int, flip: bool) -> np.ndarray:
    """Random crop (pad ``crop`` pixels with zeros, cut back to size) and horizontal flip of
    one uint8 (C, H, W) image. Off unless data.random_crop / data.random_flip ask for it."""
    if crop:
        channels, height, width = image.shape
        padded = np.zeros((channels, height + 2 * crop, width + 2 * crop), dtype=image.dtype)
        padded[:, crop : crop + height, crop : crop + width] = image
        top, left = rng.integers(0, 2 * crop + 1, size=2)
        image = padded[:, top : top + height, left : left + width]
    if flip and rng.random() < 0.5:
        image = image[:, :, ::-1]
    return np.ascontiguousarray(image)


# The formats that ship, in the order data.format auto tries them.
BUILTIN: dict[str, type] = {
    "mnist": MnistReader,
    "imagefolder": ImageFolderReader,
    "csv": CsvReader,
}
