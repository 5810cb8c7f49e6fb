"""What the training benchmarks share: the digits as idx files, the generated train.py run as a
user runs it and read back from its run record, its wall time split into training and the
rest, and whole processes timed to a test accuracy.

Time stamps come from the run record: each metrics.jsonl line carries the wall-clock time it
was written and each train line the seconds its epoch's steps took, so a run's wall time
splits, without instrumenting train.py, into:

- start-up and data: from the process start to its first step (interpreter, framework
  import, config, dataset found and read, model built);
- training: the epochs' steps (the first epoch's includes graph compilation and first-touch
  allocation; ``warm_up`` is how much longer it took than a steady epoch would have);
- epoch ends: validation, the log line, the checkpoint and the record after each epoch, and
  the final test pass;
- exit: the last record and upload, and the interpreter's exit.
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
# The generator is imported where it is used, not here: bare_loop.py and bench_gpu.py import
# this module on hosts that have a rendered project and no generator (no jinja2, click...).
sys.path.insert(0, str(REPO))


# train.py's own defaults: the benchmarks run it as shipped.
BATCH_SIZE = 32
LR = 0.01
MOMENTUM = 0.9
SEED = 0
VAL_FRACTION = 0.1
MEAN, STD = 0.1307, 0.3081
TARGET_ACCURACY = 0.95
# Variables a launcher sets: every process here is one process.
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK_SIZE", "RANK_ID", "DEVICE_ID")


@dataclass(frozen=True)
class Digits:
    """The digits written as flat idx files: the train split repeated, the test split once."""

    directory: Path
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def digits_as_mnist():  # -> generator.render.sample_data.MnistArrays
    """The digits as the template ships them (generator/render/sample_data.py)."""
    from generator.render.sample_data import digits_as_mnist as arrays

    return arrays()


def write_idx_files(directory: Path, files: dict[str, np.ndarray]) -> None:
    """Each array as a flat (not gzipped) idx file in directory."""
    from generator.render.sample_data import write_idx

    for name, array in files.items():
        write_idx(directory / name, array, gz=False)


def write_digits(directory: Path, repeat: int) -> Digits:
    arrays = digits_as_mnist()
    images = np.concatenate([arrays.train_images] * repeat)
    labels = np.concatenate([arrays.train_labels] * repeat)
    files = {
        "train-images-idx3-ubyte": images,
        "train-labels-idx1-ubyte": labels,
        "t10k-images-idx3-ubyte": arrays.test_images,
        "t10k-labels-idx1-ubyte": arrays.test_labels,
    }
    write_idx_files(directory, files)
    return Digits(directory, images, labels, arrays.test_images, arrays.test_labels)


def read_digits(directory: Path) -> Digits:
    """The digits write_digits wrote into directory."""

    def read(name: str) -> np.ndarray:
        data = (directory / name).read_bytes()
        ndim = data[3]
        shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
        return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)

    names = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
    names += ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    return Digits(directory, *(read(name) for name in names))


def training_split(digits: Digits) -> tuple[np.ndarray, np.ndarray]:
    """The samples train.py trains on: the train split less the validation it holds out."""
    # Imported from the rendered project (on sys.path): the same hold-out as train.py's.
    from src.scaffold.data.splits import array_split, hold_out

    split = array_split(digits.train_images, digits.train_labels)
    train, _ = hold_out(split, VAL_FRACTION, SEED)
    return train.arrays, train.labels


def render_project(work: Path, name: str, **options: str) -> Path:
    from generator.render.options import Options
    from generator.render.project import render

    return render(Options(project=name, platform="generic", **options), work)  # type: ignore[arg-type]


def one_process_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}


@dataclass(frozen=True)
class Run:
    """One whole train.py process, read back from its run record."""

    wall: float
    start: float  # time.time() at the process start
    end: float
    lines: list[dict]

    def of(self, kind: str) -> list[dict]:
        return [line for line in self.lines if line["type"] == kind]

    @property
    def accuracy(self) -> float:
        return self.of("test")[-1]["accuracy"]

    @property
    def rates(self) -> list[float]:
        return [line["samples_per_s"] for line in self.of("train")]

    @property
    def epoch_seconds(self) -> list[float]:
        """Each epoch's step time, as train.py measured it (samples / samples_per_s)."""
        steps = [line["step"] for line in self.of("train")]
        counts = [b - a for a, b in zip([0, *steps], steps, strict=False)]
        return [n * BATCH_SIZE / rate for n, rate in zip(counts, self.rates, strict=True)]

    @property
    def steady(self) -> float:
        """Samples/s: the median of the epochs after the first (which compiles and warms)."""
        return statistics.median(self.rates[1:] or self.rates)

    def phases(self) -> dict[str, float]:
        """The wall time split as the module's docstring says; the values sum to ``wall``."""
        trains, seconds = self.of("train"), self.epoch_seconds
        starts = [line["time"] - s for line, s in zip(trains, seconds, strict=True)]
        test = self.of("test")[-1]["time"]
        ends = [b - line["time"] for line, b in zip(trains, [*starts[1:], test], strict=True)]
        steady_epoch = seconds[-1] if len(seconds) == 1 else statistics.median(seconds[1:])
        return {
            "start-up and data": starts[0] - self.start,
            "training": sum(seconds),
            "epoch ends": sum(ends),
            "exit": self.end - test,
            "warm_up": seconds[0] - steady_epoch,
        }


def run_train_py(project: Path, data: Path, output: Path, *flags: str) -> Run:
    """train.py on the CPU with its default batch, learning rate and seed; exits on failure."""
    return run_train(project, output, ["--data_url", str(data), "--train_url", str(output), *flags])


def run_train(
    project: Path, output: Path, flags: list[str], env: dict[str, str] | None = None
) -> Run:
    """train.py with flags and env added, its run record read back from output."""
    argv = [sys.executable, "train.py", "--device_target", "cpu", "--seed", str(SEED), *flags]
    start, began = time.time(), time.perf_counter()
    result = subprocess.run(
        argv, cwd=project, env={**one_process_env(), **(env or {})}, capture_output=True, text=True
    )
    wall, end = time.perf_counter() - began, time.time()
    if result.returncode != 0:
        sys.exit(f"error: train.py failed:\n{result.stderr[-2000:]}")
    lines = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return Run(wall, start, end, lines)


def run_bare(framework: str, project: Path, data: Path, epochs: int) -> float:
    """The bare loop's steady-state samples/s (bench/bare_loop.py), in its own process."""
    argv = [sys.executable, str(BENCH / "bare_loop.py"), framework, str(project), str(data)]
    result = subprocess.run(
        [*argv, "--epochs", str(epochs)], env=one_process_env(), capture_output=True, text=True
    )
    if result.returncode != 0:
        sys.exit(f"error: the bare loop failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["samples_per_s"]


def generated_time_to_accuracy(
    project: Path, data: Path, work: Path, max_epochs: int
) -> tuple[float, int, float]:
    """(whole-process seconds, epochs, test accuracy) of the shortest train.py run, in whole
    epochs, that ends at TARGET_ACCURACY or above."""
    for epochs in range(1, max_epochs + 1):
        output = work / f"tta-{project.name}-{epochs}"
        run = run_train_py(project, data, output, "--epoch_size", str(epochs))
        if run.accuracy >= TARGET_ACCURACY:
            return run.wall, epochs, run.accuracy
    sys.exit(f"error: train.py did not reach {TARGET_ACCURACY} in {max_epochs} epochs")


def sample_time_to_accuracy(
    script: Path, data: Path, max_epochs: int, *flags: str
) -> tuple[float, int, float]:
    """(whole-process seconds, epochs, test accuracy) of a sample loop run until it reaches
    TARGET_ACCURACY; the script prints its epochs and accuracy as JSON on its last line."""
    argv = [sys.executable, str(script), str(data), *flags, "--target", str(TARGET_ACCURACY)]
    argv += ["--max-epochs", str(max_epochs), "--batch-size", str(BATCH_SIZE)]
    argv += ["--lr", str(LR), "--momentum", str(MOMENTUM), "--seed", str(SEED)]
    began = time.perf_counter()
    result = subprocess.run(argv, env=one_process_env(), capture_output=True, text=True)
    wall = time.perf_counter() - began
    if result.returncode != 0:
        sys.exit(f"error: {script.name} failed:\n{result.stderr[-2000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if report["accuracy"] < TARGET_ACCURACY:
        sys.exit(f"error: {script.name} did not reach {TARGET_ACCURACY} in {max_epochs} epochs")
    return wall, report["epochs"], report["accuracy"]


def print_throughput(bare: list[float], runs: dict[str, list[Run]]) -> None:
    """Samples/s of the bare loop and of each train.py, best of the repeats, and the ratio:
    the median over the repeats of each run against the bare loop run just before it."""
    print("steady-state throughput (best of the repeats; of bare: median, and the range)")
    print(f"{'run':<28}{'samples/s':>11}{'of bare':>9}  range")
    print(f"{'bare loop':<28}{max(bare):>11.0f}{'100.0%':>9}")
    for name, results in runs.items():
        ratios = [run.steady / limit for run, limit in zip(results, bare, strict=True)]
        best = max(run.steady for run in results)
        spread = f"{min(ratios):.1%} to {max(ratios):.1%}"
        print(f"{name:<28}{best:>11.0f}{statistics.median(ratios):>9.1%}  {spread}")
    best_runs = {name: max(results, key=lambda r: r.steady) for name, results in runs.items()}
    print(f"\n{'whole process, seconds':<28}" + "".join(f"{n[:14]:>16}" for n in best_runs))
    keys = list(next(iter(best_runs.values())).phases())
    for key in ["wall", *keys]:
        cells = (run.wall if key == "wall" else run.phases()[key] for run in best_runs.values())
        label = "  of which first-epoch warm-up" if key == "warm_up" else key
        print(f"{label:<28}" + "".join(f"{cell:>16.2f}" for cell in cells))
    for name, run in best_runs.items():
        overhead = run.wall - run.phases()["training"]
        print(f"overhead of {name} (all but the steps): {overhead:.2f} s")


def print_time_to_accuracy(rows: dict[str, tuple[float, int, float]]) -> None:
    print(f"\ntime to {TARGET_ACCURACY} test accuracy, whole process")
    print(f"{'run':<28}{'seconds':>9}{'epochs':>8}{'accuracy':>10}")
    for name, (seconds, epochs, accuracy) in rows.items():
        print(f"{name:<28}{seconds:>9.1f}{epochs:>8}{accuracy:>10.4f}")
    (first, (base, _, _)), *others = rows.items()
    for name, (seconds, _, _) in others:
        print(f"{name} / {first}: {seconds / base:.2f}x the time")


def arguments(doc: str, frameworks: Iterable[str], repeats: int) -> argparse.ArgumentParser:
    """The options every training benchmark takes."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("frameworks", nargs="*", choices=[*frameworks, []], help="default: all")
    parser.add_argument("--epochs", type=int, default=4, help="at least 2: the first warms up")
    parser.add_argument("--repeat-data", type=int, default=20, help="copies of the train split")
    parser.add_argument("--repeats", type=int, default=repeats, help="rounds of every run")
    return parser


def for_each_framework(
    bench: Callable[[str, argparse.Namespace, Path], None],
    args: argparse.Namespace,
    frameworks: Iterable[str],
) -> None:
    """bench(framework, args, work) for each framework asked for, in one scratch directory."""
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for framework in args.frameworks or frameworks:
            bench(framework, args, Path(tmp))
