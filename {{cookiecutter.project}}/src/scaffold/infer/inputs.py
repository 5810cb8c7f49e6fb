"""New inputs read as the run read its data: image files and folders of them, decoded as the
imagefolder reader decodes (resized only where training resized), or the rows of CSV
tables (the training table's feature columns; the label column may be there or not)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from src.scaffold.data.images import IMAGE_SUFFIXES, ImageDecoder
from src.scaffold.data.tables import read_rows
from src.scaffold.errors import ConfigError, DatasetError
from src.scaffold.infer.recorded import Recorded

TABLE_SUFFIXES = (".csv",)


@dataclass(frozen=True)
class Inputs:
    """The samples to predict on: a name for each (its file, or "table.csv:7", the row's
    line), and how to load each as the model's raw input."""

    names: tuple[str, ...]
    load: Callable[[int], np.ndarray]

    def __len__(self) -> int:
        return len(self.names)

    def batches(self, size: int) -> Iterator[tuple[tuple[str, ...], np.ndarray]]:
        """The samples in order, ``size`` at a time, each batch one array."""
        for start in range(0, len(self), size):
            names = self.names[start : start + size]
            yield names, np.stack([self.load(i) for i in range(start, start + len(names))])


def gather(paths: Sequence[str], recorded: Recorded) -> Inputs:
    """The inputs ``paths`` name, for the checkpoint's model: images (files, or folders
    searched through) for a model of images, CSV files for one of table rows. Every path is
    checked before any prediction: one line naming the first that does not fit."""
    if not paths:
        kinds = "images or folders of them" if recorded.images else "CSV files"
        raise ConfigError(f"give the {kinds} to predict on: python predict.py INPUT...")
    for given in paths:
        if not Path(given).exists():
            raise DatasetError(f"{given}: no such file or folder")
    return _images(paths, recorded) if recorded.images else _tables(paths, recorded)


def _files(given: str, suffixes: tuple[str, ...], kind: str) -> list[Path]:
    path = Path(given)
    if path.is_dir():
        found = sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and p.suffix.lower() in suffixes and not p.name.startswith(".")
        )
        if not found:
            raise DatasetError(f"{path} holds no {kind} ({', '.join(suffixes)})")
        return found
    if path.suffix.lower() not in suffixes:
        raise DatasetError(
            f"{path} is not {kind} ({', '.join(suffixes)}): the checkpoint's model takes {kind}"
        )
    return [path]


def _images(paths: Sequence[str], recorded: Recorded) -> Inputs:
    files = [f for given in paths for f in _files(given, IMAGE_SUFFIXES, "an image")]
    channels, height, width = recorded.shape
    mode = "L" if channels == 1 else "RGB"
    # Resized only where the run resized its images (data.resize); else a size must match.
    decode = ImageDecoder(mode, (width, height) if recorded.resize else None)

    def load(index: int) -> np.ndarray:
        pixels = decode(files[index])
        if pixels.shape != recorded.shape:
            raise DatasetError(
                f"{files[index]} is {pixels.shape[2]}x{pixels.shape[1]} pixels; the model "
                f"takes {width}x{height} (its run read its images without data.resize): resize "
                "the image, or train with data.resize"
            )
        return pixels

    return Inputs(tuple(str(f) for f in files), load)


def _tables(paths: Sequence[str], recorded: Recorded) -> Inputs:
    files = [f for given in paths for f in _files(given, TABLE_SUFFIXES, "a CSV table")]
    names: list[str] = []
    rows: list[np.ndarray] = []
    for path in files:
        values, lines = read_rows(path, recorded.features, recorded.label_column, recorded.shape[0])
        names += [f"{path}:{line}" for line in lines]
        rows.append(values)
    table = np.concatenate(rows)
    return Inputs(tuple(names), lambda index: table[index])
