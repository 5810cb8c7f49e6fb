"""What every program of bench_peers.py shares: the generated project's LeNet and training split
(the digits it trains on, normalised as train.py normalises them), SGD with train.py's defaults,
the loader users write (a TensorDataset in a shuffled DataLoader), and the figures each prints as
JSON on its last line: epoch 2's samples/s, the seconds from its process start to its first step
(BENCH_T0, the time the harness started it), every epoch's samples/s."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))

import trainbench as tb  # noqa: E402


def arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("project", type=Path, help="a generated PyTorch project (its src/)")
    parser.add_argument("data", type=Path, help="the digits as idx files (trainbench)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=tb.BATCH_SIZE)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--channels-last", action="store_true", help="the model's memory format")
    parser.add_argument("--work", type=Path, default=Path.cwd(), help="where a peer may write")
    return parser


def model_and_data(args: argparse.Namespace) -> tuple[Any, Any]:
    """(the project's LeNet, seeded as train.py seeds it; the training split as tensors)."""
    sys.path.insert(0, str(args.project))
    import torch
    from src.model import LeNet

    images, labels = tb.training_split(tb.read_digits(args.data))
    x = torch.from_numpy(images).unsqueeze(1).float().div_(255).sub_(tb.MEAN).div_(tb.STD)
    y = torch.from_numpy(labels.astype(np.int64))
    torch.manual_seed(tb.SEED)
    net = LeNet()
    if args.channels_last:
        net = net.to(memory_format=torch.channels_last)
    return net, torch.utils.data.TensorDataset(x, y)


def loader(data: Any, args: argparse.Namespace) -> Any:
    """The DataLoader users write over tensors in memory: shuffled, whole batches."""
    import torch

    generator = torch.Generator().manual_seed(tb.SEED)
    return torch.utils.data.DataLoader(
        data, batch_size=args.batch_size, shuffle=True, drop_last=True, generator=generator
    )


def optimizer(net: Any) -> Any:
    import torch

    return torch.optim.SGD(net.parameters(), lr=tb.LR, momentum=tb.MOMENTUM)


class Clock:
    """The first step's start, from the process's (BENCH_T0), and each epoch's samples/s."""

    def __init__(self, wait: Callable[[], None] = lambda: None) -> None:
        self.t0 = float(os.environ.get("BENCH_T0") or time.time())
        self.first: float | None = None
        self.rates: list[float] = []
        self.wait = wait  # the device done with the epoch's steps (CUDA: synchronize)
        self.began = 0.0

    def step(self) -> None:
        if self.first is None:
            self.first = time.time() - self.t0

    def epoch_start(self) -> None:
        self.began = time.perf_counter()

    def epoch_end(self, samples: int) -> None:
        self.wait()
        self.rates.append(samples / (time.perf_counter() - self.began))

    def report(self, **extra: Any) -> None:
        rate = self.rates[1] if len(self.rates) > 1 else self.rates[-1]
        figures = {"samples_per_s": rate, "first_step": self.first, "rates": self.rates}
        print(json.dumps({**figures, **extra}), flush=True)


def waiter(device: str) -> Callable[[], None]:
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def own_loop(
    model: Any, opt: Any, train: Any, backward: Callable, args: argparse.Namespace
) -> Clock:
    """The loop a user writes around Fabric or accelerate: zero_grad, forward, the
    cross-entropy, the library's backward, step; timed by epoch."""
    import torch.nn.functional as F

    clock = Clock(waiter(args.device))
    for _epoch in range(args.epochs):
        clock.epoch_start()
        for images, labels in train:
            clock.step()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(images), labels)
            backward(loss)
            opt.step()
        clock.epoch_end(len(train) * args.batch_size)
    return clock
