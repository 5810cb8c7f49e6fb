"""New inputs read as the run read its data: images (files, folders) or CSV rows. A folder's
other files and undecodable images are skipped and reported; a named file must be read."""

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
LISTED = 5  # the names a note lists before "..."


@dataclass
class Inputs:
    """The samples (named by file, or "table.csv:7"), how to load each, and what was skipped."""

    names: tuple[str, ...]
    load: Callable[[int], np.ndarray]
    others: list[str] = field(default_factory=list)  # the folders' files of another kind
    kind: str = "images"
    suffixes: tuple[str, ...] = IMAGE_SUFFIXES
    named: frozenset[str] = frozenset()  # given by name: one that cannot be read is an error
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (file, why), skipped
    converted: Counter = field(default_factory=Counter)  # "L to RGB", "500x500 to 32x32"

    def batches(self, size: int) -> Iterator[tuple[tuple[str, ...], np.ndarray]]:
        """The samples in order, ``size`` at a time; a folder's unreadable image is left out."""
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
        """What was skipped or converted: a count and names (a line each with ``verbose``)."""
        kinds = f"{self.kind} ({', '.join(self.suffixes)})"
        said = [f"skipped {name}: not {kinds}" for name in self.others] if verbose else []
        if self.others and not verbose:
            more = ", ..." if len(self.others) > LISTED else ""
            said.append(
                f"skipped {len(self.others)} file(s) that are not {kinds}: "
                f"{', '.join(self.others[:LISTED])}{more} (--verbose lists each)"
            )
        said += [f"skipped: {why}" for _, why in self.unreadable]
        if self.converted:
            done = ", ".join(f"{count} from {what}" for what, count in self.converted.items())
            said.append(f"converted as the run read its data: {done}")
        return [f"note: {line}" for line in said]


def gather(paths: Sequence[str], recorded: Recorded) -> Inputs:
    """The inputs ``paths`` name, every path checked before any prediction."""
    if not paths:
        kinds = "images or folders of them" if recorded.images else "CSV files"
        raise ConfigError(f"give the {kinds} to predict on: python predict.py INPUT...")
    for given in paths:
        if not Path(given).exists():
            raise DatasetError(f"{given}: no such file or folder")
    if recorded.images:
        return _images(paths, recorded)
    files, others = _every(paths, TABLE_SUFFIXES, "a CSV table")
    names: list[str] = []
    rows: list[np.ndarray] = []
    for path in files:
        values, lines = read_rows(path, recorded.features, recorded.label_column, recorded.shape[0])
        names += [f"{path}:{line}" for line in lines]
        rows.append(values)
    table = np.concatenate(rows)
    table = table.astype(np.int64) if recorded.ids else table  # token ids, not features
    return Inputs(tuple(names), lambda index: table[index], others, "CSV tables", TABLE_SUFFIXES)


def _every(paths: Sequence[str], suffixes: tuple[str, ...], kind: str) -> tuple[list, list]:
    """The files of ``kind`` the paths name, and the others their folders hold (skipped)."""
    files: list[Path] = []
    others: list[str] = []
    for path in map(Path, paths):
        if path.is_dir():
            every = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            found = [p for p in every if p.suffix.lower() in suffixes]
            if not found:
                raise DatasetError(f"{path} holds no {kind} ({', '.join(suffixes)})")
            files += found
            others += [str(p) for p in every if p.suffix.lower() not in suffixes]
        elif path.suffix.lower() in suffixes:
            files.append(path)
        else:
            raise DatasetError(
                f"{path} is not {kind} ({', '.join(suffixes)}): the checkpoint's model takes {kind}"
            )
    return files, others


def _images(paths: Sequence[str], recorded: Recorded) -> Inputs:
    files, others = _every(paths, IMAGE_SUFFIXES, "an image")
    channels, height, width = recorded.shape
    mode = "L" if channels == 1 else "RGB"
    # Resized only where the run resized its images (data.resize); else a size must match.
    decode = ImageDecoder(mode, (width, height) if recorded.resize else None)
    named = frozenset(str(Path(given)) for given in paths if Path(given).is_file())
    inputs = Inputs(tuple(map(str, files)), lambda index: load(index), others, named=named)

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
