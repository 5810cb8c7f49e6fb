"""Datasets as archives (.zip, .tar.gz): unpacked next to themselves once per node, safely."""

from __future__ import annotations

import os
import shutil
import tarfile
import zipfile
from pathlib import Path

from src.scaffold.errors import StorageError
from src.scaffold.storage.once import Once

ARCHIVES = (".tar.gz", ".tgz", ".zip")
UNPACK_TIMEOUT_S = 1800.0


def archive_stem(path: Path) -> str | None:
    """The dataset name of an archive (MnistDataset.zip -> MnistDataset), None otherwise."""
    for suffix in ARCHIVES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)]
    return None


def _check_members(handle: tarfile.TarFile) -> None:
    """Refuse what the 'data' filter refuses, where missing: names or links out of the tree."""
    for member in handle.getmembers():
        for name in (member.name, member.linkname if member.issym() or member.islnk() else ""):
            if name and (Path(name).is_absolute() or ".." in Path(name).parts):
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
                if hasattr(tarfile, "data_filter"):  # refuses links out and absolute names
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
