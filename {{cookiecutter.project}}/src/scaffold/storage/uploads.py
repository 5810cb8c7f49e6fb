"""Outputs uploaded by rank 0, each file once per change: per epoch (may fail), and at the end."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from src.scaffold.errors import StorageError
from src.scaffold.storage import c2net, obs
from src.scaffold.storage.retry import Retry

log = logging.getLogger(__name__)
SHARDS_INDEX = ".metadata"  # in a sharded checkpoint's directory, written last


class Remote(Protocol):
    """Where outputs go: put and delete files by their name under the output directory."""

    where: str

    def put(self, local: Path, names: list[str]) -> None: ...
    def delete(self, names: list[str]) -> None: ...
    def get(self, names: list[str], local: Path) -> list[str]: ...
    def holds(self, name: str) -> bool: ...


class ObsRemote:
    """An obs:// directory, written file by file with moxing."""

    def __init__(self, url: str) -> None:
        self.where = url.rstrip("/")

    def put(self, local: Path, names: list[str]) -> None:
        for name in names:
            obs.copy(str(local / name), f"{self.where}/{name}", tree=False)

    def delete(self, names: list[str]) -> None:
        for name in names:
            obs.remove(f"{self.where}/{name}")

    def holds(self, name: str) -> bool:
        return obs.exists(f"{self.where}/{name}")

    def get(self, names: list[str], local: Path) -> list[str]:
        """Fetch those of ``names`` that exist remotely; return them."""
        fetched = [name for name in names if self.holds(name)]
        for name in fetched:
            (local / name).parent.mkdir(parents=True, exist_ok=True)
            obs.copy(f"{self.where}/{name}", str(local / name), tree=False)
        return fetched


class C2netRemote:
    """OUTPUT_URL through c2net's upload_output(), which copies the whole directory."""

    def __init__(self, url: str | None) -> None:
        self.where, self.url = url or "OUTPUT_URL", url

    def put(self, local: Path, names: list[str]) -> None:
        c2net.upload_output()

    def delete(self, names: list[str]) -> None:
        """c2net copies folders and never deletes: dropped checkpoints stay remotely."""

    def get(self, names: list[str], local: Path) -> list[str]:
        if self.url is None or obs.moxing() is None:
            return []
        return ObsRemote(self.url).get(names, local)

    def holds(self, name: str) -> bool:
        # Without moxing c2net's OUTPUT_URL cannot be read: each C2Net task has its own.
        return self.url is not None and obs.moxing() is not None and ObsRemote(self.url).holds(name)


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every output file but temporaries (dot names), with its size and mtime; a sharded
    checkpoint's .metadata (torch.distributed.checkpoint's index of its shards) is one."""
    found = {}
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        parts = relative.parts[:-1] if relative.name == SHARDS_INDEX else relative.parts
        if path.is_file() and not any(part.startswith(".") for part in parts):
            stat = path.stat()
            found[relative.as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return found


class Uploader:
    """Keeps a remote copy of the local output directory (rank 0 only)."""

    def __init__(self, local: Path, remote: Remote | None, retry: Retry | None = None) -> None:
        self.local, self.remote = local, remote
        self.sent: dict[str, tuple[int, int]] = {}
        self.retry = retry or Retry.read("UPLOAD")

    def mark_present(self, names: list[str]) -> None:
        """A resumed run's files the remote holds: they need not go up again (those a killed
        attempt saved here but never sent go up with the next upload)."""
        files = _files(self.local)
        there = [n for n in names if n in files and self.remote and self.remote.holds(n)]
        self.sent.update({name: files[name] for name in there})

    def _once(self) -> int:
        assert self.remote is not None
        files = _files(self.local)
        # JSON files naming others (latest.json) go up after them: a job killed in between
        # never leaves a pointer to a checkpoint not there yet.
        changed = [name for name, state in files.items() if self.sent.get(name) != state]
        changed.sort(key=lambda name: (name.endswith(".json"), name))
        removed = sorted(set(self.sent) - set(files))
        if changed:
            self.remote.put(self.local, changed)
        if removed:
            self.remote.delete(removed)
        self.sent = dict(files)
        return len(changed)

    def sync(self, final: bool = False) -> bool:
        """Upload what changed; True when up to date. StorageError only when ``final``."""
        if self.remote is None:
            return True
        try:
            count = self.retry.run(self._once, "upload")
        except StorageError as err:
            if final:
                raise
            log.warning("upload failed, trying again after the next epoch: %s", err)
            return False
        if final:
            log.info("outputs uploaded to %s (%d file(s) this time)", self.remote.where, count)
        return True
