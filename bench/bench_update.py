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
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from bench_gen_new import BIN, _time

GEN = str(BIN / "gen")
SET = ["--set", "devices_per_node=4"]
# name: (arguments, whether it writes: then it runs in a fresh copy of the project)
CASES = {
    "gen update (up to date)": (["update"], False),
    "gen update --set ... --dry-run": (["update", *SET, "--dry-run"], False),
    "gen update --set ... (writes)": (["update", *SET], True),
}
BASELINE = "gen new --no-input (baseline)"


def _committed_project(work: Path) -> Path:
    subprocess.run([GEN, "new", "demo", "--no-input"], cwd=work, check=True)
    project = work / "demo"
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for args in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-q", "-m", "generated"]):
        subprocess.run(["git", *args], cwd=project, check=True)
    return project


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    times: dict[str, list[float]] = {BASELINE: [], **{name: [] for name in CASES}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        project = _committed_project(work)
        for i in range(args.runs + 1):
            took = {BASELINE: _time([GEN, "new", f"g{i}", "--no-input"], work)}
            for name, (command, writes) in CASES.items():
                where = shutil.copytree(project, work / f"copy{i}") if writes else project
                took[name] = _time([GEN, *command], where)
            if i:  # the first round warms the file cache
                for name, seconds in took.items():
                    times[name].append(seconds)
    base = statistics.median(times[BASELINE])
    print(f"{'command':<34}{'median s':>10}{'min s':>10}{'x gen new':>11}")
    for name, found in times.items():
        median = statistics.median(found)
        print(f"{name:<34}{median:>10.3f}{min(found):>10.3f}{median / base:>10.2f}x")


if __name__ == "__main__":
    main()
