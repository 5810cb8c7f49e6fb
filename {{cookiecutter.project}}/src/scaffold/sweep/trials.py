"""One trial: an ordinary run of train.py in its own directory with the trial's options, on its
share of this node's cores, ended with the sweep; its validation rows read as they are written
(the pruner's), and the line it failed with."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from src.scaffold.backend import FRAMEWORK

METRICS = "metrics.jsonl"
CONSOLE = "console.log"  # the trial's stdout and stderr
PR_SET_PDEATHSIG = 1  # prctl(2): a signal to this process when its parent exits
GPU_VISIBLE, NPU_VISIBLE = "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"
DEVICES = Path("/dev")  # where an Ascend node shows its NPUs (davinci0, davinci1 ...)
JOB_SHAPE = "MA_VJ_NAME"  # where set, scripts/run_8p.sh reads the ModelArts job's shape


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


@dataclass(frozen=True)
class Share:
    """What one trial runs on: cores (on a CPU), or accelerators by the variable naming them."""

    cores: tuple[int, ...] = ()
    devices: tuple[str, ...] = ()
    visible: str = ""  # CUDA_VISIBLE_DEVICES or ASCEND_RT_VISIBLE_DEVICES
    ranks: int = 1


def accelerators() -> tuple[str, list[str]]:
    """This node's visible accelerators: Ascend NPUs (their device nodes), else NVIDIA GPUs
    (nvidia-smi's list), each narrowed by its visibility variable; none on a CPU node."""
    npus = sorted(int(p.name[len("davinci") :]) for p in DEVICES.glob("davinci[0-9]*"))
    if npus:
        return NPU_VISIBLE, _visible(NPU_VISIBLE, [str(n) for n in npus])
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "", []
    gpus = [str(i) for i, line in enumerate(listed.stdout.splitlines()) if line.startswith("GPU")]
    return (GPU_VISIBLE, _visible(GPU_VISIBLE, gpus)) if gpus else ("", [])


def _visible(variable: str, found: list[str]) -> list[str]:
    given = os.environ.get(variable)
    return [d.strip() for d in given.split(",") if d.strip()] if given else found


def launch(
    project: Path,
    trial: Any,
    directory: Path,
    url: str,
    extra: dict[str, str],
    argv: list[str],
    share: Share,
    slot: int,
) -> Running:
    """train.py with ``argv`` on ``share``, its outputs in ``directory`` (for train_url
    ``url``): one process, or with several ranks the project's own launcher
    (scripts/run_8p.sh), each rank the same options."""
    directory.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHON=sys.executable, **extra)
    env.pop(JOB_SHAPE, None)  # a trial's ranks are the sweep's share, not the job's shape
    if share.cores:  # the framework's threads: the share's cores over its ranks
        env["OMP_NUM_THREADS"] = str(max(1, len(share.cores) // share.ranks))
    if share.visible:
        env[share.visible] = ",".join(share.devices)
    command = [sys.executable, "train.py", *argv, "--train_url", url]
    if share.ranks > 1:
        launcher = "msrun" if FRAMEWORK == "mindspore" else "torchrun"
        command = ["bash", "scripts/run_8p.sh", "--launcher", launcher]
        command += ["--nproc", str(share.ranks), "--master-port", str(free_port())]
        if url == str(directory):
            command += ["--output", url, "--", *argv]
        else:  # an obs:// URL is train.py's (the launcher's --output is a local directory)
            command += ["--", *argv, "--train_url", url]
    console = (directory / CONSOLE).open("a", encoding="utf-8")
    console.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
    console.flush()
    process = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        stdout=console,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: _child(list(share.cores)),
    )
    return Running(trial, directory, process, console, slot)


def free_port() -> int:
    """A TCP port free on this node now: a multi-rank trial's rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def error_line(running: Running) -> str:
    """The line train.py failed with (its last 'error:' line), else its exit status."""
    text = (running.directory / CONSOLE).read_text(encoding="utf-8", errors="replace")
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    code = running.process.returncode
    return errors[-1][len("error: ") :] if errors else f"train.py exited with status {code}"


def _rows(directory: Path) -> list[dict[str, Any]]:
    """The run's record, a row a line."""
    text = (directory / METRICS).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def best(directory: Path, metric: str, maximize: bool) -> float | None:
    """The best ``metric`` of the run's validation rows (None: it has none)."""
    if not (directory / METRICS).is_file():
        return None
    rows = _rows(directory)
    values = [float(r[metric]) for r in rows if r.get("type") == "val" and metric in r]
    if not values:
        return None
    return max(values) if maximize else min(values)


def note_stop(directory: Path, step: int, reason: str) -> None:
    """A "stop" row in the run's record, as early_stop writes one: why the sweep stopped it."""
    path, rows = directory / METRICS, _rows(directory)
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
