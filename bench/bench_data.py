"""Benchmark train.py's data path: an epoch of PNGs streamed, against a hand-written loader.

One epoch on the CPU over an ImageFolder of 32x32 PNGs, per framework:

- PyTorch: train.py ``--data_in_memory false`` (src/data.py decodes with Pillow in DataLoader
  workers, uint8 batches normalised in the main process) against a hand-written Pillow
  ``Dataset`` (open, convert, float, normalise per sample, as ToTensor + Normalize) and a
  ``DataLoader(shuffle=True, drop_last=True)`` with the same workers.
- MindSpore: train.py ``--data_in_memory false`` against ``mindspore.dataset.ImageFolderDataset``
  with ``Decode``, ``Rescale``, ``Normalize`` and ``HWC2CHW`` maps, the same workers,
  trained by ``Model.train`` with the project's loss (src/step.py's, as the PyTorch baseline).
- Both: train.py ``--data_in_memory true`` (every image decoded at start-up, batches cut by
  index), for the in-memory / streaming ratio.

Every run is its own process and trains the project's own model (src/model.py's lenet, or
--model mlp, built for 3x32x32 and 10 classes) with its optimizer, learning rate and batch
on the same number of samples: train.py's training split (the train folder less the 10% it
holds out for validation). An epoch's seconds are the steps and the loading behind them,
from the first batch asked for to the last step done (PyTorch: the loader's workers start
inside it; MindSpore: Model.train's epoch, as train.py's callback times it); train.py's
come from its run record. Each repeat runs the baseline, train.py streaming and train.py in
memory, every other repeat in reverse order; a ratio is the median over the repeats of each
run against the baseline run next to it. The goal: streaming at most 1.0x the baseline's time.

--threads sets OMP_NUM_THREADS for every run alike. On a small shared machine the
frameworks' default intra-op threads, next to the loader workers, make epochs vary several
times over from run to run; one thread each gives figures that compare.

The images (scikit-learn's digits, tests/training/byo.py) are written once into a scratch
directory ($BENCH_SCRATCH, else the system's temporary directory) and reused.

    python bench/bench_data.py [pytorch|mindspore ...] [--quick] [--repeats 3] [--workers 2]
        [--threads 1] [--model lenet|mlp] [--batch-size 32] [--copies 14]
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
from importlib.metadata import version
from pathlib import Path

import trainbench as tb

FRAMEWORKS = ("pytorch", "mindspore")
DISTRIBUTION = {"pytorch": "torch", "mindspore": "mindspore"}
SIZE = 32
# 14 copies of the digits' 1,438 training images: 20,132 PNGs (the issue asks for 20,000).
COPIES, QUICK_COPIES = 14, 2
# What a user's Normalize would be given for images scaled to 0-1: the values do not
# change the work.
USER_MEAN, USER_STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
COMPLETE = ".complete"
BASELINE = "baseline"
# train.py's runs, by name: --data_in_memory.
OURS = {"train.py streaming": False, "train.py in memory": True}


def scratch() -> Path:
    """Where data worth keeping between runs goes."""
    return Path(os.environ.get("BENCH_SCRATCH") or tempfile.gettempdir()) / "train-template-bench"


def imagefolder(copies: int) -> Path:
    """root/train/<digit>/*.png (copies x 1,438) and root/test/<digit>/*.png (359), written
    once; a marker written last tells a finished folder from an interrupted one."""
    from tests.training.byo import write_imagefolder

    root = scratch() / f"digits-png{SIZE}-x{copies}"
    if (root / COMPLETE).is_file():
        return root
    print(f"writing {copies} x 1,438 PNGs into {root} (once)...", file=sys.stderr)
    write_imagefolder(root, SIZE, ("train",), copies)
    write_imagefolder(root, SIZE, ("test",))
    (root / COMPLETE).write_text("")
    return root


@dataclass(frozen=True)
class Epoch:
    """One epoch of one run: its seconds and samples; for train.py also the whole process
    and its start-up (interpreter, framework, finding and reading the data, model)."""

    seconds: float
    samples: int
    wall: float = 0.0
    startup: float = 0.0

    @property
    def rate(self) -> float:
        return self.samples / self.seconds


def threads_env(args: argparse.Namespace) -> dict[str, str]:
    """--threads for every run alike: the main process's compute threads (OpenMP)."""
    return {} if args.threads is None else {"OMP_NUM_THREADS": str(args.threads)}


def run_ours(
    project: Path, data: Path, output: Path, in_memory: bool, args: argparse.Namespace
) -> Epoch:
    """train.py for one epoch, its epoch read back from the run record."""
    flags = ["--data_url", str(data), "--train_url", str(output), "--epoch_size", "1"]
    flags += ["--data_in_memory", "true" if in_memory else "false"]
    flags += ["--data_num_workers", str(args.workers)]
    flags += ["--batch_size", str(args.batch_size), "--model", args.model]
    run = tb.run_train(project, output, flags, threads_env(args))
    line = run.of("train")[0]
    samples = line["step"] * args.batch_size
    seconds = samples / line["samples_per_s"]
    return Epoch(seconds, samples, run.wall, line["time"] - seconds - run.start)


def run_baseline(framework: str, project: Path, data: Path, args: argparse.Namespace) -> Epoch:
    """The hand-written loop, in its own process as train.py is (this file, --baseline)."""
    argv = [sys.executable, __file__, "--baseline", framework, "--project", str(project)]
    argv += ["--data", str(data), "--workers", str(args.workers)]
    argv += ["--batch-size", str(args.batch_size), "--model", args.model]
    env = {**tb.one_process_env(), **threads_env(args)}
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"error: the {framework} baseline failed:\n{result.stderr[-2000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return Epoch(report["seconds"], report["samples"])


def training_files(train_dir: Path) -> tuple[list[Path], list[int]]:
    """The PNGs and labels train.py trains on: the class folders as a user lists them, less
    the validation train.py holds out (the project's own hold_out, on sys.path)."""
    import numpy as np
    from src.scaffold.data.splits import Split, hold_out

    classes = sorted(p for p in train_dir.iterdir() if p.is_dir())
    pairs = [(path, label) for label, c in enumerate(classes) for path in sorted(c.glob("*.png"))]
    files = tuple(path for path, _ in pairs)
    labels = np.array([label for _, label in pairs], dtype=np.int64)
    train, _ = hold_out(Split(labels, (3, SIZE, SIZE), files=files), tb.VAL_FRACTION, tb.SEED)
    return list(train.files), train.labels.tolist()


def project_model(name: str) -> object:
    """The model train.py builds: src/model.py's, for 3x32x32 images and 10 classes."""
    from src import data, model, step
    from src.scaffold import DataShape, Monitor, Task

    task = Task.gather(model, data, step, Monitor())
    return task.model(name).build(DataShape((3, SIZE, SIZE), 10))


def torch_epoch(train_dir: Path, args: argparse.Namespace) -> tuple[float, int]:
    """(seconds, samples) of one epoch of the loop a PyTorch user writes by hand."""
    import torch
    from bare_stream import PngDataset
    from src import step
    from torch.utils.data import DataLoader

    torch.manual_seed(tb.SEED)
    loader = DataLoader(
        PngDataset(*training_files(train_dir), "RGB", USER_MEAN, USER_STD),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        drop_last=True,
    )
    # The project's model in train.py's CPU memory format: the same steps, so that the
    # epochs differ only in how the data arrives.
    net = project_model(args.model).to(memory_format=torch.channels_last)
    optimizer = step.optimizer(net.parameters(), tb.LR, momentum=tb.MOMENTUM)
    net.train()
    steps, total = 0, 0.0
    start = time.perf_counter()
    for images, labels in loader:
        loss = step.loss(net(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += loss.item()  # the running loss a user prints: one read a step
        steps += 1
    return time.perf_counter() - start, steps * args.batch_size


def mindspore_epoch(train_dir: Path, args: argparse.Namespace) -> tuple[float, int]:
    """(seconds, samples) of one epoch of MindSpore's own ImageFolderDataset pipeline."""
    import mindspore as ms
    import mindspore.dataset as ds
    import mindspore.dataset.transforms as transforms
    import mindspore.dataset.vision as vision
    from mindspore import nn
    from mindspore.train import Callback, Model
    from src import step

    class ProjectLoss(nn.LossBase):
        # The project's loss (src/step.py's, as train.py trains), as the PyTorch baseline
        # and bare_ms.py do: the loss is compiled into the first step, which the epoch
        # counts, and nn.SoftmaxCrossEntropyWithLogits compiles 0.3 s faster.
        def construct(self, logits: object, labels: object) -> object:
            return step.loss(logits, labels)

    class EpochClock(Callback):
        # The span train.py's callback times: epoch begin to end, after Model.train has
        # set the pipeline up.
        def on_train_epoch_begin(self, run_context: object) -> None:
            self.start = time.perf_counter()

        def on_train_epoch_end(self, run_context: object) -> None:
            self.seconds = time.perf_counter() - self.start

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ms.set_seed(tb.SEED)
    samples = len(training_files(train_dir)[0])
    dataset = ds.ImageFolderDataset(
        str(train_dir), num_samples=samples, shuffle=True, num_parallel_workers=args.workers
    )
    image_ops = [
        vision.Decode(),
        vision.Rescale(1 / 255, 0),
        vision.Normalize(USER_MEAN, USER_STD),
        vision.HWC2CHW(),
    ]
    dataset = dataset.map(image_ops, "image", num_parallel_workers=args.workers)
    dataset = dataset.map(transforms.TypeCast(ms.int32), "label", num_parallel_workers=args.workers)
    dataset = dataset.batch(args.batch_size, drop_remainder=True)
    net = project_model(args.model)
    loss = ProjectLoss()
    optimizer = nn.Momentum(net.trainable_params(), tb.LR, tb.MOMENTUM)
    clock = EpochClock()
    Model(net, loss, optimizer).train(1, dataset, callbacks=[clock], dataset_sink_mode=False)
    return clock.seconds, dataset.get_dataset_size() * args.batch_size


def baseline_main(args: argparse.Namespace) -> None:
    """--baseline: one epoch of the hand-written loop; prints seconds and samples as JSON."""
    sys.path.insert(0, str(args.project))
    epoch = torch_epoch if args.baseline == "pytorch" else mindspore_epoch
    seconds, samples = epoch(args.data / "train", args)
    print(json.dumps({"seconds": seconds, "samples": samples}))


def ratio_cell(runs: list[Epoch], baseline: list[Epoch]) -> str:
    ratios = [run.seconds / base.seconds for run, base in zip(runs, baseline, strict=True)]
    spread = f"  {min(ratios):.2f}x to {max(ratios):.2f}x" if len(ratios) > 1 else ""
    return f"{statistics.median(ratios):>12.2f}x{spread}"


def report(
    framework: str,
    baseline: list[Epoch],
    runs: dict[str, list[Epoch]],
    args: argparse.Namespace,
    images: int,
) -> None:
    threads = "default threads" if args.threads is None else f"{args.threads} threads"
    print(
        f"\n== {framework} {version(DISTRIBUTION[framework])}: {args.model} on {images:,} PNGs "
        f"{SIZE}x{SIZE} ({baseline[0].samples:,} training samples an epoch), batch "
        f"{args.batch_size}, {args.workers} loader workers, {args.repeats} repeats, "
        f"CPU ({os.cpu_count()} cores, {threads})\n"
    )
    name = {"pytorch": "hand-written Dataset", "mindspore": "ImageFolderDataset"}[framework]
    print(f"{'one epoch (median)':<28}{'seconds':>9}{'samples/s':>11}{'of baseline':>13}  range")
    median = statistics.median
    print(
        f"{name:<28}{median(e.seconds for e in baseline):>9.2f}"
        f"{median(e.rate for e in baseline):>11.0f}{'1.00x':>13}"
    )
    for run, epochs in runs.items():
        print(
            f"{run:<28}{median(e.seconds for e in epochs):>9.2f}"
            f"{median(e.rate for e in epochs):>11.0f}{ratio_cell(epochs, baseline):>13}"
        )
    streamed, held = (runs[name] for name in OURS)
    print(f"\n{'train.py, whole process':<28}{'wall s':>9}{'start-up s':>12}  (median)")
    for run, epochs in runs.items():
        print(
            f"{run:<28}{median(e.wall for e in epochs):>9.2f}"
            f"{median(e.startup for e in epochs):>12.2f}"
        )
    print(
        "seconds of each repeat: "
        + "; ".join(
            f"{run} {', '.join(f'{e.seconds:.2f}' for e in epochs)}"
            for run, epochs in {name: baseline, **runs}.items()
        )
    )
    in_memory = [h.seconds / s.seconds for h, s in zip(held, streamed, strict=True)]
    whole = [h.wall / s.wall for h, s in zip(held, streamed, strict=True)]
    print(
        f"in memory / streaming: epoch {median(in_memory):.2f}x the time, "
        f"whole process {median(whole):.2f}x"
    )


def bench(framework: str, args: argparse.Namespace, work: Path) -> None:
    data = imagefolder(args.copies)
    project = tb.render_project(work, f"data_{framework}", framework=framework)
    baseline: list[Epoch] = []
    runs: dict[str, list[Epoch]] = {name: [] for name in OURS}
    for attempt in range(args.repeats):
        # Every other repeat in reverse: a machine growing busier or quieter weighs on each
        # run alike, and streaming is always next to the baseline and to in-memory.
        order = [BASELINE, *OURS]
        for name in order if attempt % 2 == 0 else order[::-1]:
            if name == BASELINE:
                baseline.append(run_baseline(framework, project, data, args))
            else:
                output = work / f"run-{framework}-{OURS[name]}-{attempt}"
                runs[name].append(run_ours(project, data, output, OURS[name], args))
    images = sum(1 for _ in (data / "train").glob("*/*.png"))
    report(framework, baseline, runs, args, images)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("frameworks", nargs="*", choices=[*FRAMEWORKS, []], help="default: all")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of every run")
    parser.add_argument("--workers", type=int, default=2, help="loader processes, every run")
    parser.add_argument("--batch-size", type=int, default=tb.BATCH_SIZE)
    parser.add_argument(
        "--model",
        choices=("lenet", "mlp"),
        default="lenet",
        help="src/model.py's; mlp leaves the data path a larger share",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="OMP_NUM_THREADS for every run (default: unset, the framework's own choice)",
    )
    parser.add_argument("--copies", type=int, default=COPIES, help="of the 1,438 train images")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_COPIES} copies, one repeat: to try the benchmark out",
    )
    # One epoch of a hand-written loop, run by the benchmark in its own process.
    parser.add_argument("--baseline", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--project", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        baseline_main(args)
        return
    if args.quick:
        args.copies, args.repeats = QUICK_COPIES, 1
    tb.for_each_framework(bench, args, FRAMEWORKS)


if __name__ == "__main__":
    main()
