"""Find MNIST wherever a platform or a user put it: every layout, one dataset among several,
and archives, which are unpacked next to themselves once per node.

A dataset directory holds the four idx files (each .gz or not) flat, under
train/ and test/, or under MNIST/raw/ of either (torchvision's download, OpenI's
PyTorch sample), possibly inside one more folder (an archive's top directory).
"""

from __future__ import annotations

import os
import shutil
import tarfile
import zipfile
from pathlib import Path

from src.config import Config
from src.errors import DatasetError, StorageError
from src.mnist import FILES, Split, Splits, hold_out, read_split, synthetic
from src.once import Once

ARCHIVES = (".tar.gz", ".tgz", ".zip")
EXPECTED = ", ".join(name for pair in FILES.values() for name in pair) + " (each may end in .gz)"
# Where the files may sit inside a dataset directory, shallowest first.
LAYOUTS = ("", "train", "test", "MNIST/raw", "train/MNIST/raw", "test/MNIST/raw")
MAX_DEPTH = 5
UNPACK_TIMEOUT_S = 1800.0


def archive_stem(path: Path) -> str | None:
    """The dataset name of an archive (MnistDataset.zip -> MnistDataset), None otherwise."""
    for suffix in ARCHIVES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)]
    return None


def _check_members(handle: tarfile.TarFile) -> None:
    """Refuse what the 'data' filter refuses, on Pythons that lack it: absolute names,
    names that climb out with '..', and links that point out of the tree."""
    for member in handle.getmembers():
        for name in (member.name, member.linkname if member.issym() or member.islnk() else ""):
            parts = Path(name).parts
            if name and (Path(name).is_absolute() or ".." in parts):
                raise tarfile.TarError(f"{member.name!r} would land outside the dataset")
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise tarfile.TarError(f"{member.name!r} is a device or pipe, not data")


def _extract(archive: Path, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.unpacking")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as handle:
                handle.extractall(tmp)  # zipfile drops absolute paths and '..' itself
        else:
            with tarfile.open(archive) as handle:
                if hasattr(tarfile, "data_filter"):
                    # The 'data' filter refuses links out of the tree and absolute names.
                    handle.extractall(tmp, filter="data")
                else:
                    _check_members(handle)
                    handle.extractall(tmp)
        os.replace(tmp, dest)
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StorageError(f"cannot unpack {archive} into {dest}: {err}") from err


def unpack(archive: Path, timeout_s: float = UNPACK_TIMEOUT_S) -> Path:
    """Unpack ``archive`` into a directory named after it, beside it; once per node."""
    stem = archive_stem(archive)
    assert stem is not None, archive
    dest = archive.parent / stem
    stat = archive.stat()
    once = Once(archive.parent, f"unpack-{stem}", f"{archive.name}:{stat.st_size}:{stat.st_mtime}")
    if dest.is_dir() and (once.is_done() or not any(archive.parent.glob(f".unpack-{stem}.*"))):
        return dest  # unpacked earlier (by us, or by the platform)
    once.run(lambda: _extract(archive, dest), f"unpack {archive}", timeout_s)
    return dest


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


def _laid_out(directory: Path, split: str) -> bool:
    name = FILES[split][0]
    return any(
        (directory / layout / f).is_file() for layout in LAYOUTS for f in (name, f"{name}.gz")
    )


def select(root: Path, name: str | None, split: str = "train") -> Path:
    """The dataset directory under root: --dataset_name, root itself when it holds the
    files (of ``split``), else the only dataset there; archives are unpacked on the way."""
    if not root.is_dir():
        raise DatasetError(f"dataset directory {root} does not exist; expected {EXPECTED} in it")
    entries = _entries(root)
    if name is not None:
        if name not in entries:
            there = ", ".join(entries) or "nothing"
            raise DatasetError(f"--dataset_name {name}: no {name} in {root}; it holds {there}")
        chosen = entries[name]
    elif _laid_out(root, split):
        return root
    elif len(entries) == 1:
        chosen = next(iter(entries.values()))
    elif not entries:
        raise DatasetError(f"dataset directory {root} is empty; expected {EXPECTED} in it")
    else:
        raise DatasetError(
            f"{root} holds several datasets ({', '.join(entries)}): choose one with --dataset_name"
        )
    return unpack(chosen) if chosen.is_file() else chosen


def find_file(directory: Path, name: str) -> Path:
    """``name`` or ``name.gz`` in a known layout of directory, else the shallowest copy."""
    for layout in LAYOUTS:
        for candidate in (directory / layout / name, directory / layout / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    level = [directory]
    for _ in range(MAX_DEPTH):
        found = sorted(p for d in level for p in (d / name, d / f"{name}.gz") if p.is_file())
        if found:
            return found[0]
        level = sorted(p for d in level for p in d.iterdir() if p.is_dir())
    raise DatasetError(
        f"{name}[.gz] not found in {directory} (searched {MAX_DEPTH} levels); expected {EXPECTED}"
    )


def _split(directory: Path, split: str, num_classes: int) -> Split:
    images, labels = FILES[split]
    return read_split(find_file(directory, images), find_file(directory, labels), num_classes)


def load(
    data_dir: Path,
    dataset_name: str | None,
    train_dir: Path | None,
    test_dir: Path | None,
    num_classes: int,
) -> tuple[Split, Split]:
    """The train and test splits; --traindata/--testdata (train_dir, test_dir) win."""
    dataset = None if train_dir and test_dir else select(data_dir, dataset_name)
    train = _split(select(train_dir, None, "train") if train_dir else dataset, "train", num_classes)
    test = _split(select(test_dir, None, "test") if test_dir else dataset, "test", num_classes)
    return train, test


def splits(cfg: Config, world_size: int, smoke_steps: int = 2) -> Splits:
    """Train, validation and test splits for cfg; random ones for --smoke."""
    if cfg.smoke:
        # A few steps of random data: exercises every part of a run in seconds.
        count = smoke_steps * cfg.batch_size * world_size
        return Splits(
            synthetic(count, cfg.num_classes, cfg.seed),
            synthetic(cfg.batch_size, cfg.num_classes, cfg.seed + 1),
            synthetic(cfg.batch_size, cfg.num_classes, cfg.seed + 2),
        )
    train, test = load(
        Path(cfg.data_url), cfg.dataset_name, cfg.train_dir, cfg.test_dir, cfg.num_classes
    )
    train, val = hold_out(train, cfg.val_fraction, cfg.seed)
    return Splits(train, val, test)
