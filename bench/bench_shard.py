"""The memory a rank holds for parameters, gradients and optimizer state, shard: full against
shard: none, on 2 CPU ranks (torchrun, gloo), in a language-model project's train.py.

The figures are the framework's own accounting, as train.py logs them after its first optimizer
step: the bytes of the tensors (DTensor shards: their local part) a rank holds. A few steps of
the project's gpt (AdamW, float32) on the shipped text; the goal: full at most 0.55x none.

    python bench/bench_shard.py [--layers 8] [--width 256] [--heads 4]
"""

from __future__ import annotations

import argparse
import re
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    args = parser.parse_args()
    sizes = f"layers={args.layers},heads={args.heads},width={args.width}"
    with tempfile.TemporaryDirectory(prefix="bench-shard-") as tmp:
        project = tb.render_project(Path(tmp), "shard_lm", framework="pytorch", task="lm")
        none = held(project, Path(tmp) / "none", "none", sizes)
        full = held(project, Path(tmp) / "full", "full", sizes)
    print(f"gpt {sizes}, vocabulary 256, block 128, AdamW in float32, 2 CPU ranks")
    print(f"{'MiB a rank':<14}{'parameters':>12}{'gradients':>12}{'optimizer':>12}{'total':>10}")
    for name, row in (("shard: none", none), ("shard: full", full)):
        print(f"{name:<14}" + "".join(f"{v:>12.2f}" for v in row) + f"{sum(row):>10.2f}")
    print(f"full / none: {sum(full) / sum(none):.3f}x (goal: at most 0.55x)")


if __name__ == "__main__":
    main()
