"""Distributed PyTorch runs that finish must exit 0: many short runs in a row, failures out of N.

Each run is a generated PyTorch project's scripts/run_8p.sh on the CPU (gloo): one epoch of the
shipped digits, --max_steps small, at each shape (ranks on one node). Every --side-by-side-th
round starts that many runs at once, on their own ports and outputs, to load the machine the
way a busy node does. A run fails when the launcher exits non-zero; its error line is printed.

    .venv/bin/python bench/stress_exit.py --runs 200 --shapes 2 8
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from trainbench import one_process_env, render_project  # noqa: E402


@dataclass
class Tally:
    """Failures out of the runs of one shape; loaded: the runs started side by side."""

    runs: int = 0
    loaded: int = 0
    failed: list[str] = field(default_factory=list)
    failed_loaded: int = 0
    seconds: float = 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(project: Path, ranks: int, output: Path, launcher: str, steps: int) -> subprocess.Popen:
    environ = {**one_process_env(), "PYTHON": sys.executable, "MASTER_PORT": str(free_port())}
    command = [
        *("bash", str(project / "scripts" / "run_8p.sh"), "--launcher", launcher),
        *("--nproc", str(ranks), "--output", str(output)),
        *("--", "--device_target", "cpu", "--epoch_size", "1", "--max_steps", str(steps)),
    ]
    return subprocess.Popen(
        command, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def error_line(stderr: str, status: int) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    return lines[0] if lines else f"exit status {status}"


def stress(project: Path, ranks: int, args: argparse.Namespace, scratch: Path) -> Tally:
    tally = Tally()
    round_ = 0
    while tally.runs < args.runs:
        round_ += 1
        side = args.side_by_side if args.side_by_side > 1 and round_ % 2 == 0 else 1
        side = min(side, args.runs - tally.runs)
        outputs = [scratch / f"out{ranks}_{tally.runs + i}" for i in range(side)]
        started = [start(project, ranks, out, args.launcher, args.max_steps) for out in outputs]
        for process, output in zip(started, outputs, strict=True):
            _, stderr = process.communicate()
            tally.runs += 1
            tally.loaded += side > 1
            if process.returncode != 0:
                line = error_line(stderr, process.returncode)
                tally.failed.append(line)
                tally.failed_loaded += side > 1
                print(f"  {ranks} ranks, run {tally.runs}: {line}", flush=True)
            shutil.rmtree(output, ignore_errors=True)
        if tally.runs % 10 < side:
            print(f"  {ranks} ranks: {len(tally.failed)} failures in {tally.runs}", flush=True)
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs of each shape")
    parser.add_argument("--shapes", type=int, nargs="+", default=[2, 8], help="ranks per run")
    parser.add_argument("--side-by-side", type=int, default=2, help="runs started together")
    parser.add_argument("--max-steps", type=int, default=8, help="training steps of each run")
    parser.add_argument("--launcher", choices=["torchrun", "ranktable"], default="torchrun")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stress_exit_") as tmp:
        scratch = Path(tmp)
        target = "cuda" if args.launcher == "torchrun" else "ascend"
        project = render_project(scratch, "stress", framework="pytorch", target=target)
        results = {}
        for ranks in args.shapes:
            began = time.monotonic()
            results[ranks] = stress(project, ranks, args, scratch)
            results[ranks].seconds = time.monotonic() - began
    print(f"\n{args.launcher}, {os.cpu_count()} CPUs, --max_steps {args.max_steps}")
    for ranks, tally in results.items():
        print(
            f"{ranks} ranks: {len(tally.failed)} failures out of {tally.runs} "
            f"({tally.failed_loaded} of {tally.loaded} started side by side), "
            f"{tally.seconds:.0f} s"
        )
    return 1 if any(tally.failed for tally in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
