"""Benchmark: `gen update` wall time against `gen new` of the same project.

`gen update` renders the new template once (in a temporary directory) and reads the kept
pristine render, so its baseline is one `gen new`. Three cases, each a fresh process, as
users run them, interleaved with the baseline so that machine noise hits all alike:
- up to date: nothing to merge (the common case: run it after every upgrade);
- --set devices_per_node=4 --dry-run: a plan with changes, nothing written;
- --set devices_per_node=4: the same written, in a copy of the committed project.
The medians and their ratios to gen new are printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def _time(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def _committed_project(work: Path) -> Path:
    subprocess.run([str(BIN / "gen"), "new", "demo", "--no-input"], cwd=work, check=True)
    project = work / "demo"
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "generated"]):
        subprocess.run(["git", *args], cwd=project, check=True)
    return project


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    os.environ.update(GIT_ENV)
    gen = str(BIN / "gen")
    times: dict[str, list[float]] = {}
    cases = {
        "gen new --no-input (baseline)": None,
        "gen update (up to date)": ["update"],
        "gen update --set ... --dry-run": ["update", "--set", "devices_per_node=4", "--dry-run"],
        "gen update --set ... (writes)": ["update", "--set", "devices_per_node=4"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        project = _committed_project(work)
        for i in range(args.runs + 1):
            for name, command in cases.items():
                if command is None:
                    took = _time([gen, "new", f"g{i}", "--no-input"], work)
                elif "--dry-run" in command or "--set" not in command:
                    took = _time([gen, *command], project)
                else:
                    copy = work / f"copy{i}"
                    shutil.copytree(project, copy)
                    took = _time([gen, *command], copy)
                if i:  # the first round warms the file cache
                    times.setdefault(name, []).append(took)
    base = statistics.median(times["gen new --no-input (baseline)"])
    print(f"{'command':<34}{'median s':>10}{'min s':>10}{'x gen new':>11}")
    for name, found in times.items():
        median = statistics.median(found)
        print(f"{name:<34}{median:>10.3f}{min(found):>10.3f}{median / base:>10.2f}x")


if __name__ == "__main__":
    main()
