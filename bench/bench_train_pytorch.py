"""Benchmark the generated PyTorch train loop against a per-sample Dataset + DataLoader baseline.

The baseline is written the way the OpenI MNIST sample is: torchvision's MNIST
Dataset (reimplemented here, there is no CPU torchvision: one PIL image a
sample, ToTensor, Normalize), a DataLoader(batch_size=256), .to(device) on
every batch and an evaluation pass through a DataLoader too.
The baseline's LeNet is the samples' (conv -> ReLU -> pool, NCHW), with the same
layers and parameter count as the generated one. Both train on the same digits data with the same
batch size, learning rate, epochs and seed, in this process, one after the
other; each is timed end to end (data loading, training, evaluation and a
checkpoint per epoch) and the best of --repeats runs is kept.

The generated loop also puts the model in NHWC (channels_last) on CPUs; the
row "baseline, NHWC model" runs the baseline that way too, so that the table
shows how much of the speed-up is the data path alone.

    python bench/bench_train_pytorch.py [--epochs 3] [--repeat-data 8] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator.options import Options  # noqa: E402
from generator.project import render  # noqa: E402
from generator.sample_data import digits_as_mnist, write_idx  # noqa: E402

BATCH_SIZE = 256
LR = 0.02
MOMENTUM = 0.9
SEED = 0
MEAN, STD = 0.1307, 0.3081


@dataclass(frozen=True)
class Result:
    """One timed run: samples trained, seconds end to end, final test accuracy."""

    name: str
    samples: int
    seconds: float
    accuracy: float

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds


def write_data(dest: Path, repeat: int) -> int:
    """The digits, the training split repeated ``repeat`` times; return its size."""
    arrays = digits_as_mnist()
    train_images = np.concatenate([arrays.train_images] * repeat)
    train_labels = np.concatenate([arrays.train_labels] * repeat)
    write_idx(dest / "train-images-idx3-ubyte", train_images, gz=False)
    write_idx(dest / "train-labels-idx1-ubyte", train_labels, gz=False)
    write_idx(dest / "t10k-images-idx3-ubyte", arrays.test_images, gz=False)
    write_idx(dest / "t10k-labels-idx1-ubyte", arrays.test_labels, gz=False)
    return len(train_labels)


def run_generated(data: Path, output: Path, epochs: int) -> Result:
    """The generated project's own train(), as train.py calls it, on the CPU."""
    import json

    from src.config import parse_config
    from src.distributed import setup
    from src.trainer import train

    argv = ["--data_url", str(data), "--train_url", str(output), "--device_target", "cpu"]
    argv += ["--batch_size", str(BATCH_SIZE), "--epoch_size", str(epochs), "--lr", str(LR)]
    argv += ["--momentum", str(MOMENTUM), "--seed", str(SEED)]
    cfg = parse_config(argv)
    start = time.perf_counter()
    metrics = train(cfg, setup(cfg.device_target))
    seconds = time.perf_counter() - start
    lines = (output / "metrics.jsonl").read_text().splitlines()
    steps = max(json.loads(line)["step"] for line in lines)
    return Result("generated train.py", steps * BATCH_SIZE, seconds, metrics["accuracy"])


def sample_lenet() -> torch.nn.Module:
    """LeNet as the platform samples write it: ReLU before each pooling, default layout."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


def run_baseline(data: Path, output: Path, epochs: int, nhwc: bool = False) -> Result:
    """Per-sample Dataset + DataLoader, in the style of the OpenI MNIST sample."""
    import torch
    import torch.nn.functional as F
    from PIL import Image
    from src.mnist import load_mnist
    from src.model import LeNet
    from torch.utils.data import DataLoader, Dataset

    class MnistDataset(Dataset):
        def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
            self.images, self.labels = images, labels

        def __len__(self) -> int:
            return len(self.labels)

        def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
            # torchvision.datasets.MNIST.__getitem__: a PIL image per sample...
            picture = Image.fromarray(self.images[index], mode="L")
            # ...then transforms.ToTensor() and transforms.Normalize(), as they do it.
            array = np.array(picture, np.uint8, copy=True)
            image = torch.from_numpy(array).view(picture.size[1], picture.size[0], 1)
            image = image.permute((2, 0, 1)).contiguous().to(torch.float32).div(255)
            image = (image - MEAN) / STD
            return image, int(self.labels[index])

    device = torch.device("cpu")
    start = time.perf_counter()
    train_set, test_set = load_mnist(data)
    generator = torch.Generator().manual_seed(SEED)
    train_loader = DataLoader(
        MnistDataset(train_set.images, train_set.labels),
        batch_size=BATCH_SIZE,
        shuffle=True,
        generator=generator,
    )
    test_loader = DataLoader(MnistDataset(test_set.images, test_set.labels), batch_size=BATCH_SIZE)
    torch.manual_seed(SEED)
    # The samples' LeNet; the NHWC row uses the generated one, to isolate the data path.
    model = (LeNet() if nhwc else sample_lenet()).to(device)
    if nhwc:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    samples = 0
    for epoch in range(1, epochs + 1):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            samples += len(labels)
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in test_loader:
                predicted = model(images.to(device)).argmax(dim=1)
                correct += (predicted == labels.to(device)).sum().item()
        accuracy = correct / len(test_set)
        torch.save(model.state_dict(), output / f"baseline_epoch{epoch}.pt")
    name = "baseline, NHWC model" if nhwc else "baseline DataLoader"
    return Result(name, samples, time.perf_counter() - start, accuracy)


def run_baseline_nhwc(data: Path, output: Path, epochs: int) -> Result:
    """The baseline with the generated loop's memory format: isolates the data path."""
    return run_baseline(data, output, epochs, nhwc=True)


Runner = Callable[[Path, Path, int], Result]


def best_of(runner: Runner, data: Path, work: Path, epochs: int, repeats: int) -> Result:
    """The fastest of ``repeats`` runs, each writing into a fresh output directory."""
    results = []
    for attempt in range(repeats):
        output = work / f"{runner.__name__}-{epochs}-{attempt}"
        output.mkdir()
        results.append(runner(data, output, epochs))
    return min(results, key=lambda r: r.seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeat-data", type=int, default=8, help="copies of the train split")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each; the best is kept")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        work = Path(tmp)
        project = render(Options(project="bench", platform="generic"), work)
        data = work / "data"
        num_train = write_data(data, args.repeat_data)
        sys.path.insert(0, str(project))
        runners = (run_baseline, run_baseline_nhwc, run_generated)
        # Every run pays for imports and first-call set-up before the clock starts.
        for runner in runners:
            best_of(runner, data, work, 1, 1)
        baseline, baseline_nhwc, generated = (
            best_of(runner, data, work, args.epochs, args.repeats) for runner in runners
        )

    print(
        f"LeNet on digits ({num_train} train samples), batch {BATCH_SIZE}, {args.epochs} epochs, "
        f"CPU, {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    print(f"{'run':<22}{'samples':>9}{'seconds':>9}{'samples/s':>11}{'accuracy':>10}")
    for r in (baseline, baseline_nhwc, generated):
        print(
            f"{r.name:<22}{r.samples:>9}{r.seconds:>9.2f}{r.samples_per_s:>11.0f}{r.accuracy:>10.4f}"
        )
    print(f"speed-up: {generated.samples_per_s / baseline.samples_per_s:.2f}x samples/s")
    data_path = generated.samples_per_s / baseline_nhwc.samples_per_s
    print(f"  of which the data path (vs baseline, NHWC model): {data_path:.2f}x")
    print(f"accuracy: {generated.accuracy - baseline.accuracy:+.4f} (generated - baseline)")


if __name__ == "__main__":
    main()
