"""A run in progress: rank 0's .running.json, touched every HEARTBEAT_S, tells eval.py a run
is not done; stale when its process is gone (this host) or untouched for STALE_S (another)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

MARKER = ".running.json"
HEARTBEAT_S = 30.0
# Beyond a few missed heartbeats: a process on another host is taken to be gone.
STALE_S = 5 * HEARTBEAT_S


def _start_ticks(pid: int) -> int | None:
    """When ``pid`` started (/proc/PID/stat's 22nd field): tells it from a later same pid."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return int(text.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int, ticks: Any) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    now = _start_ticks(pid)
    return now is None or not isinstance(ticks, int) or now == ticks


class Running(NamedTuple):
    """The run a marker names, and where."""

    run_id: str
    host: str
    pid: int
    started: float

    def describe(self) -> str:
        since = time.strftime("%H:%M:%S", time.localtime(self.started))
        return f"run {self.run_id} is still training (pid {self.pid} on {self.host}, since {since})"


def running(directory: Path) -> Running | None:
    """The run training into ``directory`` now, if any (a stale marker is none)."""
    path = directory / MARKER
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        age = time.time() - path.stat().st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("pid"), int):
        return None
    if value.get("host") == socket.gethostname():
        if not _alive(value["pid"], value.get("ticks")):
            return None
    elif age > STALE_S:
        return None
    started = float(value.get("started") or 0)
    return Running(str(value.get("run_id", "")), str(value.get("host")), value["pid"], started)


class Marker:
    """Rank 0's marker while it trains: touched by a thread, removed however the run ends."""

    def __init__(self, directory: Path, run_id: str) -> None:
        self.path = directory / MARKER
        self.stopped = threading.Event()
        pid = os.getpid()
        value = {
            "run_id": run_id,
            "host": socket.gethostname(),
            "pid": pid,
            "ticks": _start_ticks(pid),
            "started": time.time(),
        }
        # A run that stops before it writes anything leaves no directory it made.
        self.made = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{MARKER}.{pid}.tmp")
        tmp.write_text(json.dumps(value) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)
        threading.Thread(target=self._beat, name="run marker", daemon=True).start()

    def _beat(self) -> None:
        while not self.stopped.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                return

    def remove(self) -> None:
        self.stopped.set()
        self.path.unlink(missing_ok=True)
        if self.made:
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()  # only while it is empty
