"""New inputs read as the run read its data: image files and folders of them, decoded as the
imagefolder reader decodes (resized only where training resized), or the rows of CSV
tables (the training table's feature columns; the label column may be there or not).

In a folder, a file that is not an image is skipped, and so is an image that cannot be
decoded; both are reported (Inputs.report). A file named on the command line must be read:
one that cannot is the command's one line."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from src.scaffold.data.images import IMAGE_SUFFIXES, ImageDecoder
from src.scaffold.data.tables import read_rows
from src.scaffold.errors import ConfigError, DatasetError
from src.scaffold.infer.recorded import Recorded

TABLE_SUFFIXES = (".csv",)
# The names a note lists before "...".
LISTED = 5


@dataclass
class Inputs:
    """The samples to predict on: a name for each (its file, or "table.csv:7", the row's
    line), and how to load each as the model's raw input; what was skipped on the way."""

    names: tuple[str, ...]
    load: Callable[[int], np.ndarray]
    # Files of the folders given that are not of the inputs' kind (by suffix), skipped.
    others: list[str] = field(default_factory=list)
    kind: str = "images"
    suffixes: tuple[str, ...] = IMAGE_SUFFIXES
    # Files named on the command line: one that cannot be read stops the command.
    named: frozenset[str] = frozenset()
    # (file, why) for images of a folder that could not be decoded: skipped.
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    # The conversions made, as the run read its data: "L to RGB", "500x500 to 32x32".
    converted: Counter = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.names)

    def batches(self, size: int) -> Iterator[tuple[tuple[str, ...], np.ndarray]]:
        """The samples in order, ``size`` at a time, each batch one array; an image of a
        folder that cannot be decoded is left out (and kept in ``unreadable``)."""
        names: list[str] = []
        arrays: list[np.ndarray] = []
        for index, name in enumerate(self.names):
            try:
                arrays.append(self.load(index))
            except DatasetError as err:
                if name in self.named:
                    raise
                self.unreadable.append((name, str(err)))
                continue
            names.append(name)
            if len(names) == size:
                yield tuple(names), np.stack(arrays)
                names, arrays = [], []
        if names:
            yield tuple(names), np.stack(arrays)

    def report(self, verbose: bool = False) -> list[str]:
        """What was skipped or converted, said once: a count and the names (a line each
        with ``verbose``); each file that could not be decoded on its own line."""
        said = []
        if self.others:
            kinds = f"{self.kind} ({', '.join(self.suffixes)})"
            if verbose:
                said += [f"skipped {name}: not {kinds}" for name in self.others]
            else:
                shown = ", ".join(self.others[:LISTED])
                more = ", ..." if len(self.others) > LISTED else ""
                said.append(
                    f"skipped {len(self.others)} file(s) that are not {kinds}: "
                    f"{shown}{more} (--verbose lists each)"
                )
        said += [f"skipped: {why}" for _, why in self.unreadable]
        if self.converted:
            done = ", ".join(f"{count} from {what}" for what, count in self.converted.items())
            said.append(f"converted as the run read its data: {done}")
        return [f"note: {line}" for line in said]


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


def _files(given: str, suffixes: tuple[str, ...], kind: str) -> tuple[list[Path], list[Path]]:
    """The files of ``kind`` a path names, and those of a folder that are not (skipped)."""
    path = Path(given)
    if path.is_dir():
        every = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        found = [p for p in every if p.suffix.lower() in suffixes]
        if not found:
            raise DatasetError(f"{path} holds no {kind} ({', '.join(suffixes)})")
        return found, [p for p in every if p.suffix.lower() not in suffixes]
    if path.suffix.lower() not in suffixes:
        raise DatasetError(
            f"{path} is not {kind} ({', '.join(suffixes)}): the checkpoint's model takes {kind}"
        )
    return [path], []


def _every(paths: Sequence[str], suffixes: tuple[str, ...], kind: str) -> tuple[list, list]:
    """The files of ``kind`` the paths name, and the others their folders hold."""
    files: list[Path] = []
    others: list[Path] = []
    for given in paths:
        found, skipped = _files(given, suffixes, kind)
        files += found
        others += skipped
    return files, others


def _images(paths: Sequence[str], recorded: Recorded) -> Inputs:
    files, others = _every(paths, IMAGE_SUFFIXES, "an image")
    channels, height, width = recorded.shape
    mode = "L" if channels == 1 else "RGB"
    # Resized only where the run resized its images (data.resize); else a size must match.
    decode = ImageDecoder(mode, (width, height) if recorded.resize else None)
    named = frozenset(str(Path(given)) for given in paths if Path(given).is_file())
    inputs = Inputs(tuple(map(str, files)), lambda index: load(index), [str(p) for p in others])
    inputs.named = named

    def load(index: int) -> np.ndarray:
        pixels, was, size = decode.read(files[index])
        if pixels.shape != recorded.shape:
            raise DatasetError(
                f"{files[index]} is {pixels.shape[2]}x{pixels.shape[1]} pixels; the model "
                f"takes {width}x{height} (its run read its images without data.resize): resize "
                "the image, or train with data.resize"
            )
        if was != mode:
            inputs.converted[f"{was} to {mode}"] += 1
        if size != (width, height):
            inputs.converted[f"{size[0]}x{size[1]} to {width}x{height} pixels"] += 1
        return pixels

    return inputs


def _tables(paths: Sequence[str], recorded: Recorded) -> Inputs:
    files, others = _every(paths, TABLE_SUFFIXES, "a CSV table")
    names: list[str] = []
    rows: list[np.ndarray] = []
    for path in files:
        values, lines = read_rows(path, recorded.features, recorded.label_column, recorded.shape[0])
        names += [f"{path}:{line}" for line in lines]
        rows.append(values)
    table = np.concatenate(rows)
    skipped = [str(p) for p in others]
    return Inputs(tuple(names), lambda index: table[index], skipped, "CSV tables", TABLE_SUFFIXES)
