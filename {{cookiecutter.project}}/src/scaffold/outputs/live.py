"""A run in progress, known from its output directory: while rank 0 trains, .running.json
names its run, host and process, and its time is refreshed every HEARTBEAT_S seconds. A
command that reads the run (eval.py) then knows it is not finished. A marker whose process
has died (a run killed with SIGKILL leaves it) is stale: on the same host the process is
gone or is another one by its start time; elsewhere it has not been refreshed for STALE_S.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = ".running.json"
HEARTBEAT_S = 30.0
# Beyond a few missed heartbeats: a process on another host is taken to be gone.
STALE_S = 5 * HEARTBEAT_S


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (/proc/PID/stat's 22nd field):
    with the pid, what tells a process from a later one given the same number."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    try:
        return int(text.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
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


@dataclass(frozen=True)
class Running:
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
    return Running(
        str(value.get("run_id", "")),
        str(value.get("host")),
        value["pid"],
        float(value.get("started") or 0),
    )


class Marker:
    """Rank 0's marker while it trains: written at the start, refreshed by a thread, removed
    when the run ends however it ends (a SIGKILL leaves a stale one)."""

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
        self.thread = threading.Thread(target=self._beat, name="run marker", daemon=True)
        self.thread.start()

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
            try:
                self.path.parent.rmdir()  # only while it is empty
            except OSError:
                pass
