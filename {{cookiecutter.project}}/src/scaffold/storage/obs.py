"""Object storage (OBS) through moxing, the client OpenI's NPU jobs and ModelArts ship.

Every moxing error, of whatever type, becomes one StorageError naming both ends.
"""

from __future__ import annotations

import importlib
from types import ModuleType

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


def _reason(err: Exception) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def copy(source: str, dest: str, tree: bool = True) -> None:
    """Copy a directory tree (or one file, tree=False) between OBS and the node."""
    mox = require_moxing(f"copying {source} to {dest}")
    try:
        if tree:
            mox.file.copy_parallel(source, dest)
        else:
            mox.file.copy(source, dest)
    except Exception as err:  # moxing and the OBS client raise types of their own
        raise StorageError(f"copying {source} to {dest} failed: {_reason(err)}") from err


def exists(url: str) -> bool:
    mox = require_moxing(f"looking for {url}")
    try:
        return bool(mox.file.exists(url))
    except Exception as err:  # as above
        raise StorageError(f"looking for {url} failed: {_reason(err)}") from err


def remove(url: str) -> None:
    """Delete one object; an old checkpoint the retention policy dropped."""
    mox = require_moxing(f"removing {url}")
    try:
        mox.file.remove(url, recursive=False)
    except Exception as err:  # as above
        raise StorageError(f"removing {url} failed: {_reason(err)}") from err
