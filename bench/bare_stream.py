"""The hand-written streaming loop, the baseline of train.py --data_in_memory false: the
Dataset and DataLoader a PyTorch user writes for a folder of PNGs, on the GPU as a user puts
it there.

A ``Dataset`` over the PNG paths that opens each with Pillow, converts it to a float tensor
and normalises it (torchvision's ``ToTensor`` and ``Normalize``), a ``DataLoader(batch_size,
shuffle=True, num_workers=W, pin_memory=True on a GPU, drop_last=True)``, each batch sent
with ``.to(device, non_blocking=True)``, the project's LeNet and SGD, bfloat16 autocast on a
GPU (as train.py's defaults there). The samples are train.py's: the train folder less the
validation it holds out (the project's own hold_out).

    python bench/bare_stream.py PROJECT PNG_ROOT [--device cpu|cuda] [--workers 8]
        [--batch-size 32] [--epochs 2]

An epoch runs from the first batch asked for (the workers start inside it) to its last step
done on the device. Prints the steady-state samples/s (the median of the epochs after the
first) as JSON on its last line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import trainbench as tb
from PIL import Image
from torch.utils.data import DataLoader, Dataset


def training_files(train_dir: Path) -> tuple[list[Path], list[int]]:
    """The PNGs and labels train.py trains on: the class folders as a user lists them, less
    the validation train.py holds out (the project's hold_out, on sys.path)."""
    from src.scaffold.data.splits import Split, hold_out

    classes = sorted(p for p in train_dir.iterdir() if p.is_dir())
    pairs = [(path, label) for label, c in enumerate(classes) for path in sorted(c.glob("*.png"))]
    files = tuple(path for path, _ in pairs)
    labels = np.array([label for _, label in pairs], dtype=np.int64)
    with Image.open(files[0]) as image:
        shape = (1, image.height, image.width)
    train, _ = hold_out(Split(labels, shape, files=files), tb.VAL_FRACTION, tb.SEED)
    return list(train.files), train.labels.tolist()


class PngDataset(Dataset):
    """One PNG a sample, opened, converted (Pillow ``mode``) and normalised in the loader's
    workers, as torchvision's ToTensor and Normalize do. At module level, so that workers
    started by spawn or forkserver can unpickle it (bench_data.py's baseline too)."""

    def __init__(
        self, files: list[Path], labels: list[int], mode: str = "L", mean=tb.MEAN, std=tb.STD
    ) -> None:
        self.files, self.labels, self.mode = files, labels, mode
        channels = len(mode)
        self.mean = (
            torch.as_tensor(mean, dtype=torch.float32).reshape(-1, 1, 1).expand(channels, 1, 1)
        )
        self.std = (
            torch.as_tensor(std, dtype=torch.float32).reshape(-1, 1, 1).expand(channels, 1, 1)
        )

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        with Image.open(self.files[index]) as image:
            pixels = np.array(image.convert(self.mode), dtype=np.uint8).reshape(
                image.height, image.width, -1
            )
        tensor = torch.from_numpy(pixels).permute(2, 0, 1).contiguous().float().div(255)
        return tensor.sub_(self.mean).div_(self.std), self.labels[index]


def loader(root: Path, args: argparse.Namespace, pin: bool) -> DataLoader:
    return DataLoader(
        PngDataset(*training_files(root / "train")),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=pin,
        drop_last=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("root", type=Path, help="PNG_ROOT/train/<class>/*.png")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=tb.BATCH_SIZE)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(args.project))
    from src.model import LeNet

    device = torch.device(args.device)
    torch.manual_seed(tb.SEED)
    data = loader(args.root, args, pin=device.type == "cuda")
    net = LeNet().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=tb.LR, momentum=tb.MOMENTUM)
    amp = device.type == "cuda"
    rates = []
    for _ in range(args.epochs):
        steps, start = 0, time.perf_counter()
        for images, labels in data:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device.type, torch.bfloat16) if amp else contextlib.nullcontext():
                loss = F.cross_entropy(net(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            steps += 1
        loss.item()
        if amp:
            torch.cuda.synchronize(device)
        rates.append(steps * args.batch_size / (time.perf_counter() - start))
    print(json.dumps({"samples_per_s": statistics.median(rates[1:] or rates), "epochs": rates}))


if __name__ == "__main__":
    main()
