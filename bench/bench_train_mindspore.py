"""Benchmark the generated MindSpore train.py on CPU: Model.train with data sink on and off, and
the custom loop, side by side.

Each configuration is the generated project's own train.py, run as a user runs
it (one process, in turn, never two at once) on the same digits data, batch,
learning rate, epochs and seed. The table gives the steady-state training
throughput (the median of the epochs after the first, as the run record
measures them), the first epoch's (which pays for graph compilation) and the
whole process's wall time (start-up, compilation, evaluation and checkpoints
included). The best of --repeats runs is kept.

MindSpore has no data sink on the CPU: Model.train feeds step by step there
whatever dataset_sink_mode says (train.py logs it), so "sink on" measures the
same path as "sink off" here; sinking only changes anything on an Ascend NPU or
a GPU.

    python bench/bench_train_mindspore.py [--epochs 3] [--repeat-data 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator.options import Options  # noqa: E402
from generator.project import render  # noqa: E402
from generator.sample_data import digits_as_mnist, write_idx  # noqa: E402

BATCH_SIZE = 64
# Run-to-run spread of the same configuration on a shared 2-core machine.
NOISE = 0.10
# (name, training loop, extra train.py flags)
CONFIGS = (
    ("Model.train, sink off", "model", ("--dataset_sink_mode", "false")),
    ("Model.train, sink on", "model", ("--dataset_sink_mode", "true")),
    ("custom loop", "custom", ()),
)


@dataclass(frozen=True)
class Result:
    """One timed run of train.py."""

    name: str
    steady: float  # samples/s, median of the epochs after the first
    first: float  # samples/s of the first epoch, compilation included
    seconds: float  # the whole process
    accuracy: float


def write_data(dest: Path, repeat: int) -> int:
    """The digits, the training split repeated ``repeat`` times; return its size."""
    arrays = digits_as_mnist()
    write_idx(dest / "train-images-idx3-ubyte", np.concatenate([arrays.train_images] * repeat))
    write_idx(dest / "train-labels-idx1-ubyte", np.concatenate([arrays.train_labels] * repeat))
    write_idx(dest / "t10k-images-idx3-ubyte", arrays.test_images)
    write_idx(dest / "t10k-labels-idx1-ubyte", arrays.test_labels)
    return len(arrays.train_labels) * repeat


def run(name: str, project: Path, data: Path, output: Path, epochs: int, flags: tuple) -> Result:
    """train.py in its own process, as a user starts it; throughput read from the run record."""
    argv = [sys.executable, "train.py", "--device_target", "cpu", "--seed", "0"]
    argv += ["--data_url", str(data), "--train_url", str(output)]
    argv += ["--batch_size", str(BATCH_SIZE), "--epoch_size", str(epochs), *flags]
    # One process, whatever launcher started this one.
    env = {k: v for k, v in os.environ.items() if k not in ("RANK_SIZE", "RANK_ID", "DEVICE_ID")}
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"error: {name} failed:\n{result.stderr[-2000:]}")
    lines = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    rates = [line["metrics"]["samples_per_s"] for line in lines if line["type"] == "train"]
    accuracy = [line for line in lines if line["type"] == "test"][-1]["metrics"]["accuracy"]
    steady = statistics.median(rates[1:]) if len(rates) > 1 else rates[0]
    return Result(name, steady, rates[0], seconds, accuracy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3, help="at least 2: the first compiles")
    parser.add_argument("--repeat-data", type=int, default=1, help="copies of the train split")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each; the best is kept")
    args = parser.parse_args()

    import mindspore

    with tempfile.TemporaryDirectory(prefix="bench-ms-") as tmp:
        work = Path(tmp)
        projects = {
            loop: render(
                Options(
                    project=f"bench_{loop}",
                    framework="mindspore",
                    platform="generic",
                    ms_train_loop=loop,
                ),
                work,
            )
            for loop in ("model", "custom")
        }
        data = work / "data"
        data.mkdir()
        num_train = write_data(data, args.repeat_data)
        runs: dict[str, list[Result]] = {name: [] for name, _, _ in CONFIGS}
        # Round-robin: a busy spell on the machine slows every configuration alike.
        for attempt in range(args.repeats):
            for index, (name, loop, flags) in enumerate(CONFIGS):
                output = work / f"run-{index}-{attempt}"
                runs[name].append(run(name, projects[loop], data, output, args.epochs, flags))
        results = [max(runs[name], key=lambda r: r.steady) for name, _, _ in CONFIGS]

    print(
        f"LeNet on digits ({num_train} train samples), batch {BATCH_SIZE}, {args.epochs} epochs, "
        f"CPU ({os.cpu_count()} cores), graph mode, MindSpore {mindspore.__version__}"
    )
    header = f"{'run':<24}{'samples/s':>11}{'1st epoch':>11}{'seconds':>9}{'accuracy':>10}"
    print(header)
    for r in results:
        print(f"{r.name:<24}{r.steady:>11.0f}{r.first:>11.0f}{r.seconds:>9.1f}{r.accuracy:>10.4f}")
    model = max(results[:2], key=lambda r: r.steady)
    custom = results[2]
    ratio = custom.steady / model.steady
    faster = custom if ratio > 1 else model
    print(f"custom loop / Model.train: {ratio:.2f}x samples/s; faster: {faster.name}")
    sink = results[1].steady / results[0].steady
    print(f"sink on / sink off: {sink:.2f}x (no data sink on the CPU: the same path)")
    if abs(ratio - 1) < NOISE:
        print(f"the loops are within {NOISE:.0%} of each other: no clear winner on this CPU")
    default = "custom" if faster is custom else "model"
    print(f"default for ms_train_loop by this measurement: {default}")


if __name__ == "__main__":
    main()
