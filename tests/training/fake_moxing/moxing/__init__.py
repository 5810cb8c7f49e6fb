"""A stand-in for moxing, the OBS client of OpenI and ModelArts: obs:// URLs are local directories.

obs://bucket/key is $FAKE_OBS_ROOT/bucket/key. Like the real one it is used as
``mox.file.copy_parallel(src_url, dst_url)``, which copies a directory tree.
Test knobs, all optional:
    FAKE_MOXING_LOG     append one line per copy ("src -> dst") to this file
    FAKE_MOXING_DELAY   seconds to sleep before copying (a slow download)
    FAKE_MOXING_FAIL    fail every copy whose source contains this text
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

SCHEME = "obs://"


class ObsError(Exception):
    """What the fake raises for a failed copy: like moxing, a type of its own."""


def _local(url: str) -> Path:
    if url.startswith(SCHEME):
        return Path(os.environ["FAKE_OBS_ROOT"]) / url[len(SCHEME) :]
    return Path(url)


def copy_parallel(src_url: str, dst_url: str) -> None:
    """Copy the tree at src_url into dst_url, creating it; files already there are replaced."""
    log = os.environ.get("FAKE_MOXING_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as stream:
            stream.write(f"{src_url} -> {dst_url}\n")
    time.sleep(float(os.environ.get("FAKE_MOXING_DELAY", "0")))
    fail = os.environ.get("FAKE_MOXING_FAIL")
    if fail and fail in src_url:
        raise ObsError(f"NoSuchKey: {src_url} (403 Forbidden)")
    source = _local(src_url)
    if not source.is_dir():
        raise ObsError(f"NoSuchKey: {src_url}")
    shutil.copytree(source, _local(dst_url), dirs_exist_ok=True)


file = SimpleNamespace(copy_parallel=copy_parallel)
