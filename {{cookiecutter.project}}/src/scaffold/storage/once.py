"""Run a step once per node: the process creating ``.<name>.lock`` runs it, others wait for it."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Callable

from src.scaffold.errors import StorageError


def process_age() -> float:
    """Seconds since this process started (/proc); 0 when unknown, negative or over a minute."""
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as uptime:
            up = float(uptime.read().split()[0])
        age = up - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
    return age if 0 <= age < 60 else 0.0


POLL_S = 0.2
# Markers older than this process belong to an earlier run. Its start as the kernel records
# it, not this import: a process starved of CPU may import this after another's copy failed.
STARTED = time.time() - process_age() - 1.0


def _write(path: Path, value: dict) -> None:
    """Write then rename: a waiting process never reads half a marker."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _holder_gone(lock: Path) -> bool:
    """Whether the lock's process has died on this host (a stale lock)."""
    holder = _read(lock)
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except (ProcessLookupError, PermissionError) as err:  # PermissionError: alive, not ours
        return isinstance(err, ProcessLookupError)
    return False


class Once:
    """The markers of one step in ``directory``; ``key`` names what the step produces."""

    def __init__(self, directory: Path, name: str, key: str) -> None:
        self.lock = directory / f".{name}.lock"
        self.done = directory / f".{name}.done"
        self.failed = directory / f".{name}.failed"
        self.key = key

    def is_done(self) -> bool:
        return _read(self.done).get("key") == self.key

    def _failure(self) -> str | None:
        if self.failed.is_file() and self.failed.stat().st_mtime >= STARTED:
            return str(_read(self.failed).get("reason") or "(no reason recorded)")
        return None

    def _acquire(self) -> bool:
        self.lock.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            json.dump({"host": socket.gethostname(), "pid": os.getpid()}, stream)
        return True

    def _run(self, step: Callable[[], None]) -> None:
        self.failed.unlink(missing_ok=True)
        try:
            step()
        except StorageError as err:
            _write(self.failed, {"key": self.key, "reason": str(err)})
            raise
        else:  # done before the lock goes, or the next to take the lock would run it again
            _write(self.done, {"key": self.key, "time": time.time()})
        finally:
            self.lock.unlink(missing_ok=True)

    def run(self, step: Callable[[], None], what: str, timeout_s: float) -> bool:
        """Run ``step`` here or wait for whoever runs it (its StorageError shared); True if here."""
        deadline = time.monotonic() + timeout_s
        while not self.is_done():
            # The copier's failure first: its lock is gone by now, but not for another try.
            reason = self._failure()
            if reason is not None:
                raise StorageError(f"the node's copier could not finish: {reason}")
            if self._acquire():
                if not (self.is_done() or self._failure() is not None):
                    self._run(step)
                    return True
                self.lock.unlink(missing_ok=True)  # done or failed since: the checks above say
            elif _holder_gone(self.lock):
                self.lock.unlink(missing_ok=True)
            elif time.monotonic() > deadline:
                raise StorageError(
                    f"waited {timeout_s:g} s for another process of this node to {what} "
                    f"(no {self.done.name} in {self.done.parent}); TRAIN_STAGE_TIMEOUT sets "
                    "the wait"
                )
            else:
                time.sleep(POLL_S)
        return False
