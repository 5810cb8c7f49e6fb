"""Copy the dataset from object storage (OBS) onto the node and the outputs back, once per node.

OpenI's NPU jobs and ModelArts pass obs:// URLs as --data_url and --train_url and
ship moxing to copy them. With moxing importable:

* a URL data_url is copied to <cache>/data by the first rank of each node; the
  other ranks wait for its completion marker, which is written only after a
  successful copy. A failed copy leaves a failure marker instead, so that the
  waiting ranks fail at once with the reason rather than at their timeout;
* a URL train_url makes the run write to <cache>/output, which sync_output()
  copies back to the URL (the caller does it on rank 0, after each epoch and
  at the end);
* c2net-style variables, when set, name the storage instead of the flags:
  DATASET_URL (a JSON list of {"dataset_name", "dataset_url"}, each copied to
  <local>/<dataset_name>), OUTPUT_URL, and LOCAL_DATASET_PATH and
  LOCAL_OUTPUT_PATH for the local copies. Archives are not unpacked.

Without moxing, or with local paths, the paths are used as they are.

The cache root is /cache unless TRAIN_CACHE_DIR says otherwise; a waiting rank
gives up after TRAIN_STAGE_TIMEOUT seconds (default 1800). The markers assume
a cache that starts empty with each job, as the platforms' containers do: on a
reused machine, clear the cache root or give each job its own.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from src.config import env_int
from src.errors import ConfigError, StorageError

CACHE_ENV = "TRAIN_CACHE_DIR"
DEFAULT_CACHE = Path("/cache")
TIMEOUT_ENV = "TRAIN_STAGE_TIMEOUT"
DEFAULT_TIMEOUT_S = 1800.0
POLL_S = 0.2


def is_url(location: object) -> bool:
    """Whether a data_url or train_url names object storage (obs://, s3://) and not a path."""
    return isinstance(location, str) and "://" in location


def _first_int(*names: str) -> int | None:
    for name in names:
        value = env_int(name)
        if value is not None:
            return value
    return None


@dataclass(frozen=True)
class Placement:
    """This process's place on its node, as far as copying is concerned."""

    local_rank: int = 0
    world_size: int = 1

    @property
    def copies(self) -> bool:
        """The first rank of each node copies; a job of one process always does."""
        return self.world_size == 1 or self.local_rank == 0

    @classmethod
    def from_env(cls, devices_per_node: int) -> Placement:
        """Read the launcher's variables: torchrun's, msrun's and Ascend rank tables'.

        The local rank is LOCAL_RANK (torchrun), else DEVICE_ID (msrun and the
        Ascend launch scripts number a node's devices from 0), else RANK_ID or
        RANK modulo devices_per_node.
        """
        world_size = _first_int("RANK_SIZE", "WORLD_SIZE", "MS_WORKER_NUM") or 1
        local_rank = _first_int("LOCAL_RANK", "DEVICE_ID")
        if local_rank is None:
            local_rank = (_first_int("RANK_ID", "RANK") or 0) % max(devices_per_node, 1)
        return cls(local_rank, world_size)


def _moxing() -> ModuleType | None:
    try:
        return importlib.import_module("moxing")
    except ImportError:
        return None


def _copy(mox: ModuleType, source: str, dest: str) -> None:
    """Copy a directory tree with moxing; its errors (any type) become one StorageError."""
    try:
        mox.file.copy_parallel(source, dest)
    except Exception as err:  # moxing and the OBS client raise types of their own
        reason = " ".join(str(err).split()) or type(err).__name__
        raise StorageError(f"copying {source} to {dest} failed: {reason}") from err


def _markers(dest: Path) -> tuple[Path, Path]:
    return dest.parent / f".{dest.name}.done", dest.parent / f".{dest.name}.failed"


def _write_marker(path: Path, what: str) -> None:
    # Write then rename: a waiting rank never reads half a marker.
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(json.dumps({"copy": what, "time": time.time()}) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_marker(path: Path) -> str:
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["copy"])
    except (OSError, ValueError, KeyError, TypeError):
        return "(no reason recorded)"


def copy_once(
    placement: Placement, dest: Path, what: str, copy: Callable[[], None], timeout_s: float
) -> None:
    """Run copy on the node's first rank; the other ranks wait for its marker next to dest.

    ``what`` describes the copy for the markers and the error messages.
    """
    done, failed = _markers(dest)
    if placement.copies:
        dest.parent.mkdir(parents=True, exist_ok=True)
        done.unlink(missing_ok=True)
        failed.unlink(missing_ok=True)
        try:
            copy()
        except StorageError as err:
            _write_marker(failed, str(err))
            raise
        _write_marker(done, what)
        return
    deadline = time.monotonic() + timeout_s
    while not done.is_file():
        if failed.is_file():
            raise StorageError(f"the node's first rank could not copy: {_read_marker(failed)}")
        if time.monotonic() > deadline:
            raise StorageError(
                f"waited {timeout_s:g} s for the node's first rank to copy {what} "
                f"(no {done.name} in {done.parent}); did local rank 0 start? "
                f"{TIMEOUT_ENV} sets the wait"
            )
        time.sleep(POLL_S)


@dataclass(frozen=True)
class Staged:
    """The local paths training reads and writes, and where the outputs go back to."""

    data_url: Path
    train_url: Path
    output_url: str | None = None

    def sync_output(self) -> None:
        """Copy the output directory back to output_url; nothing to do without one.

        Only the rank that writes the outputs (rank 0) should call it.
        """
        if self.output_url is None:
            return
        mox = _moxing()
        if mox is None:
            raise StorageError(f"copying outputs to {self.output_url} needs moxing")
        self.train_url.mkdir(parents=True, exist_ok=True)
        _copy(mox, str(self.train_url), self.output_url)


def _c2net_datasets() -> list[tuple[str, str]] | None:
    """(dataset_name, dataset_url) pairs from DATASET_URL; None when it is not set."""
    text = os.environ.get("DATASET_URL", "").strip()
    if not text:
        return None
    try:
        items = json.loads(text)
        pairs = [(str(item["dataset_name"]), str(item["dataset_url"])) for item in items]
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(
            'DATASET_URL must be a JSON list of {"dataset_name": ..., "dataset_url": ...}'
        ) from err
    return pairs or None


def stage(
    data_url: Path | str,
    train_url: Path | str,
    placement: Placement,
    cache_root: Path | None = None,
    timeout_s: float | None = None,
) -> Staged:
    """Bring the dataset onto this node if it is remote, and pick where outputs are written.

    cache_root and timeout_s default to $TRAIN_CACHE_DIR (else /cache) and
    $TRAIN_STAGE_TIMEOUT (else 1800 s).
    """
    mox = _moxing()
    if mox is None:
        for name, location in (("data_url", data_url), ("train_url", train_url)):
            if is_url(location):
                raise ConfigError(
                    f"{name} {location} is an object-storage URL, but moxing (the OpenI/ModelArts "
                    "storage client) is not installed here; give a local path"
                )
        return Staged(Path(data_url), Path(train_url))

    root = cache_root or Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)
    if timeout_s is None:
        timeout_s = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    local_data = Path(os.environ.get("LOCAL_DATASET_PATH") or root / "data")
    local_output = Path(os.environ.get("LOCAL_OUTPUT_PATH") or root / "output")

    datasets = _c2net_datasets()
    if datasets is not None:
        copies = [(url, local_data / name) for name, url in datasets]
        # One dataset: read it directly; several: --dataset_name picks one.
        data = copies[0][1] if len(copies) == 1 else local_data
    elif is_url(data_url):
        copies = [(str(data_url), local_data)]
        data = local_data
    else:
        copies, data = [], Path(data_url)
    if copies:
        what = ", ".join(f"{url} to {dest}" for url, dest in copies)

        def copy_all() -> None:
            for url, dest in copies:
                _copy(mox, url, str(dest))

        copy_once(placement, local_data, what, copy_all, timeout_s)

    output_url = os.environ.get("OUTPUT_URL") or (str(train_url) if is_url(train_url) else None)
    if output_url is None:
        return Staged(data, Path(train_url))
    return Staged(data, local_output, output_url)
