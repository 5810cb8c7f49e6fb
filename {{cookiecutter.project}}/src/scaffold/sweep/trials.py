"""One trial: an ordinary run of train.py in its own directory with the trial's options, on its
share of this node's cores, ended with the sweep; its validation rows read as they are written
(the pruner's), and the line it failed with."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

METRICS = "metrics.jsonl"
CONSOLE = "console.log"  # the trial's stdout and stderr
PR_SET_PDEATHSIG = 1  # prctl(2): a signal to this process when its parent exits


def cores() -> list[int]:
    """The cores this process may run on."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


@dataclass
class Running:
    """A trial's train.py while it runs."""

    trial: Any  # optuna.Trial
    directory: Path
    process: subprocess.Popen
    console: IO[str]
    slot: int
    read: int = 0  # bytes of metrics.jsonl read so far
    reported: int = 0  # the last step reported to the pruner
    pruned: str | None = None  # why the pruner stopped it

    def values(self, metric: str) -> list[tuple[int, float]]:
        """The new validation rows' ``metric``, by step (a resumed record rewinds: read anew)."""
        path = self.directory / METRICS
        try:
            size = path.stat().st_size
        except OSError:
            return []
        if size < self.read:
            self.read = 0
        with path.open("rb") as handle:
            handle.seek(self.read)
            text = handle.read(size - self.read).decode("utf-8", "replace")
        whole = text[: text.rfind("\n") + 1]  # a line being written waits for the next look
        self.read += len(whole.encode("utf-8"))
        found = []
        for line in whole.splitlines():
            row = json.loads(line)
            if row.get("type") == "val" and metric in row and row["step"] > self.reported:
                found.append((int(row["step"]), float(row[metric])))
                self.reported = int(row["step"])
        return found


def _child(share: list[int]) -> None:
    """In the trial's process before train.py starts: its cores, and its end with the sweep's
    (a sweep killed outright stops its trials, which save as for any SIGTERM)."""
    if share and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, share)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: a killed sweep's trials run to their end
        pass


def launch(
    project: Path, trial: Any, directory: Path, argv: list[str], share: list[int], slot: int
) -> Running:
    """train.py with ``argv`` in ``directory``, on the cores ``share``."""
    directory.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if share:  # the framework's threads: one a core of the share
        env["OMP_NUM_THREADS"] = str(len(share))
    console = (directory / CONSOLE).open("a", encoding="utf-8")
    console.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} python train.py {' '.join(argv)}\n")
    console.flush()
    process = subprocess.Popen(
        [sys.executable, "train.py", *argv],
        cwd=project,
        env=env,
        stdout=console,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: _child(share),
    )
    return Running(trial, directory, process, console, slot)


def error_line(running: Running) -> str:
    """The line train.py failed with (its last 'error:' line), else its exit status."""
    text = (running.directory / CONSOLE).read_text(encoding="utf-8", errors="replace")
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    code = running.process.returncode
    return errors[-1][len("error: ") :] if errors else f"train.py exited with status {code}"


def best(directory: Path, metric: str, maximize: bool) -> float | None:
    """The best ``metric`` of the run's validation rows (None: it has none)."""
    path = directory / METRICS
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    values = [float(r[metric]) for r in rows if r.get("type") == "val" and metric in r]
    if not values:
        return None
    return max(values) if maximize else min(values)


def note_stop(directory: Path, step: int, reason: str) -> None:
    """A "stop" row in the run's record, as early_stop writes one: why the sweep stopped it."""
    path = directory / METRICS
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    hparams = json.loads((directory / "hparams.json").read_text(encoding="utf-8"))
    epoch = max((int(r.get("epoch", 0)) for r in rows), default=0)
    row = {"run": hparams.get("run_id"), "type": "stop", "epoch": epoch, "step": step}
    row.update(time=time.time(), reason=reason)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


def stop(running: list[Running], signum: int = signal.SIGTERM) -> None:
    """Each trial stopped as a platform stops a run: it saves its step, then ends."""
    for each in running:
        if each.process.poll() is None:
            each.process.send_signal(signum)
    for each in running:
        each.process.wait()
        each.console.close()
