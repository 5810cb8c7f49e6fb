"""Find the dataset wherever a platform or a user put it: one dataset among several, and
archives, which are unpacked next to themselves once per node; then read it with the
reader of its format (a built-in one, or yours from the Task) into train, validation and
test splits.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from src.scaffold.config import Config
from src.scaffold.data.formats import SPLITS
from src.scaffold.data.readers import Readers, detect, looked_for
from src.scaffold.data.splits import DataInfo, Split, Splits, hold_out, statistics, synthetic
from src.scaffold.errors import DatasetError
from src.scaffold.storage.archives import archive_stem, unpack

log = logging.getLogger(__name__)
# Statistics for normalisation come from up to this many training samples.
STATS_SAMPLES = 4096
# Data decoded to at most this size is held in memory (data.in_memory: auto).
IN_MEMORY_BYTES = 2 << 30


def _entries(root: Path) -> dict[str, Path]:
    """The datasets a directory offers, by name: folders, and archives not unpacked yet."""
    found: dict[str, Path] = {}
    for path in sorted(root.iterdir()):
        if path.name.startswith("."):
            continue
        stem = archive_stem(path) if path.is_file() else None
        if path.is_dir():
            found[path.name] = path
        elif stem is not None:
            found.setdefault(stem, path)
    return found


def select(root: Path, name: str | None, fmt: str, readers: Readers) -> Path:
    """The dataset directory under root: --dataset_name, root itself when it holds data of
    the format, else the only dataset there; archives are unpacked on the way."""
    if not root.is_dir():
        raise DatasetError(f"dataset directory {root} does not exist")
    entries = _entries(root)
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
        raise DatasetError(
            f"dataset directory {root} is empty; looked for {looked_for(readers, fmt)}"
        )
    elif set(entries) <= set(SPLITS):
        # train/ and test/ are one dataset's splits, not several datasets.
        raise DatasetError(
            f"no data in {root} ({', '.join(entries)}): looked for {looked_for(readers, fmt)}"
        )
    else:
        raise DatasetError(
            f"{root} holds several datasets ({', '.join(entries)}) and none of them is "
            f"{looked_for(readers, fmt)}: choose one with --dataset_name"
        )
    return unpack(chosen) if chosen.is_file() else chosen


def _read(directory: Path, cfg: Config, readers: Readers) -> tuple[str, dict[str, Split]]:
    """The format and the splits of a dataset directory, by the reader of its format."""
    found = detect(readers, directory, cfg.data_format, cfg.data_options())
    if found is None:
        wanted = looked_for(readers, cfg.data_format)
        raise DatasetError(f"no data in {directory}: looked for {wanted}")
    reader, why = found
    log.info("data: %s format in %s: %s", reader.name, directory, why)
    return reader.name, reader.read(directory)


def _part(root: Path, cfg: Config, readers: Readers, split: str) -> tuple[str, Split]:
    """--traindata/--testdata: the split of that name in the directory, else all of it."""
    fmt, found = _read(select(root, None, cfg.data_format, readers), cfg, readers)
    if split not in found and "all" not in found:
        raise DatasetError(f"{root} holds no {split} split (it has {', '.join(found)})")
    return fmt, found.get(split, found.get("all"))  # type: ignore[return-value]


def _same_classes(splits: dict[str, Split]) -> None:
    train = splits["train"]
    for name, split in splits.items():
        if split.classes and train.classes and split.classes != train.classes:
            lacks = sorted(set(train.classes) - set(split.classes))
            extra = sorted(set(split.classes) - set(train.classes))
            detail = "; ".join(
                part
                for part in (
                    f"{name} lacks {', '.join(lacks[:5])}" if lacks else "",
                    f"{name} has {', '.join(extra[:5])} that train has not" if extra else "",
                )
                if part
            )
            raise DatasetError(f"train and {name} splits have different classes: {detail}")
        if split.shape != train.shape:
            raise DatasetError(
                f"train and {name} samples differ in shape: {train.shape} and {split.shape}"
            )


def load(cfg: Config, readers: Readers) -> tuple[str, dict[str, Split]]:
    """The format, and the splits train, test and maybe val; --traindata/--testdata
    (train_dir, test_dir) win. Data that comes unsplit is split by test_fraction, seeded."""
    if cfg.train_dir and cfg.test_dir:
        fmt, train = _part(cfg.train_dir, cfg, readers, "train")
        found = {"train": train, "test": _part(cfg.test_dir, cfg, readers, "test")[1]}
    else:
        root = select(Path(cfg.data_url), cfg.dataset_name, cfg.data_format, readers)
        fmt, found = _read(root, cfg, readers)
        for given, split in ((cfg.train_dir, "train"), (cfg.test_dir, "test")):
            if given:
                found[split] = _part(given, cfg, readers, split)[1]
    if "all" in found:
        found.setdefault("train", found.pop("all"))
    if "test" not in found:
        found["train"], found["test"] = hold_out(
            found["train"], cfg.data_test_fraction, cfg.seed, "test"
        )
    _same_classes(found)
    return fmt, found


def num_classes(found: dict[str, Split], configured: int | None) -> int:
    """The classes the model predicts: the data's (named classes, else the largest label
    + 1), or num_classes from the config when it is set (it may only be larger)."""
    train = found["train"]
    if train.numeric:
        return configured or 1  # the model predicts one value (or as many as asked)
    names = train.classes
    present = np.unique(train.labels)
    if len(present) < 2:
        only = names[int(present[0])] if names and len(present) else "one label"
        raise DatasetError(
            f"the training data holds one class ({only}): a classifier needs two or more "
            "(a number to predict instead: data: labels: values)"
        )
    labels = max(int(split.labels.max()) for split in found.values() if len(split))
    counted = max(len(names), labels + 1)
    if configured is None:
        return counted
    if configured < labels + 1:
        raise DatasetError(
            f"the data holds label {labels}, but num_classes is {configured}: raise it or "
            "leave it unset (null) to take the data's"
        )
    return configured


def _in_memory(cfg: Config, found: dict[str, Split]) -> tuple[bool, str]:
    """Whether to hold the data in memory, and why (data.in_memory auto: if it fits)."""
    if cfg.data_in_memory != "auto":
        return cfg.data_in_memory == "true", f"data.in_memory {cfg.data_in_memory}"
    if cfg.data_random_crop or cfg.data_random_flip:
        return False, "augmentation is on"
    size = sum(split.nbytes for split in found.values())
    if size > IN_MEMORY_BYTES:
        return False, f"{size / 2**20:.0f} MB decoded exceeds {IN_MEMORY_BYTES >> 20} MB"
    return True, f"{size / 2**20:.1f} MB decoded"


def _smoke(
    cfg: Config, readers: Readers, world_size: int, declared: tuple[int, ...], steps: int
) -> Splits:
    """Random data of the configured data's shape, or of the model's declared input shape
    when there is no data here: every part of a run, in seconds."""
    try:
        found = load(cfg, readers)[1]
        shape, classes = found["train"].shape, num_classes(found, cfg.num_classes)
        source = "the data's shape"
    except DatasetError:
        shape, classes = declared, cfg.num_classes or 10
        source = "the model's declared input shape (no data found)"
    log.info("smoke run: random samples of %s, %s", "x".join(map(str, shape)), source)
    count = steps * cfg.batch_size * world_size
    splits = [
        synthetic(n, shape, classes, cfg.seed + i)
        for i, n in enumerate((count, cfg.batch_size, cfg.batch_size))
    ]
    mean, std = statistics(splits[0], STATS_SAMPLES, cfg.seed)
    info = DataInfo("synthetic", shape, classes, (), mean, std, True)
    return Splits(*splits, info)


def splits(
    cfg: Config,
    readers: Readers,
    world_size: int,
    declared: tuple[int, ...] = (1, 28, 28),
    smoke_steps: int = 2,
) -> Splits:
    """Train, validation and test splits for cfg, with what is known of them; random ones
    for --smoke. ``declared`` is the model's input shape, for a smoke run without data."""
    if cfg.smoke:
        return _smoke(cfg, readers, world_size, declared, smoke_steps)
    fmt, found = load(cfg, readers)
    classes = num_classes(found, cfg.num_classes)
    train = found["train"]
    if "val" in found:
        val = found["val"]
    else:
        train, val = hold_out(train, cfg.val_fraction, cfg.seed)
    memory, why = _in_memory(cfg, found)
    if memory:
        train, val = train.materialised(), val.materialised()
    test = found["test"].materialised() if memory else found["test"]
    mean, std = cfg.data_mean, cfg.data_std
    if not (mean and std):
        computed = statistics(train, STATS_SAMPLES, cfg.seed)
        mean, std = mean or computed[0], std or computed[1]
    # Per channel for images (C, H, W), per feature for rows (F,): the first axis either way.
    channels = train.shape[0]
    for name, values in (("data.mean", mean), ("data.std", std)):
        if len(values) not in (1, channels):
            raise DatasetError(f"{name} has {len(values)} values; the data has {channels}")
    info = DataInfo(
        fmt,
        train.shape,
        classes,
        train.classes,
        mean,
        std,
        memory,
        features=train.features,
        label_column=cfg.data_label_column if train.features else None,
        resize=cfg.data_resize if len(train.shape) == 3 else None,
        numeric=train.numeric,
    )
    log.info(
        "data: %d samples of %s, %d classes; %s (%s)",
        len(train) + len(val) + len(test),
        "x".join(map(str, train.shape)),
        classes,
        "held in memory" if memory else "streamed from disk",
        why,
    )
    return Splits(train, val, test, info)
