"""The built-in readers (mnist, imagefolder, csv: auto tries them, then yours) and augmentation."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from src.scaffold.data.formats import Reader, reader, unwrap
from src.scaffold.data.idx import FILES, find_file, idx_found, read_split
from src.scaffold.data.images import ImageFolderReader
from src.scaffold.data.splits import Split
from src.scaffold.data.tables import CsvReader
from src.scaffold.errors import DatasetError

__all__ = ["BUILTIN", "Reader", "Readers", "augment", "detect", "looked_for", "reader"]


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
    """The reader for ``directory`` and why: data.format's, or with auto the first that fits."""
    for name in list(readers) if chosen == "auto" else [chosen]:
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
    names = list(readers) if chosen == "auto" else [chosen]
    return "; ".join(readers[name].looks_for for name in names if name in readers)


def augment(image: np.ndarray, rng: np.random.Generator, crop: int, flip: bool) -> np.ndarray:
    """Random crop (zero-padded by ``crop``) and horizontal flip of one uint8 (C, H, W) image."""
    if crop:
        height, width = image.shape[1:]
        padded = np.pad(image, ((0, 0), (crop, crop), (crop, crop)))  # with zeros
        top, left = rng.integers(0, 2 * crop + 1, size=2)
        image = padded[:, top : top + height, left : left + width]
    if flip and rng.random() < 0.5:
        image = image[:, :, ::-1]
    return np.ascontiguousarray(image)


# The formats that ship, in the order data.format auto tries them.
BUILTIN: dict[str, type] = {r.name: r for r in (MnistReader, ImageFolderReader, CsvReader)}
