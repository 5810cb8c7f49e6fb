"""Find the dataset wherever a platform or user put it; read it into train, val, test splits."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from src.scaffold.config import DataOptions, Source
from src.scaffold.data.formats import SPLITS
from src.scaffold.data.readers import Readers, detect, looked_for
from src.scaffold.data.splits import DataInfo, Split, Splits, hold_out, statistics, synthetic
from src.scaffold.data.tokens import ByteTokenizer, Tokenizer, tokenizer_from
from src.scaffold.errors import ConfigError, DatasetError
from src.scaffold.storage.archives import archive_stem, unpack

log = logging.getLogger(__name__)
STATS_SAMPLES = 4096  # normalisation statistics come from up to this many training samples
IN_MEMORY_BYTES = 2 << 30  # data.in_memory auto: held in memory up to this size decoded


def _entries(root: Path) -> dict[str, Path]:
    """The datasets a directory offers, by name: folders, and archives not unpacked yet."""
    found: dict[str, Path] = {}
    for path in sorted(p for p in root.iterdir() if not p.name.startswith(".")):
        stem = archive_stem(path) if path.is_file() else None
        if path.is_dir():
            found[path.name] = path
        elif stem is not None:
            found.setdefault(stem, path)
    return found


def select(root: Path, name: str | None, fmt: str, readers: Readers) -> Path:
    """The dataset under root: --dataset_name, root itself, else the only one (unpacked)."""
    if not root.is_dir():
        raise DatasetError(f"dataset directory {root} does not exist")
    entries, wanted = _entries(root), looked_for(readers, fmt)
    if name is not None:
        if name not in entries:
            there = ", ".join(entries) or "nothing"
            raise DatasetError(f"--dataset_name {name}: no {name} in {root}; it holds {there}")
        chosen = entries[name]
    elif detect(readers, root, fmt, {}) is not None:
        return root
    elif len(entries) == 1:
        chosen = next(iter(entries.values()))
    elif not entries:
        raise DatasetError(f"dataset directory {root} is empty; looked for {wanted}")
    elif set(entries) <= set(SPLITS):  # train/ and test/: one dataset's splits
        raise DatasetError(f"no data in {root} ({', '.join(entries)}): looked for {wanted}")
    else:
        raise DatasetError(
            f"{root} holds several datasets ({', '.join(entries)}) and none of them is "
            f"{wanted}: choose one with --dataset_name"
        )
    return unpack(chosen) if chosen.is_file() else chosen


def _read(
    directory: Path, data: DataOptions, readers: Readers, val_fraction: float
) -> tuple[str, dict[str, Split]]:
    options = {**data.reader_options(), "val_fraction": val_fraction}
    found = detect(readers, directory, data.format, options)
    if found is None:
        raise DatasetError(f"no data in {directory}: looked for {looked_for(readers, data.format)}")
    reader, why = found
    log.info("data: %s format in %s: %s", reader.name, directory, why)
    return reader.name, reader.read(directory)


def _part(
    root: Path, data: DataOptions, readers: Readers, split: str, val_fraction: float
) -> tuple[str, Split]:
    """--traindata/--testdata: the split of that name in the directory, else all of it."""
    fmt, found = _read(select(root, None, data.format, readers), data, readers, val_fraction)
    if split not in found and "all" not in found:
        raise DatasetError(f"{root} holds no {split} split (it has {', '.join(found)})")
    return fmt, found.get(split, found.get("all"))  # type: ignore[return-value]


def _same_classes(splits: dict[str, Split]) -> None:
    train = splits["train"]
    for name, split in splits.items():
        if split.classes and train.classes and split.classes != train.classes:
            lacks = sorted(set(train.classes) - set(split.classes))
            extra = sorted(set(split.classes) - set(train.classes))
            parts = [f"{name} lacks {', '.join(lacks[:5])}"] if lacks else []
            parts += [f"{name} has {', '.join(extra[:5])} that train has not"] if extra else []
            why = "; ".join(parts)
            raise DatasetError(f"train and {name} splits have different classes: {why}")
        if split.shape != train.shape:
            raise DatasetError(
                f"train and {name} samples differ in shape: {train.shape} and {split.shape}"
            )


def load(data: DataOptions, source: Source, readers: Readers) -> tuple[str, dict[str, Split]]:
    """The format, and splits train, test (held out if missing), maybe val; --traindata wins."""
    if source.train_dir and source.test_dir:
        fmt, train = _part(source.train_dir, data, readers, "train", source.val_fraction)
        test = _part(source.test_dir, data, readers, "test", source.val_fraction)[1]
        found = {"train": train, "test": test}
    else:
        root = select(source.root, source.dataset_name, data.format, readers)
        fmt, found = _read(root, data, readers, source.val_fraction)
        for given, split in ((source.train_dir, "train"), (source.test_dir, "test")):
            if given:
                found[split] = _part(given, data, readers, split, source.val_fraction)[1]
    if "all" in found:
        found.setdefault("train", found.pop("all"))
    if "test" not in found:
        found["train"], found["test"] = hold_out(
            found["train"], data.test_fraction, source.seed, "test"
        )
    _same_classes(found)
    return fmt, found


def num_classes(found: dict[str, Split], configured: int | None) -> int:
    """The data's classes (names, else largest label + 1), or config's num_classes (not fewer)."""
    train = found["train"]
    if train.numeric:
        return configured or 1  # the model predicts one value (or as many as asked)
    size = getattr(train.tokenizer, "size", 0)
    if size and (configured or size) >= size:  # ids of text: all it may encode (no data read)
        return configured or size
    names = train.classes
    present = np.unique(train.labels)
    if len(present) < 2:
        only = names[int(present[0])] if names and len(present) else "one label"
        raise DatasetError(
            f"the training data holds one class ({only}): a classifier needs two or more "
            "(a number to predict instead: data: labels: values)"
        )
    labels = max(int(split.labels.max()) for split in found.values() if len(split))
    if configured is None:  # a tokenizer's ids: all it may encode, not only those seen
        return max(len(names), labels + 1, getattr(train.tokenizer, "size", 0))
    if configured < labels + 1:
        raise DatasetError(
            f"the data holds label {labels}, but num_classes is {configured}: raise it or "
            "leave it unset (null) to take the data's"
        )
    return configured


def _in_memory(data: DataOptions, found: dict[str, Split]) -> tuple[bool, str]:
    """Whether to hold the data in memory, and why (data.in_memory auto: if it fits)."""
    if data.in_memory != "auto":
        return data.in_memory == "true", f"data.in_memory {data.in_memory}"
    if (data.random_crop or data.random_flip) and len(found["train"].shape) == 3:
        return False, "augmentation is on"
    size = sum(split.nbytes for split in found.values())
    if size > IN_MEMORY_BYTES:
        return False, f"{size / 2**20:.0f} MB decoded exceeds {IN_MEMORY_BYTES >> 20} MB"
    return True, f"{size / 2**20:.1f} MB decoded"


def _normalisation(train: Split, data: DataOptions, seed: int) -> tuple[tuple, tuple]:
    """Mean and std per channel or feature: data.mean and data.std, else the training split's;
    none for integer ids (tokens), which are not normalised."""
    mean, std = data.mean, data.std
    if train.ids:
        if mean or std:
            raise DatasetError(
                "data.mean and data.std normalise images and table rows; these inputs are "
                "integer ids (tokens), which are not normalised: set both to null"
            )
        log.info("data: integer ids (tokens), not normalised")
        return (), ()
    if not (mean and std):
        computed = statistics(train, STATS_SAMPLES, seed)
        mean, std = mean or computed[0], std or computed[1]
    channels = train.shape[0]  # per channel (C, H, W) or per feature (F,): the first axis
    for name, values in (("data.mean", mean), ("data.std", std)):
        if len(values) not in (1, channels):
            raise DatasetError(f"{name} has {len(values)} values; the data has {channels}")
    return tuple(mean), tuple(std)


def _smoke(
    data: DataOptions,
    source: Source,
    readers: Readers,
    declared: tuple[int, ...],
    smoke: tuple[int, int],
    ids: bool,
) -> Splits:
    """Random splits (``smoke``: train's samples, the others') like the data where there is
    some (its shape, ids, labels and tokenizer), else of the model's ``declared`` input."""
    like: Split | None = None
    tokenizer: Tokenizer | None = None
    try:
        found = load(data, source, readers)[1]
        like, classes = found["train"], num_classes(found, source.num_classes)
        shape, said, tokenizer = like.shape, "the data's shape", like.tokenizer
    except DatasetError:
        shape, classes = declared, source.num_classes or 10
        said = "the model's declared input shape (no data found)"
        if ids:  # a model of text (an image holds no data): ids of its tokenizer
            tokenizer = _smoke_tokenizer(data)
            classes = tokenizer.size
    log.info("smoke run: random samples of %s, %s", "x".join(map(str, shape)), said)
    sizes = (smoke[0], smoke[1], smoke[1])
    made = [synthetic(n, shape, classes, source.seed + i, like, ids) for i, n in enumerate(sizes)]
    ids, labels = made[0].ids, made[0].labels.shape[1:]
    mean, std = ((), ()) if ids else statistics(made[0], STATS_SAMPLES, source.seed)
    described = tokenizer.describe() if tokenizer is not None else None
    info = DataInfo("synthetic", shape, classes, (), mean, std, True, ids=ids, label_shape=labels)
    return Splits(*made, replace(info, tokenizer=described))


def _smoke_tokenizer(data: DataOptions) -> Tokenizer:
    """data.tokenizer for a smoke run without data; UTF-8 bytes where its file is not here (an
    image holds neither data nor tokenizer files): a smoke run tests plumbing only."""
    try:
        return tokenizer_from(data.tokenizer, Path.cwd())
    except ConfigError as err:
        log.warning("smoke run: %s; UTF-8 bytes stand in", err)
        return ByteTokenizer()


def splits(
    data: DataOptions,
    source: Source,
    readers: Readers,
    declared: tuple[int, ...] = (1, 28, 28),
    smoke: tuple[int, int] | None = None,
    ids: bool = False,
) -> Splits:
    """Train, val and test splits of ``source`` and what is known of them; for --smoke random
    ones (``smoke``: train's samples, the others') of the data's shape, else ``declared``."""
    if smoke is not None:
        return _smoke(data, source, readers, declared, smoke, ids)
    fmt, found = load(data, source, readers)
    classes = num_classes(found, source.num_classes)
    train, val, test = found["train"], found.get("val"), found["test"]
    if val is None:
        train, val = hold_out(train, source.val_fraction, source.seed)
    if (data.random_crop or data.random_flip) and len(train.shape) != 3:
        log.warning("data.random_crop and random_flip augment images: ignored for these samples")
    memory, why = _in_memory(data, found)
    if memory:
        train, val, test = train.materialised(), val.materialised(), test.materialised()
    mean, std = _normalisation(train, data, source.seed)
    inputs = dict(  # how predict.py reads inputs as the run did
        features=train.features,
        label_column=data.label_column if train.features else None,
        resize=data.resize if len(train.shape) == 3 else None,
        numeric=train.numeric,
        ids=train.ids,
        label_shape=tuple(train.labels.shape[1:]),
        tokenizer=train.tokenizer.describe() if train.tokenizer is not None else None,
    )
    info = DataInfo(fmt, train.shape, classes, train.classes, mean, std, memory, **inputs)
    count, shape = len(train) + len(val) + len(test), "x".join(map(str, train.shape))
    held = "held in memory" if memory else "streamed from disk"
    log.info("data: %d samples of %s, %d classes; %s (%s)", count, shape, classes, held, why)
    return Splits(train, val, test, info)
