"""Your data: how a dataset directory becomes samples, and the image augmentation.

Three formats ship, chosen by `data.format` in config.yaml (auto tries each in turn):

- mnist: MNIST's idx files (train-images-idx3-ubyte[.gz] ...), in any of the
  layouts platforms use;
- imagefolder: one folder of PNG or JPEG images per class, under train/ and
  test/ (and an optional val/), or one folder of class folders, split by
  data.test_fraction;
- csv: a table with a header row, numeric feature columns and a label column
  (data.label_column), as train.csv and test.csv (val.csv optional) or one file.

The scaffold finds the dataset first (a local directory, /dataset, the OBS copy,
a C2Net zip or mount, --traindata/--testdata) and hands its directory to a reader.

Your own format is one Reader subclass here, registered with @reader("name"); set
`data.format: name` in config.yaml. Its read() returns {"train": Split, "test": Split}
(and "val" if the data has one), or {"all": Split} for data to be split by ratio.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from src.scaffold.errors import DatasetError
from src.scaffold.idx import FILES, find_file, idx_found, read_split
from src.scaffold.splits import Split, array_split

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
SPLITS = ("train", "val", "test")


class Reader:
    """A data format: ``found`` says why a directory holds it, ``read`` returns its splits."""

    name: ClassVar[str]
    # What the reader looks for, for the line shown when no format matches.
    looks_for: ClassVar[str]

    def __init__(self, options: dict[str, object]) -> None:
        # The data: section of the config (label_column, resize ...).
        self.options = options

    def found(self, directory: Path) -> str | None:
        """Why ``directory`` holds data in this format (one short phrase), else None."""
        raise NotImplementedError

    def read(self, directory: Path) -> dict[str, Split]:
        """The splits in ``directory``: "train", "test" and "val", or "all"."""
        raise NotImplementedError


READERS: dict[str, type] = {}


def reader(name: str):
    """Register a Reader subclass under ``name`` (the value of data.format)."""

    def register(cls: type) -> type:
        cls.name = name
        READERS[name] = cls
        return cls

    return register


def unwrap(directory: Path) -> Path:
    """Step into lone folders (an archive's top directory): MyData/train -> train's parent."""
    while True:
        entries = [p for p in directory.iterdir() if not p.name.startswith(".")]
        if len(entries) != 1 or not entries[0].is_dir() or entries[0].name in SPLITS:
            return directory
        directory = entries[0]


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


def _class_folders(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))


def _holds_images(folder: Path) -> bool:
    return any(p.suffix.lower() in IMAGE_SUFFIXES for p in folder.iterdir())


@reader("imagefolder")
class ImageFolderReader(Reader):
    looks_for = "an image folder (train/ and test/ of class folders of .png/.jpg, or class folders)"

    def _roots(self, directory: Path) -> dict[str, Path]:
        directory = unwrap(directory)
        named = {s: directory / s for s in SPLITS if (directory / s).is_dir()}
        if "train" in named:
            return named
        return {"all": directory}

    def found(self, directory: Path) -> str | None:
        roots = self._roots(directory)
        first = next(iter(roots.values()))
        classes = _class_folders(first)
        if not classes or not any(_holds_images(c) for c in classes):
            return None
        parts = "/, ".join(roots) + "/" if "all" not in roots else "one folder"
        return f"{len(classes)} class folders of images in {parts}"

    def read(self, directory: Path) -> dict[str, Split]:
        size = self.options.get("resize")
        resize = None if size is None else tuple(size)  # type: ignore[arg-type]
        return {name: _image_split(root, resize) for name, root in self._roots(directory).items()}


def _image_split(root: Path, resize: tuple[int, int] | None) -> Split:
    """Every image under root's class folders, checked by header (none decoded yet)."""
    from PIL import Image  # only image data needs Pillow

    files: list[Path] = []
    labels: list[int] = []
    classes = _class_folders(root)
    if not classes:
        raise DatasetError(f"{root} holds no class folders (one folder of images per class)")
    for label, folder in enumerate(classes):
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
        if not entries:
            raise DatasetError(f"class folder {folder} is empty")
        for path in entries:
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                kinds = ", ".join(IMAGE_SUFFIXES)
                raise DatasetError(f"{path} is not an image ({kinds}); move it out of {folder}")
            files.append(path)
            labels.append(label)
    sizes: dict[tuple[int, int], Path] = {}
    modes = set()
    for path in files:
        try:
            with Image.open(path) as image:
                sizes.setdefault(image.size, path)
                modes.add(image.mode)
        except (OSError, SyntaxError) as err:
            raise DatasetError(f"{path} cannot be read as an image: {err}") from err
    if len(sizes) > 1 and resize is None:
        (a, first), (b, other) = list(sizes.items())[:2]
        raise DatasetError(
            f"images of different sizes: {first} is {a[0]}x{a[1]}, {other} is {b[0]}x{b[1]}; "
            "set data.resize: [height, width]"
        )
    width, height = next(iter(sizes)) if resize is None else (resize[1], resize[0])
    mode = "L" if modes <= {"L", "1", "I;16", "I", "F"} else "RGB"
    shape = (1 if mode == "L" else 3, height, width)
    decode = ImageDecoder(mode, (width, height) if resize is not None else None)
    return Split(
        np.asarray(labels, dtype=np.int64),
        shape,
        files=tuple(files),
        decode=decode,
        classes=tuple(c.name for c in classes),
    )


class ImageDecoder:
    """Decode one image file to uint8 (C, H, W) with Pillow: a picklable callable, so that
    loader worker processes can decode in parallel."""

    def __init__(self, mode: str, size: tuple[int, int] | None) -> None:
        self.mode, self.size = mode, size

    def __call__(self, path: Path) -> np.ndarray:
        from PIL import Image

        with Image.open(path) as image:
            image = image.convert(self.mode)
            if self.size is not None and image.size != self.size:
                image = image.resize(self.size, Image.BILINEAR)
            pixels = np.asarray(image)
        if pixels.ndim == 2:
            return pixels[None]
        return np.ascontiguousarray(pixels.transpose(2, 0, 1))


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
        files = self._files(directory)
        return ", ".join(p.name for p in files.values()) if files else None

    def read(self, directory: Path) -> dict[str, Split]:
        files = self._files(directory)
        if not files:
            raise DatasetError(f"{directory} holds no train.csv, nor exactly one .csv file")
        column = str(self.options.get("label_column") or "label")
        tables = {split: _read_table(path, column) for split, path in files.items()}
        # Class names: the training split's label values, as numbers when they all are.
        train = tables.get("train", tables.get("all"))
        values = sorted(set(train[1]), key=_label_key)  # type: ignore[index]
        index = {v: i for i, v in enumerate(values)}
        for split, (_, labels) in tables.items():
            extra = sorted(set(labels) - set(index), key=_label_key)
            if extra:
                raise DatasetError(
                    f"train and {split} splits have different classes: {split} has "
                    f"{', '.join(extra[:5])} that train has not"
                )
        return {
            split: array_split(features, np.array([index[v] for v in labels]), values)
            for split, (features, labels) in tables.items()
        }


def _label_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def _read_table(path: Path, label_column: str) -> tuple[np.ndarray, list[str]]:
    """(features float32 (N, F), label strings) of a CSV with a header row."""
    with open(path, newline="", encoding="utf-8") as stream:
        rows = csv.reader(stream)
        header = next(rows, None)
        if not header:
            raise DatasetError(f"{path} is empty: expected a header row")
        header = [name.strip() for name in header]
        if label_column not in header:
            raise DatasetError(
                f"{path} has no label column {label_column!r} (set data.label_column); "
                f"its columns: {', '.join(header[:10])}"
            )
        target = header.index(label_column)
        features: list[list[float]] = []
        labels: list[str] = []
        for line, row in enumerate(rows, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise DatasetError(
                    f"{path} line {line} has {len(row)} fields, the header has {len(header)}"
                )
            labels.append(row[target].strip())
            try:
                features.append([float(v) for i, v in enumerate(row) if i != target])
            except ValueError:
                bad = next(i for i, v in enumerate(row) if i != target and not _number(v))
                raise DatasetError(
                    f"{path} line {line}, column {header[bad]!r}: {row[bad]!r} is not a number"
                ) from None
    if not labels:
        raise DatasetError(f"{path} has a header but no rows")
    return np.asarray(features, dtype=np.float32), labels


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def detect(directory: Path, chosen: str, options: dict[str, object]) -> tuple[Reader, str] | None:
    """The reader for ``directory`` and why: data.format's, or with auto the first that
    recognises it (mnist, imagefolder, csv, then yours, in the order registered)."""
    names: Sequence[str] = list(READERS) if chosen == "auto" else [chosen]
    for name in names:
        candidate = READERS[name](options)
        why = candidate.found(directory)
        if why:
            return candidate, why
    return None


def looked_for(chosen: str) -> str:
    """What the readers look for, for the line shown when none matches."""
    names = list(READERS) if chosen == "auto" else [chosen]
    return "; ".join(READERS[name].looks_for for name in names)


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
