"""Object storage (OBS) through moxing; every moxing error becomes one StorageError."""

from __future__ import annotations

import contextlib
import importlib
from types import ModuleType
from typing import Iterator

from src.scaffold.errors import StorageError


def is_url(location: object) -> bool:
    """Whether a location names object storage (obs://, s3://) and not a local path."""
    return isinstance(location, str) and "://" in location


def moxing() -> ModuleType | None:
    """The moxing module, or None where it is not installed (a laptop, a GPU job)."""
    try:
        return importlib.import_module("moxing")
    except ImportError:
        return None


def require_moxing(why: str) -> ModuleType:
    mox = moxing()
    if mox is None:
        raise StorageError(
            f"{why} needs moxing, the OpenI/ModelArts storage client, which is not installed "
            "here; give local paths instead"
        )
    return mox


@contextlib.contextmanager
def _moxing(what: str) -> Iterator[ModuleType]:
    """moxing, for ``what``; any error it raises becomes one StorageError saying ``what``."""
    mox = require_moxing(what)
    try:
        yield mox
    except Exception as err:  # moxing and the OBS client raise types of their own
        reason = " ".join(str(err).split()) or type(err).__name__
        raise StorageError(f"{what} failed: {reason}") from err


def copy(source: str, dest: str, tree: bool = True) -> None:
    """Copy a directory tree (or one file, tree=False) between OBS and the node."""
    with _moxing(f"copying {source} to {dest}") as mox:
        (mox.file.copy_parallel if tree else mox.file.copy)(source, dest)


def exists(url: str) -> bool:
    with _moxing(f"looking for {url}") as mox:
        return bool(mox.file.exists(url))


def remove(url: str) -> None:
    """Delete one object; an old checkpoint the retention policy dropped."""
    with _moxing(f"removing {url}") as mox:
        mox.file.remove(url, recursive=False)
