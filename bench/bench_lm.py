"""Benchmark a language-model project's train.py (gen new --task lm) on the CPU, per framework,
against the loop users would otherwise write: nanoGPT's training loop for PyTorch, MindSpore's
bare compiled loop for MindSpore (bench/nanogpt_loop.py), with the same model (the project's
gpt at config.yaml's sizes), optimizer, data (the shipped text as bytes), batch and block size.

train.py's figure is its steady-state samples/s from the run record (the epochs after the first,
validation and checkpoints not counted) times the block; the loop's, its tokens/s after a
warm-up. Each repeat runs the loop, then train.py, one process at a time; the ratio is the
median over the repeats. The goal: at least 1.0x.

    python bench/bench_lm.py [pytorch|mindspore ...] [--epochs 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import trainbench as tb

BENCH = Path(__file__).resolve().parent
BLOCK = 128  # config.yaml's data.block_size
DISTRIBUTION = {"pytorch": "torch", "mindspore": "mindspore"}


def loop_tokens_per_s(framework: str, project: Path, steps: int) -> float:
    text = project / "data" / "pydoc-topics.txt"  # its bytes are its tokens
    argv = [sys.executable, str(BENCH / "nanogpt_loop.py"), framework, str(project), str(text)]
    result = subprocess.run(
        [*argv, "--steps", str(steps)], capture_output=True, text=True, env=tb.one_process_env()
    )
    if result.returncode != 0:
        sys.exit(f"error: the loop failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.splitlines()[-1])["tokens_per_s"]


def train_tokens_per_s(project: Path, output: Path, epochs: int) -> float:
    env = {"TRAIN_CACHE_DIR": str(output.parent / "cache")}
    run = tb.run_train(
        project, output, ["--train_url", str(output), "--epoch_size", str(epochs)], env
    )
    return run.steady * BLOCK


def bench(framework: str, args: argparse.Namespace, work: Path) -> None:
    project = tb.render_project(work, f"lm_{framework}", framework=framework, task="lm")
    loop, train = [], []
    for attempt in range(args.repeats):
        loop.append(loop_tokens_per_s(framework, project, args.steps))
        train.append(train_tokens_per_s(project, work / f"run-{framework}-{attempt}", args.epochs))
    ratios = [t / b for t, b in zip(train, loop, strict=True)]
    name = "nanoGPT's loop" if framework == "pytorch" else "the bare loop"
    print(
        f"\n== {framework} {version(DISTRIBUTION[framework])}: the shipped gpt on the shipped "
        f"text, batch 32 x block {BLOCK}, {args.repeats} repeats, CPU ({os.cpu_count()} cores)"
    )
    print(f"{name:<18}{max(loop):>10.0f} tokens/s (best)")
    print(f"{'train.py':<18}{max(train):>10.0f} tokens/s (best)")
    low, high = min(ratios), max(ratios)
    print(f"train.py / loop: {statistics.median(ratios):.2f}x (median; {low:.2f} to {high:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("frameworks", nargs="*", choices=[*DISTRIBUTION, []], help="default: all")
    parser.add_argument("--epochs", type=int, default=2, help="at least 2: the first warms up")
    parser.add_argument("--steps", type=int, default=100, help="the loop's, after its warm-up")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lm-") as tmp:
        for framework in args.frameworks or DISTRIBUTION:
            bench(framework, args, Path(tmp))


if __name__ == "__main__":
    main()
