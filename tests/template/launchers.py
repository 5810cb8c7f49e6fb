"""Running the generated launch scripts in tests: a clean environment, a stand-in interpreter,
and checks that nothing is left running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
# Variables the scripts read: a value from the developer's shell must not leak in.
SCRIPT_VARIABLES = frozenset(
    """PYTHON DATA_DIR OUTPUT_DIR LOG_DIR DEVICE_ID NPROC_PER_NODE NNODES NODE_RANK MASTER_ADDR
    MASTER_PORT LAUNCHER RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE RANK_ID RANK_SIZE
    RANK_TABLE_FILE RANK_STOP_TIMEOUT ASCEND_HOME ASCEND_INSTALL_INFO NCCL_DEBUG JOIN_TIMEOUT
    HCCL_CONNECT_TIMEOUT HCCL_EXEC_TIMEOUT ASCEND_GLOBAL_LOG_LEVEL XDL_IP POD_IP
    ASCEND_SLOG_PRINT_TO_STDOUT PET_NNODES PET_NPROC_PER_NODE PET_NODE_RANK PET_MASTER_ADDR
    PET_MASTER_PORT MS_WORKER_NUM MS_LOCAL_WORKER MS_NODE_RANK MS_SCHED_HOST MS_SCHED_PORT
    MS_ROLE GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME HCCL_SOCKET_IFNAME HCCL_IF_IP MA_VJ_NAME
    MA_NUM_HOSTS VC_WORKER_NUM VC_TASK_INDEX MA_NUM_GPUS VC_WORKER_HOSTS MA_CURRENT_IP
    MA_CURRENT_HOST_IP MA_CURRENT_INSTANCE_NAME BATCH_TASK_CURRENT_INSTANCE TRAIN_MAX_RESTARTS
    TRAIN_ATTEMPT TRAIN_RANK_DIR TRAIN_RANK_SAID PYTHON_EXEC""".split()
)
# The generated train.py's quick mode: random data in MNIST's shapes, one epoch.
SMOKE = ("--", "--smoke", "--device_target", "cpu")


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARIABLES}
    clean["PATH"] = f"{BIN}{os.pathsep}{clean.get('PATH', '')}"
    return {**clean, **extra}


def run(
    script: Path,
    *args: str,
    environ: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script), *args],
        env=environ or env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def processes_with(token: str) -> list[int]:
    """Live processes whose command line holds token (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


def rank_processes(token: str) -> list[int]:
    """The ranks themselves among processes_with(token): not scripts/rank.sh, which runs each."""
    found = []
    for pid in processes_with(token):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"scripts/rank.sh" not in cmdline:
            found.append(pid)
    return found


def assert_all_gone(token: str, within: float = 3) -> None:
    deadline = time.monotonic() + within
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(token) == [], "a process was left running"


def fake_python(path: Path, body: str) -> Path:
    """A stand-in for $PYTHON: this interpreter running body, with train.py's args in sys.argv.

    Anything but train.py (rank_table.py, cluster.py, python -c, msrun) runs on the real one.
    """
    path.write_text(
        f"#!{sys.executable}\nimport os, signal, subprocess, sys, time\n"
        "if not sys.argv[1:] or not sys.argv[1].endswith('train.py'):\n"
        "    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
        f"{body}"
    )
    path.chmod(0o755)
    return path


def assert_usage_error(result: subprocess.CompletedProcess[str], message: str, script: str) -> None:
    """A bad command line: the reason, the usage, exit 2, nothing on stdout."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert f"error: {message}" in result.stderr
    assert f"usage: scripts/{script}" in result.stderr


def this_host() -> str:
    """An address of this host that is not loopback, as the launchers find them."""
    script = (
        Path(__file__).resolve().parents[2] / "{{cookiecutter.project}}" / "scripts" / "cluster.py"
    )
    found = subprocess.run(
        [sys.executable, str(script), "addresses"], capture_output=True, text=True
    )
    return next(a for a in found.stdout.split() if not a.startswith("127."))


def rank_table(path: Path, servers: list[tuple[str, list[int]]]) -> Path:
    """A merged HCCL table of ``servers`` (address, device ids), device IPs made up."""
    from generator.shipped.ranktable import tables as ranktable

    tables = [
        ranktable.generate(ip, devices, [f"10.{n}.0.{d}" for d in devices])
        for n, (ip, devices) in enumerate(servers)
    ]
    path.write_text(ranktable.merge(tables).dumps())
    return path


def rank_pid(project: Path, rank: int, attempt: int) -> int | None:
    """The process of train.py's ``rank`` in ``attempt`` (counted from 0) of a launch in
    ``project``, under any launcher (torchrun's RANK, msrun's and the per-rank RANK_ID)."""
    for pid in rank_processes("train.py"):
        try:
            # The project's train.py, wherever the rank runs (the per-rank launcher's ranks
            # run in their log directories).
            cwd = Path(f"/proc/{pid}/cwd").resolve()
            words = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            scripts = {(cwd / word).resolve() for word in words if word.endswith("train.py")}
            if (project / "train.py").resolve() not in scripts:
                continue
            # The interpreter itself, not a shell on its way to it.
            if not Path(f"/proc/{pid}/exe").resolve().name.startswith("python"):
                continue
            raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        variables = dict(item.decode().partition("=")[::2] for item in raw if b"=" in item)
        if variables.get("MS_ROLE") == "MS_SCHED":
            continue
        tried = variables.get("TRAIN_ATTEMPT", variables.get("TORCHELASTIC_RESTART_COUNT", "0"))
        if variables.get("RANK", variables.get("RANK_ID")) == str(rank) and tried == str(attempt):
            return pid
    return None
