"""Benchmark the generated train.py on the CPU, per framework: against the bare loop, and
against the seed sample's loop to a test accuracy.

1. Throughput against the limit: the bare loop (bench/bare_loop.py: the project's own model,
   optimizer and batch, the data already in memory, nothing else) next to train.py's
   steady-state samples/s from its run record (PyTorch; MindSpore's Model.train and custom
   loop). Each repeat runs the bare loop, then each train.py, one process at a time; the
   ratio is the median over the repeats. The goal: at least 95%.
2. Whole-process overhead: train.py's wall time less its steps, split into start-up and
   data, epoch ends (validation, checkpoint, record) and exit (see trainbench.py).
3. Time to accuracy: whole-process seconds to reach 0.95 test accuracy on the digits with
   the training split repeated --repeat-data times, train.py against the sample's loop
   (bench/samples/: OpenI's PyTorch MNIST sample, MindSpore's LeNet sample) with the same
   batch, learning rate and seed.

    python bench/bench_train.py [pytorch|mindspore ...] [--epochs 4] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
from importlib.metadata import version
from pathlib import Path

import trainbench as tb

SAMPLES = Path(__file__).resolve().parent / "samples"
# The train.py configurations per framework: (name, extra template options).
CONFIGS = {
    "pytorch": (("train.py", {}),),
    "mindspore": (
        ("Model.train", {"ms_train_loop": "model"}),
        ("custom loop", {"ms_train_loop": "custom"}),
    ),
}
SAMPLE = {"pytorch": "openi_mnist_torch.py", "mindspore": "mindspore_lenet.py"}
DISTRIBUTION = {"pytorch": "torch", "mindspore": "mindspore"}


def bench(framework: str, args: argparse.Namespace, work: Path) -> None:
    projects = {
        name: tb.render_project(work, f"{framework}_{i}", framework=framework, **options)
        for i, (name, options) in enumerate(CONFIGS[framework])
    }
    first = next(iter(projects.values()))
    digits = tb.write_digits(work / f"data-{framework}", args.repeat_data)
    epochs = ("--epoch_size", str(args.epochs))
    bare: list[float] = []
    runs: dict[str, list[tb.Run]] = {name: [] for name in projects}
    for attempt in range(args.repeats):
        bare.append(tb.run_bare(framework, first, digits.directory, args.epochs))
        for name, project in projects.items():
            output = work / f"run-{project.name}-{attempt}"
            runs[name].append(tb.run_train_py(project, digits.directory, output, *epochs))
    sample = (SAMPLES / SAMPLE[framework], digits.directory, args.max_epochs)
    tta = {
        "sample's loop": tb.sample_time_to_accuracy(*sample, "--project", str(first)),
        f"generated {next(iter(projects))}": tb.generated_time_to_accuracy(
            first, digits.directory, work, args.max_epochs
        ),
    }
    samples = runs[next(iter(runs))][0].of("train")[0]["step"] * tb.BATCH_SIZE
    print(
        f"\n== {framework} {version(DISTRIBUTION[framework])}: LeNet on digits "
        f"x{args.repeat_data} ({samples} training samples), batch {tb.BATCH_SIZE}, "
        f"{args.epochs} epochs, {args.repeats} repeats, CPU ({os.cpu_count()} cores)\n"
    )
    tb.print_throughput(bare, runs)
    tb.print_time_to_accuracy(tta)


def main() -> None:
    parser = tb.arguments(__doc__, CONFIGS, repeats=5)
    parser.add_argument("--max-epochs", type=int, default=10, help="for time to accuracy")
    tb.for_each_framework(bench, parser.parse_args(), CONFIGS)


if __name__ == "__main__":
    main()
