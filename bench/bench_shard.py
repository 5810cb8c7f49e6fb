"""The memory a rank holds for parameters, gradients and optimizer state, shard: full against
shard: none, on 2 CPU ranks (torchrun, gloo), in a language-model project's train.py; and its
tokens/s and memory against a torchtitan-style FSDP2 loop (bench/titan_loop.py) on the same
model, optimizer, gradient clipping, batch and block.

The figures are the framework's own accounting, as train.py logs them after its first optimizer
step: the bytes of the tensors (DTensor shards: their local part) a rank holds. A few steps of
the project's gpt (AdamW, float32) on the shipped text; the goals: full at most 0.55x none, and
train.py at least 1.0x the loop's tokens/s with no more memory a rank. train.py's tokens/s is
its steady samples/s (epoch 2, every rank's) times the block; the loop's, after its warm-up.
Each repeat runs the loop, then train.py; the ratio is the median over the repeats.

    python bench/bench_shard.py [--layers 8] [--width 256] [--heads 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import trainbench as tb

HELD = re.compile(
    r"rank 0 holds parameters ([\d,.]+) MiB, gradients ([\d,.]+) MiB, "
    r"optimizer ([\d,.]+) MiB"
)


def held(project: Path, output: Path, mode: str, sizes: str) -> list[float]:
    """rank 0's MiB of parameters, gradients and optimizer state with shard: ``mode``."""
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    args = ["--device_target", "cpu", "--shard", mode, "--max_steps", "2", "--epoch_size", "1"]
    args += ["--model_args", sizes, "--train_url", str(output), "--no_tensorboard"]
    env = {**tb.one_process_env(), "TRAIN_CACHE_DIR": str(output.parent / "cache")}
    result = subprocess.run(
        [sys.executable, *launcher, "train.py", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    found = HELD.search(result.stdout)
    if result.returncode != 0 or found is None:
        sys.exit(
            f"error: train.py --shard {mode} failed:\n"
            f"{result.stdout[-2000:]}{result.stderr[-2000:]}"
        )
    return [float(value.replace(",", "")) for value in found.groups()]


BLOCK = 128  # config.yaml's data.block_size
LAUNCH = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def _run(argv: list[str], project: Path, scratch: Path) -> str:
    env = {**tb.one_process_env(), "TRAIN_CACHE_DIR": str(scratch / "cache")}
    result = subprocess.run(argv, cwd=project, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"error: {argv[-1]} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout


def train_speed(project: Path, output: Path, sizes: str) -> tuple[float, list[float]]:
    """train.py --shard full on 2 ranks, 2 epochs, clipped as torchtitan clips: (tokens/s,
    rank 0's MiB of parameters, gradients, optimizer)."""
    args = ["--device_target", "cpu", "--shard", "full", "--epoch_size", "2"]
    args += ["--clip_grad_norm", "1.0", "--model_args", sizes, "--train_url", str(output)]
    said = _run([sys.executable, *LAUNCH, "train.py", *args, "--no_tensorboard"], project, output)
    lines = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    rates = [line["samples_per_s"] for line in lines if line["type"] == "train"]
    found = HELD.search(said)
    assert found is not None, said[-2000:]
    return rates[-1] * BLOCK, [float(value.replace(",", "")) for value in found.groups()]


def loop_speed(project: Path, scratch: Path, sizes: str) -> tuple[float, list[float]]:
    """bench/titan_loop.py on 2 ranks: (tokens/s, rank 0's MiB as train.py counts them)."""
    text = project / "data" / "pydoc-topics.txt"  # its bytes are its tokens
    loop = str(Path(__file__).resolve().parent / "titan_loop.py")
    argv = [sys.executable, *LAUNCH, loop, str(project), str(text), "--sizes", sizes]
    said = _run(argv, project, scratch)
    figures = json.loads(said.strip().splitlines()[-1])
    held = [figures["held"][k] / 2**20 for k in ("parameters", "gradients", "optimizer")]
    return figures["tokens_per_s"], held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="of the speed comparison")
    args = parser.parse_args()
    sizes = f"layers={args.layers},heads={args.heads},width={args.width}"
    with tempfile.TemporaryDirectory(prefix="bench-shard-") as tmp:
        project = tb.render_project(Path(tmp), "shard_lm", framework="pytorch", task="lm")
        none = held(project, Path(tmp) / "none", "none", sizes)
        full = held(project, Path(tmp) / "full", "full", sizes)
        speeds = []
        for attempt in range(args.repeats):
            loop = loop_speed(project, Path(tmp) / f"loop-{attempt}", sizes)
            ours = train_speed(project, Path(tmp) / f"speed-{attempt}", sizes)
            speeds.append((ours, loop))
    print(f"gpt {sizes}, vocabulary 256, block 128, AdamW in float32, 2 CPU ranks")
    print(f"{'MiB a rank':<14}{'parameters':>12}{'gradients':>12}{'optimizer':>12}{'total':>10}")
    for name, row in (("shard: none", none), ("shard: full", full)):
        print(f"{name:<14}" + "".join(f"{v:>12.2f}" for v in row) + f"{sum(row):>10.2f}")
    print(f"full / none: {sum(full) / sum(none):.3f}x (goal: at most 0.55x)")
    ratios = [ours[0] / loop[0] for ours, loop in speeds]
    print(f"\n{'2 ranks, shard: full':<26}{'tokens/s (best)':>16}{'MiB a rank':>12}")
    best_ours = max(speeds, key=lambda pair: pair[0][0])[0]
    best_loop = max(speeds, key=lambda pair: pair[1][0])[1]
    for name, (rate, mib) in (("torchtitan-style loop", best_loop), ("train.py", best_ours)):
        print(f"{name:<26}{rate:>16.0f}{sum(mib):>12.2f}")
    low, high = min(ratios), max(ratios)
    print(
        f"train.py / loop: {statistics.median(ratios):.2f}x tokens/s (median; {low:.2f} to "
        f"{high:.2f}; goal: at least 1.0x), {sum(best_ours[1]) / sum(best_loop[1]):.2f}x the "
        "memory a rank (goal: at most 1.0x)"
    )


if __name__ == "__main__":
    main()
