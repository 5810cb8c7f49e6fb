"""Benchmark what watching a run costs: the generated train.py on the CPU, per framework
(PyTorch; MindSpore with the `model` loop), with its progress lines, per-step run-record
rows, TensorBoard event files and per-step learning rate, against the same run quiet.

Configurations, each run as train.py's flags (see CONFIGS):

- quiet (the baseline): --no_tensorboard --log_every 1000000: no step rows but the run's
  last, no event files;
- default: as shipped: a line and a step row every 50 steps, TensorBoard on;
- every step: --log_every 1: a line, a row and a TensorBoard point every step (the loss read
  back from the device every step): the worst case;
- cosine: default plus --schedule_name cosine --schedule_warmup_epochs 1: a new learning rate set on
  the optimizer every step.

Each configuration runs in its own process; each repeat runs all four, one after another, in
an order turned by one every repeat. A run's samples/s is its steady state from the `train`
rows of its metrics.jsonl (the median of the epochs after the first, see trainbench.py); a
ratio is the median over the repeats of a configuration's samples/s over the quiet run's of
the same repeat. The digits (8x8 scaled to 28x28) with the training split repeated
--repeat-data times: 10 gives 12,928 training samples, 404 steps of 32 an epoch.

--threads sets OMP_NUM_THREADS for every run alike: on a small machine shared with other
work, the frameworks' default intra-op threads make the same run's epochs vary tenfold (see
README.md), far more than what is measured here.

    python bench/bench_watch.py [pytorch|mindspore ...] [--epochs 4] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from importlib.metadata import version
from pathlib import Path

import trainbench as tb

# Per framework: the template options of the project it renders.
FRAMEWORKS: dict[str, dict[str, str]] = {
    "pytorch": {},
    "mindspore": {"ms_train_loop": "model"},
}
DISTRIBUTION = {"pytorch": "torch", "mindspore": "mindspore"}
BASELINE = "quiet"
CONFIGS: dict[str, tuple[str, ...]] = {
    BASELINE: ("--no_tensorboard", "--log_every", "1000000"),
    "default": (),
    "every step": ("--log_every", "1"),
    "cosine": ("--schedule_name", "cosine", "--schedule_warmup_epochs", "1"),
}


def event_bytes(output: Path) -> int:
    """The size of the TensorBoard files a run wrote into output/tensorboard."""
    board = output / "tensorboard"
    return sum(f.stat().st_size for f in board.rglob("*") if f.is_file()) if board.exists() else 0


def bench(framework: str, args: argparse.Namespace, work: Path) -> None:
    options = FRAMEWORKS[framework]
    project = tb.render_project(work, f"watch_{framework}", framework=framework, **options)
    digits = tb.write_digits(work / f"data-{framework}", args.repeat_data)
    names = list(CONFIGS)
    runs: dict[str, list[tb.Run]] = {name: [] for name in names}
    board: dict[str, int] = {}
    loads: list[float] = []
    threads = {} if args.threads is None else {"OMP_NUM_THREADS": str(args.threads)}
    began = time.perf_counter()
    for attempt in range(args.repeats):
        turn = attempt % len(names)
        for name in names[turn:] + names[:turn]:
            output = work / f"run-{framework}-{attempt}-{names.index(name)}"
            flags = ["--data_url", str(digits.directory), "--train_url", str(output)]
            flags += ["--epoch_size", str(args.epochs), *CONFIGS[name]]
            run = tb.run_train(project, output, flags, threads)
            runs[name].append(run)
            board[name] = event_bytes(output)
            loads.append(os.getloadavg()[0])
            print(f"  {framework} repeat {attempt + 1} {name:<11} {run.steady:8.0f} samples/s")
    elapsed = time.perf_counter() - began
    first = runs[BASELINE][0]
    steps = first.of("train")[0]["step"]
    print(
        f"\n== {framework} {version(DISTRIBUTION[framework])}"
        f"{' (' + options['ms_train_loop'] + ' loop)' if options else ''}: LeNet on digits "
        f"x{args.repeat_data} ({steps * tb.BATCH_SIZE} training samples, {steps} steps an "
        f"epoch), batch {tb.BATCH_SIZE}, {args.epochs} epochs, {args.repeats} repeats, CPU "
        f"({os.cpu_count()} cores, {args.threads or 'default'} threads); {elapsed:.0f} s; "
        f"load average (1 min) {min(loads):.1f} to {max(loads):.1f}\n"
    )
    print_table(runs, board)


def print_table(runs: dict[str, list[tb.Run]], board: dict[str, int]) -> None:
    """Per configuration: samples/s (median of the repeats), its ratio to quiet (median of
    the per-repeat ratios, and their range), step rows and event-file bytes per run, wall."""
    quiet = [run.steady for run in runs[BASELINE]]
    head = f"{'config':<12}{'samples/s':>10}{'of quiet':>10}  {'range':<16}"
    print(head + f"{'step rows':>10}{'events kB':>10}{'wall s':>8}")
    for name, results in runs.items():
        ratios = [run.steady / base for run, base in zip(results, quiet, strict=True)]
        rate = statistics.median(run.steady for run in results)
        spread = f"{min(ratios):.3f} to {max(ratios):.3f}"
        rows = len(results[0].of("step"))
        wall = statistics.median(run.wall for run in results)
        print(
            f"{name:<12}{rate:>10.0f}{statistics.median(ratios):>10.3f}  {spread:<16}"
            f"{rows:>10}{board[name] / 1000:>10.1f}{wall:>8.1f}"
        )
    for name, results in runs.items():
        cells = " ".join(f"{run.steady / b:.3f}" for run, b in zip(results, quiet, strict=True))
        print(f"  {name} / quiet per repeat: {cells}")


def main() -> None:
    parser = tb.arguments(__doc__, FRAMEWORKS, repeats=5)
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS (default: unset)")
    parser.set_defaults(repeat_data=10)
    tb.for_each_framework(bench, parser.parse_args(), FRAMEWORKS)


if __name__ == "__main__":
    main()
