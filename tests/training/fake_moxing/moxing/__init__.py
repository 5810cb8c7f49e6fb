"""A stand-in for moxing, the OBS client of OpenI and ModelArts: obs:// URLs are local paths.

obs://bucket/key is $FAKE_OBS_ROOT/bucket/key. Like the real one it offers
``mox.file.copy_parallel`` (a directory tree), ``copy`` (one file), ``exists``
and ``remove``. As in OBS, an object written is whole or absent: a process killed in the middle
of an upload leaves the object as it was (a local file it was downloading is left part-written,
as by the real client). Test knobs, all optional:
    FAKE_MOXING_LOG     append one line per copy ("src -> dst") to this file
    FAKE_MOXING_DELAY   seconds to sleep before copying (a slow download)
    FAKE_MOXING_FAIL    fail every copy whose source or destination contains this text
    FAKE_MOXING_FAILS   with FAKE_MOXING_FAIL: fail only this many times (a flaky store),
                        counted in the file FAKE_MOXING_LOG names, plus ".fails"
    FAKE_MOXING_PAUSE   before a copy to a destination containing this text, stop this
                        process (SIGSTOP): a test signals the run at a known point, then
                        sends SIGCONT. Once, at the first such copy or the
    FAKE_MOXING_PAUSE_AT    n-th (counted in FAKE_MOXING_LOG + ".paused")
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from types import SimpleNamespace

SCHEME = "obs://"


class ObsError(Exception):
    """What the fake raises for a failed call: like moxing, a type of its own."""


def _local(url: str) -> Path:
    if url.startswith(SCHEME):
        return Path(os.environ["FAKE_OBS_ROOT"]) / url[len(SCHEME) :]
    return Path(url)


def _should_fail(src_url: str, dst_url: str) -> bool:
    fail = os.environ.get("FAKE_MOXING_FAIL")
    if not fail or (fail not in src_url and fail not in dst_url):
        return False
    limit = os.environ.get("FAKE_MOXING_FAILS")
    if limit is None:
        return True
    counter = Path(os.environ["FAKE_MOXING_LOG"] + ".fails")
    count = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(count + 1))
    return count < int(limit)


def _pause(dst_url: str) -> None:
    text = os.environ.get("FAKE_MOXING_PAUSE")
    if not text or text not in dst_url:
        return
    counter = Path(os.environ["FAKE_MOXING_LOG"] + ".paused")
    count = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(count))
    if count == int(os.environ.get("FAKE_MOXING_PAUSE_AT", "1")):
        os.kill(os.getpid(), signal.SIGSTOP)


def _begin(src_url: str, dst_url: str) -> None:
    _pause(dst_url)
    log = os.environ.get("FAKE_MOXING_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as stream:
            stream.write(f"{src_url} -> {dst_url}\n")
    time.sleep(float(os.environ.get("FAKE_MOXING_DELAY", "0")))
    if _should_fail(src_url, dst_url):
        raise ObsError(f"NoSuchKey: {src_url} (403 Forbidden)")


def _put(source: str, dest: str) -> str:
    """An object uploaded whole: written outside every bucket, then in place at once."""
    uploads = Path(os.environ["FAKE_OBS_ROOT"]) / ".uploads"
    uploads.mkdir(exist_ok=True)
    aside = uploads / f"{os.getpid()}-{Path(dest).name}"
    shutil.copyfile(source, aside)
    os.replace(aside, dest)
    return dest


def copy_parallel(src_url: str, dst_url: str) -> None:
    """Copy the tree at src_url into dst_url, creating it; files already there are replaced."""
    _begin(src_url, dst_url)
    source = _local(src_url)
    if not source.is_dir():
        raise ObsError(f"NoSuchKey: {src_url}")
    each = _put if dst_url.startswith(SCHEME) else shutil.copy2
    shutil.copytree(source, _local(dst_url), dirs_exist_ok=True, copy_function=each)


def copy(src_url: str, dst_url: str) -> None:
    """Copy one file."""
    _begin(src_url, dst_url)
    source = _local(src_url)
    if not source.is_file():
        raise ObsError(f"NoSuchKey: {src_url}")
    _local(dst_url).parent.mkdir(parents=True, exist_ok=True)
    each = _put if dst_url.startswith(SCHEME) else shutil.copyfile
    each(str(source), str(_local(dst_url)))


def exists(url: str) -> bool:
    return _local(url).exists()


def remove(url: str, recursive: bool = False) -> None:
    path = _local(url)
    if recursive and path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


file = SimpleNamespace(copy_parallel=copy_parallel, copy=copy, exists=exists, remove=remove)
