"""The csv format: a header row, numeric features and a label column (classes or values)."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import numpy as np

from src.scaffold.data.formats import SPLITS, Reader, reader, unwrap
from src.scaffold.data.splits import Split, array_split
from src.scaffold.errors import DatasetError


@reader("csv")
class CsvReader(Reader):
    looks_for = "a CSV table (train.csv and test.csv, or one .csv file)"

    def _files(self, directory: Path) -> dict[str, Path]:
        directory = unwrap(directory)
        named = {s: directory / f"{s}.csv" for s in SPLITS if (directory / f"{s}.csv").is_file()}
        if "train" in named:
            return named
        tables = sorted(directory.glob("*.csv"))
        return {"all": tables[0]} if len(tables) == 1 else {}

    def found(self, directory: Path) -> str | None:
        return ", ".join(p.name for p in self._files(directory).values()) or None

    def read(self, directory: Path) -> dict[str, Split]:
        files = self._files(directory)
        if not files:
            raise DatasetError(f"{directory} holds no train.csv, nor exactly one .csv file")
        column = str(self.options.get("label_column") or "label")
        tables = {split: _read_table(path, column) for split, path in files.items()}
        (first_file, (_, _, first)), *others = zip(files.values(), tables.values())
        for path, (_, _, names) in others:
            if names != first:
                raise DatasetError(f"{path} has other feature columns than {first_file}")
        values: list[str] = []
        targets: dict[str, np.ndarray] = {}
        if self.options.get("labels") == "values":
            for split, (_, labels, _) in tables.items():
                bad = next((v for v in labels if not _finite(v)), None)
                if bad is not None:
                    raise DatasetError(
                        f"{files[split]}: column {column!r} holds {bad!r}, not a finite number "
                        "(data.labels: values)"
                    )
                targets[split] = np.asarray([float(v) for v in labels], dtype=np.float32)
        else:
            # Class names: the training split's label values, as numbers when they all are.
            train = tables.get("train", tables.get("all"))
            values = sorted(set(train[1]), key=_label_key)  # type: ignore[index]
            index = {v: i for i, v in enumerate(values)}
            for split, (_, labels, _) in tables.items():
                extra = sorted(set(labels) - set(index), key=_label_key)
                if extra:
                    raise DatasetError(
                        f"train and {split} splits have different classes: {split} has "
                        f"{', '.join(extra[:5])} that train has not"
                    )
            targets = {s: np.array([index[v] for v in t[1]]) for s, t in tables.items()}
        return {
            split: replace(array_split(features, targets[split], values), features=first)
            for split, (features, _, _) in tables.items()
        }


def _finite(text: str) -> bool:
    return _number(text) and math.isfinite(float(text))


def _label_key(value: str) -> tuple[int, float, str]:
    """Numbers first, in numeric order, then the other labels by name."""
    return (0, float(value), value) if _number(value) else (1, 0.0, value)


def _read_table(path: Path, label_column: str) -> tuple[np.ndarray, list[str], tuple[str, ...]]:
    """(features float32 (N, F), label strings, feature column names) of a CSV with a header."""
    with open(path, newline="", encoding="utf-8") as stream:
        rows = csv.reader(stream)
        header = [name.strip() for name in next(rows, None) or []]
        if not header:
            raise DatasetError(f"{path} is empty: expected a header row")
        if label_column not in header:
            raise DatasetError(
                f"{path} has no label column {label_column!r} (set data.label_column); "
                f"its columns: {', '.join(header[:10])}"
            )
        target = header.index(label_column)
        features: list[list[float]] = []
        labels: list[str] = []
        for line, row in _lines(rows, len(header), path):
            labels.append(row[target].strip())
            try:
                features.append([float(v) for i, v in enumerate(row) if i != target])
            except ValueError:
                bad = next(i for i, v in enumerate(row) if i != target and not _number(v))
                raise DatasetError(
                    f"{path} line {line}, column {header[bad]!r}: {row[bad]!r} is not a number"
                ) from None
            if not all(math.isfinite(v) for v in features[-1]):
                bad = next(i for i, v in enumerate(row) if i != target and not _finite(v))
                raise DatasetError(
                    f"{path} line {line}, column {header[bad]!r}: {row[bad]!r} is not a finite "
                    "number (fill or drop the row)"
                )
    if not labels:
        raise DatasetError(f"{path} has a header but no rows")
    names = tuple(name for i, name in enumerate(header) if i != target)
    return np.asarray(features, dtype=np.float32), labels, names


def _lines(rows: Iterator[list[str]], fields: int, path: Path) -> Iterator[tuple[int, list[str]]]:
    for line, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) != fields:
            raise DatasetError(f"{path} line {line} has {len(row)} fields, the header has {fields}")
        yield line, row


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_rows(
    path: Path, features: tuple[str, ...], label_column: str | None, width: int
) -> tuple[np.ndarray, list[int]]:
    """A CSV's rows to predict on as float32 (N, F) in the training columns' order, and their
    line numbers; ``width`` columns when the reader named none."""
    with open(path, newline="", encoding="utf-8") as stream:
        rows = csv.reader(stream)
        header = [name.strip() for name in next(rows, None) or []]
        if not header:
            raise DatasetError(f"{path} is empty: expected a header row")
        given = [name for name in header if name != label_column]
        if features:
            lacks = [name for name in features if name not in given]
            extra = [name for name in given if name not in features]
            if lacks or extra:
                parts = [f"lacks {', '.join(lacks[:5])}"] if lacks else []
                parts += [f"has {', '.join(extra[:5])} that it had not"] if extra else []
                why = "; ".join(parts)
                raise DatasetError(f"{path} has other columns than the training data: {why}")
            order = [header.index(name) for name in features]
        else:
            order = [i for i, name in enumerate(header) if name != label_column]
            if len(order) != width:
                raise DatasetError(
                    f"{path} has {len(order)} feature columns; the model takes {width}"
                )
        values: list[list[float]] = []
        lines: list[int] = []
        for line, row in _lines(rows, len(header), path):
            bad = next((i for i in order if not _finite(row[i])), None)
            if bad is not None:
                raise DatasetError(
                    f"{path} line {line}, column {header[bad]!r}: {row[bad]!r} is not a finite "
                    "number"
                )
            values.append([float(row[i]) for i in order])
            lines.append(line)
    if not values:
        raise DatasetError(f"{path} has a header but no rows")
    return np.asarray(values, dtype=np.float32), lines
