"""Benchmark a generated PyTorch project's train.py on a GPU, each figure against its baseline
run on the same GPU in the same run:

1. LeNet on the digits (the training split repeated --repeat-data times), batch 32 and
   batch 256, steady samples/s: train.py as shipped (bfloat16 autocast on CUDA, the data in
   memory) against the bare loop (bare_loop.py --device cuda: model and data on the GPU,
   bfloat16, nothing else).
2. The same digits as PNGs, streamed by 8 loader workers: train.py --data_in_memory false
   --data_num_workers 8 against the hand-written Dataset + DataLoader (bare_stream.py: 8
   workers, pinned memory).
3. Time to 0.95 test accuracy, whole process: train.py against the OpenI sample's loop
   (samples/openi_mnist_torch.py --device cuda), same batch, learning rate and seed.
4. Start-up to the first step, phase by phase: train.py's log line (from its batch-32 run)
   against bare_start.py --device cuda.

Every run is its own process; each repeat runs each pair, the baseline first every other
repeat; a figure is the median over the repeats, a ratio the median of each run against the
baseline run next to it. Targets (issue 35): time to 0.95 at least 1.5x faster than the
sample's loop; start-up within 0.5 s of the bare loop's.

Needs torch, numpy and Pillow only, given --project (a PyTorch project rendered beforehand,
e.g. gen new gpu_bench --no-input); without it the generator renders one, where it imports.
--only picks measurements (start: 1 at batch 32 with 4; b256; stream: 2; tta: 3), for a
short device lease. Where no CUDA GPU is present it says so in one line and measures nothing;
--device cpu runs the same measurements on the CPU (with --quick, in a few minutes) to try
the code paths.

    python bench/bench_gpu.py [--project DIR] [--device cuda|cpu] [--quick] [--repeats 3]
                              [--only start,b256,stream,tta]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import gpubench as gb
import trainbench as tb

NO_GPU = (
    "no CUDA GPU here (torch.cuda.is_available() is False): nothing measured; run it on a GPU host"
)
TTA_TARGET = 1.5  # train.py at least this many times faster to 0.95 than the sample's loop
STARTUP_TARGET = 0.5  # seconds: train.py's start-up at most this much over the bare loop's
# (full, --quick): copies of the train split, repeats, loader workers.
SIZES = {"repeat_data": (20, 3), "repeats": (3, 1), "workers": (8, 2)}
# --only's names: batch 32 with the start-up split (from the same run), batch 256, streamed,
# time to accuracy.
PARTS = ("start", "b256", "stream", "tta")


@dataclass
class Pair:
    """One measurement: train.py and its baseline, a value each per repeat."""

    part: str  # which of PARTS (--only) it belongs to
    title: str
    names: tuple[str, str]  # (train.py's, the baseline's)
    ours: Callable[[], object]
    base: Callable[[], object]
    values: tuple[list, list] = field(default_factory=lambda: ([], []))

    def measure(self, attempt: int) -> None:
        """Both runs, the baseline first every other repeat; each value printed as it comes
        (standard error), so that a run cut short still shows what it measured."""
        for side in (0, 1) if attempt % 2 == 0 else (1, 0):
            value = (self.ours, self.base)[side]()
            self.values[side].append(value)
            print(f"  {self.title}: {self.names[side]} {value}", file=sys.stderr, flush=True)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, help="a rendered PyTorch project")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes, to try it out")
    parser.add_argument("--repeats", type=int, help="rounds of every pair (3; --quick 1)")
    parser.add_argument("--repeat-data", type=int, help="copies of the train split (20; 3)")
    parser.add_argument("--workers", type=int, help="loader workers, streamed (8; 2)")
    parser.add_argument("--epochs", type=int, default=2, help="throughput runs: first warms")
    parser.add_argument("--max-epochs", type=int, default=10, help="for time to accuracy")
    parser.add_argument(
        "--only", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)} (all)"
    )
    args = parser.parse_args()
    args.only = set(args.only.split(","))
    if not args.only or not args.only <= set(PARTS):
        parser.error(f"--only takes names of {', '.join(PARTS)}, comma-separated")
    for key, (full, quick) in SIZES.items():
        if getattr(args, key) is None:
            setattr(args, key, quick if args.quick else full)
    return args


def device_line(device: str) -> str | None:
    """The device in words; None where CUDA is asked for and absent."""
    import torch

    if device == "cpu":
        return f"CPU ({os.cpu_count()} cores), torch {torch.__version__}"
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return f"{name}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def project_dir(args: argparse.Namespace, work: Path) -> Path:
    """--project, checked; else one rendered here by the generator, where it imports."""
    if args.project is None:
        try:
            return tb.render_project(work, "gpu_bench", framework="pytorch")
        except ImportError as exc:
            sys.exit(
                f"error: no --project, and the generator does not import here ({exc}); render "
                "one where it does (gen new gpu_bench --no-input) and pass --project DIR"
            )
    project = args.project.resolve()
    record = project / ".train-template.json"
    if not (project / "train.py").is_file():
        sys.exit(f"error: {project} holds no train.py: --project takes a rendered project")
    if record.is_file() and json.loads(record.read_text()).get("framework") != "pytorch":
        sys.exit(f"error: {project} is not a PyTorch project")
    return project


def pairs(bench: gb.Bench) -> list[Pair]:
    """Every measurement, in the order each repeat runs them."""
    rate = "steady samples/s"
    b256 = 256
    return [
        Pair(
            "start",
            f"LeNet, batch {tb.BATCH_SIZE}, {rate}",
            ("train.py", "bare loop"),
            lambda: bench.ours_rate(tb.BATCH_SIZE),
            lambda: bench.bare_rate(tb.BATCH_SIZE),
        ),
        # train.py's split comes from the batch-32 run just made.
        Pair(
            "start",
            "start-up to the first step, seconds",
            ("train.py", "bare"),
            lambda: bench.splits[-1],
            bench.bare_start,
        ),
        Pair(
            "b256",
            f"LeNet, batch {b256}, {rate}",
            ("train.py", "bare loop"),
            lambda: bench.ours_rate(b256),
            lambda: bench.bare_rate(b256),
        ),
        Pair(
            "stream",
            f"the same data as PNGs, streamed, {bench.workers} workers, {rate}",
            ("train.py streamed", "hand-written"),
            bench.ours_stream,
            bench.bare_stream,
        ),
        Pair(
            "tta",
            f"time to {tb.TARGET_ACCURACY} test accuracy, whole process",
            ("train.py", "sample's loop"),
            bench.ours_tta,
            bench.bare_tta,
        ),
    ]


def spread(ratios: list[float]) -> str:
    median = statistics.median(ratios)
    if len(ratios) == 1:
        return f"{median:.2f}x"
    return f"{median:.2f}x ({min(ratios):.2f}x to {max(ratios):.2f}x)"


def print_rates(pair: Pair) -> None:
    ours, base = pair.values
    print(f"\n{pair.title}\n{'run':<22}{'samples/s':>12}  of the baseline (median, range)")
    print(f"{pair.names[1]:<22}{statistics.median(base):>12,.0f}  1.00x")
    ratios = [a / b for a, b in zip(ours, base, strict=True)]
    print(f"{pair.names[0]:<22}{statistics.median(ours):>12,.0f}  {spread(ratios)}")


def print_tta(pair: Pair) -> float:
    """The table; returns how many times faster train.py is (the median over the repeats)."""
    ours, base = pair.values
    print(f"\n{pair.title}\n{'run':<22}{'seconds':>9}{'epochs':>8}{'accuracy':>10}")
    for name, runs in zip(reversed(pair.names), (base, ours), strict=True):
        seconds, epochs, accuracy = (statistics.median(run[i] for run in runs) for i in range(3))
        print(f"{name:<22}{seconds:>9.1f}{epochs:>8.0f}{accuracy:>10.4f}")
    faster = [b[0] / a[0] for a, b in zip(ours, base, strict=True)]
    print(f"train.py faster than the sample's loop: {spread(faster)}")
    return statistics.median(faster)


def print_tta_phases(phases: list[dict[str, float]]) -> None:
    """Where train.py's time to accuracy went (trainbench.py's split, medians)."""
    print("of train.py's, seconds (medians):", end="")
    for key in phases[0]:
        label = "of which first-epoch warm-up" if key == "warm_up" else key
        print(f" {label} {statistics.median(run[key] for run in phases):.2f};", end="")
    print()


def print_startup(pair: Pair) -> float | None:
    """Phase by phase, side by side; returns train.py's total less the bare one's."""
    ours, base = pair.values
    if any(split is None for split in ours):
        print(f"\n{pair.title}\ntrain.py printed no start-up line: not compared")
        return None
    mine, bare = gb.median_split(ours), gb.median_split(base)
    print(f"\n{pair.title} (medians)")
    print(f"{'phase':<26}{'train.py s':>11}{'bare s':>9}{'difference':>12}")
    for phase in bare:
        a, b = mine.get(phase, 0.0), bare[phase]
        print(f"{phase:<26}{a:>11.2f}{b:>9.2f}{a - b:>+12.2f}")
    return mine["total"] - bare["total"]


def verdict(faster: float | None, startup: float | None) -> str:
    line = f"verdict: time to {tb.TARGET_ACCURACY} "
    if faster is None:
        line += "not measured; start-up "
    else:
        tta = "met" if faster >= TTA_TARGET else "missed"
        line += f"train.py {faster:.2f}x faster than the sample's loop (target at least "
        line += f"{TTA_TARGET}x): {tta}; start-up "
    if startup is None:
        return line + "not compared (not measured, or no start-up line from train.py)"
    met = "met" if startup <= STARTUP_TARGET else "missed"
    return line + f"{startup:+.2f} s against the bare loop's (target within 0.5 s): {met}"


def measure(args: argparse.Namespace, work: Path) -> tuple[gb.Bench, list[Pair]]:
    """The data written, a warm-up run, then every pair --repeats times."""
    project = project_dir(args, work)
    data = work / "digits"
    digits = gb.write_digits(project, data, args.repeat_data)
    pngs = work / "pngs"
    if "stream" in args.only:
        print(f"writing {len(digits.train_labels):,} PNGs...", file=sys.stderr)
        gb.write_pngs(digits, pngs)
    bench = gb.Bench(
        project, data, pngs, work, args.device, args.epochs, args.workers, args.max_epochs
    )
    bench.bare_start()  # not counted: the libraries read and the driver up for every run alike
    measurements = pairs(bench)
    # Those not asked for stay without values.
    runs = [pair for pair in measurements if pair.part in args.only]
    for attempt in range(args.repeats):
        print(f"repeat {attempt + 1} of {args.repeats}...", file=sys.stderr)
        for pair in runs:
            pair.measure(attempt)
    return bench, measurements


def main() -> None:
    began = time.perf_counter()
    args = arguments()
    device = device_line(args.device)
    if device is None:
        print(NO_GPU)
        return
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        bench, (b32, startup, b256, stream, tta) = measure(args, Path(tmp))
        samples = len(tb.read_digits(bench.data).train_labels)
        print(
            f"\n== {device}: LeNet on digits x{args.repeat_data} ({samples:,} training images, "
            f"a tenth held out), {args.epochs} epochs a throughput run, repeats: {args.repeats}"
        )
        for pair in (b32, b256, stream):
            if pair.values[0]:
                print_rates(pair)
        faster = print_tta(tta) if tta.values[0] else None
        if bench.tta_phases:
            print_tta_phases(bench.tta_phases)
        difference = print_startup(startup) if startup.values[0] else None
    print(f"\n{verdict(faster, difference)}")
    print(f"({time.perf_counter() - began:.0f} s in all)")


if __name__ == "__main__":
    main()
