"""Benchmark train.py's start-up to its first step on the CPU, per framework, phase by phase,
against the bare loop's (bench/bare_start.py: import the framework, read the digits, build
the project's LeNet and optimizer, one step; nothing else).

train.py logs its own split once its first step is done (src/scaffold/run/timeline.py):
interpreter and imports, device, data, model, first step, each from the process start as
the kernel records it. Each repeat runs the bare start, then train.py (one epoch of the
digits x --repeat-data, cut at its first step by --max_steps 1), each in its own process;
every other repeat in the reverse order. Medians over the repeats; the goal (issue 35):
train.py's total within 0.5 s of the bare loop's.

    python bench/bench_startup.py [pytorch|mindspore ...] [--repeats 5] [--repeat-data 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

import gpubench as gb
import trainbench as tb

BENCH = Path(__file__).resolve().parent
FRAMEWORKS = ("pytorch", "mindspore")
DISTRIBUTION = {"pytorch": "torch", "mindspore": "mindspore"}
TARGET_S = 0.5


def train_py(project: Path, data: Path, output: Path) -> dict[str, float]:
    argv = [sys.executable, "train.py", "--device_target", "cpu", "--data_url", str(data)]
    argv += ["--train_url", str(output), "--epoch_size", "1", "--max_steps", "1"]
    _, stdout, stderr = gb.run(argv, "train.py", cwd=project)
    split = gb.startup_split(stdout + stderr)
    if split is None:
        sys.exit("error: train.py printed no start-up line (a project from before timeline.py?)")
    return split


def bare(framework: str, project: Path, data: Path) -> dict[str, float]:
    argv = [sys.executable, str(BENCH / "bare_start.py"), framework, str(project), str(data)]
    _, stdout, _ = gb.run(argv, "bare_start.py")
    return json.loads(stdout.strip().splitlines()[-1])


def bench(framework: str, args: argparse.Namespace, work: Path) -> None:
    project = tb.render_project(work, f"start_{framework}", framework=framework)
    data = tb.write_digits(work / f"data-{framework}", args.repeat_data).directory
    ours: list[dict[str, float]] = []
    base: list[dict[str, float]] = []
    for attempt in range(args.repeats):
        output = work / f"out-{framework}-{attempt}"
        for first in (True, False) if attempt % 2 == 0 else (False, True):
            if first:
                base.append(bare(framework, project, data))
            else:
                ours.append(train_py(project, data, output))
    mine, floor = gb.median_split(ours), gb.median_split(base)
    print(
        f"\n== {framework} {version(DISTRIBUTION[framework])}: start-up to the first step, CPU "
        f"({os.cpu_count()} cores), digits x{args.repeat_data}, {args.repeats} repeats (medians)"
    )
    print(f"{'phase':<26}{'train.py s':>11}{'bare s':>9}{'difference':>12}")
    for phase, seconds in floor.items():
        print(f"{phase:<26}{mine[phase]:>11.2f}{seconds:>9.2f}{mine[phase] - seconds:>+12.2f}")
    over = mine["total"] - floor["total"]
    pairs = zip(ours, base, strict=True)
    t = sorted(sum(a.values()) - sum(b.values()) for a, b in pairs)
    print(f"train.py over the bare loop: {over:+.2f} s (each repeat {t[0]:+.2f} to {t[-1]:+.2f})")
    print(f"goal, within {TARGET_S} s: {'met' if over <= TARGET_S else 'missed'}")


def main() -> None:
    parser = tb.arguments(__doc__, FRAMEWORKS, repeats=5)
    tb.for_each_framework(bench, parser.parse_args(), FRAMEWORKS)


if __name__ == "__main__":
    main()
