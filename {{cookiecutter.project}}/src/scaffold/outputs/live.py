"""A run in progress: rank 0's .running.json, touched every HEARTBEAT_S, is the directory's lock
(a second live run is refused before it writes) and tells eval.py a run is not done; stale when
its processes are gone (this host) or untouched for STALE_S (another host)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from src.scaffold.errors import ConfigError
from src.scaffold.outputs.checkpoints import read_json

MARKER = ".running.json"
HEARTBEAT_S = 10.0
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


def _ancestors() -> set[int]:
    """This process's parents up to init (/proc/PID/stat's 4th field)."""
    found, pid = set(), os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return found


def _holders(value: dict) -> list[tuple[int, Any]]:
    """(pid, start ticks) of the processes a marker names: rank 0's and its launcher's."""
    pids = [(value.get("pid"), value.get("ticks")), (value.get("launcher"), None)]
    return [(pid, ticks) for pid, ticks in pids if isinstance(pid, int)]


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
        if not any(_alive(pid, ticks) for pid, ticks in _holders(value)):
            return None
    elif age > STALE_S:
        return None
    started = float(value.get("started") or 0)
    return Running(str(value.get("run_id") or ""), str(value.get("host")), value["pid"], started)


def _refusal(directory: Path, held: Running, flag: str | None) -> ConfigError:
    from src.scaffold.outputs.rundir import output_flag

    since = time.strftime("%H:%M:%S", time.localtime(held.started))
    run = f"run {held.run_id}" if held.run_id else "a run"
    return ConfigError(
        f"{directory} is in use: {run} is training there (pid {held.pid} on {held.host}, since "
        f"{since}); one directory takes one live run: wait for it to end, or give another "
        f"{output_flag(flag)}"
    )


def take(directory: Path, pid: int, flag: str | None = None) -> bool:
    """Write the marker for ``pid`` unless a live run holds it (ConfigError), taking it over
    from this process's own launcher (which took it first); True where this made ``directory``."""
    made = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    path, mine = directory / MARKER, _ancestors() | {os.getpid()}
    value = {"run_id": None, "host": socket.gethostname(), "pid": pid, "launcher": None}
    value.update(ticks=_start_ticks(pid), started=time.time())
    tmp = path.with_name(f"{MARKER}.{pid}.tmp")
    try:
        for _ in range(3):
            tmp.write_text(json.dumps(value) + "\n", encoding="utf-8")
            try:
                os.link(tmp, path)  # atomic: of two runs starting at once, one gets it
                return made
            except FileExistsError:
                pass
            before = read_marker(path)
            launchers = [p for p in (before.get("pid"), before.get("launcher")) if p in mine]
            if launchers:  # this run's launcher's (or an earlier attempt's under it)
                value["launcher"] = launchers[-1]
            elif (held := running(directory)) is not None:
                raise _refusal(directory, held, flag)
            path.unlink(missing_ok=True)  # stale, or this run's own: taken over
        raise _refusal(directory, running(directory) or Running("", "?", 0, 0.0), flag)
    finally:
        tmp.unlink(missing_ok=True)


def read_marker(path: Path) -> dict:
    value = read_json(path)
    return value if isinstance(value, dict) else {}


class Marker:
    """Rank 0's marker while it trains: taken before anything is written, touched by a thread,
    removed however the run ends."""

    def __init__(self, directory: Path, flag: str | None = None) -> None:
        self.path = directory / MARKER
        self.stopped = threading.Event()
        # A run that stops before it writes anything leaves no directory it made.
        self.made = take(directory, os.getpid(), flag)
        threading.Thread(target=self._beat, name="run marker", daemon=True).start()

    def name(self, run_id: str) -> None:
        """Say which run holds it (eval.py names it)."""
        value = {**read_marker(self.path), "run_id": run_id}
        tmp = self.path.with_name(f"{MARKER}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

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
