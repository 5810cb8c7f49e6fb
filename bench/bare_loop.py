"""The bare training loop, the limit train.py is measured against: the project's own model,
its loss, optimizer, learning rate, momentum and batch, the normalised training split already in
memory and each epoch's batches gathered before the clock starts; nothing else.

Run in its own process, as train.py is, so that both start from the same state:

    python bench/bare_loop.py pytorch|mindspore PROJECT DATA_DIR [--epochs 4]
        [--device cpu|cuda] [--batch-size 32]

--device cuda (PyTorch): the model, the data and every batch on the GPU, the steps under
bfloat16 autocast as train.py's defaults run them there (its channels_last is for the CPU
only); the clock stops once the device has finished the epoch's last step.

Prints the steady-state samples/s (the median of the epochs after the first) as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import trainbench as tb

Step = Callable[[object, object], object]


def torch_loop(
    images: np.ndarray, labels: np.ndarray, device: str = "cpu"
) -> tuple[Step, Callable, Callable]:
    """(step, batch maker, wait) for PyTorch, as train.py runs on the device: on the CPU the
    model in channels_last and float32; on a GPU the model and data there, bfloat16 autocast."""
    import contextlib

    import torch
    import torch.nn.functional as F
    from src.model import LeNet

    dev = torch.device(device)
    torch.manual_seed(tb.SEED)
    net = LeNet().to(dev)
    if dev.type == "cpu":
        net = net.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(net.parameters(), lr=tb.LR, momentum=tb.MOMENTUM)
    x = torch.from_numpy(images).to(dev).unsqueeze(1).float().div_(255).sub_(tb.MEAN)
    x = x.div_(tb.STD)
    y = torch.from_numpy(labels.astype(np.int64)).to(dev)

    def autocast() -> contextlib.AbstractContextManager:
        if dev.type == "cpu":
            return contextlib.nullcontext()
        return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)

    def step(batch_images: object, batch_labels: object) -> object:
        with autocast():
            loss = F.cross_entropy(net(batch_images), batch_labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    def batch(rows: np.ndarray) -> tuple[object, object]:
        index = torch.from_numpy(rows).to(dev)
        return x[index], y[index]

    def wait(loss: object) -> None:
        loss.item()  # type: ignore[attr-defined]
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    return step, batch, wait


def mindspore_loop(
    images: np.ndarray, labels: np.ndarray, device: str = "cpu"
) -> tuple[Step, Callable, Callable]:
    """(step, batch maker, wait) for MindSpore: TrainOneStepCell in graph mode, on the CPU."""
    import mindspore as ms
    from bare_ms import train_step

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ms.set_seed(tb.SEED)
    step = train_step(10, tb.LR, tb.MOMENTUM)
    x = ((images.astype(np.float32)[:, None] / 255 - tb.MEAN) / tb.STD).astype(np.float32)
    y = labels.astype(np.int32)

    def batch(rows: np.ndarray) -> tuple[object, object]:
        return ms.Tensor(x[rows]), ms.Tensor(y[rows])

    return step, batch, lambda loss: loss.asnumpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=("pytorch", "mindspore"))
    parser.add_argument("project", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="PyTorch")
    parser.add_argument("--batch-size", type=int, default=tb.BATCH_SIZE)
    args = parser.parse_args()

    sys.path.insert(0, str(args.project))
    images, labels = tb.training_split(tb.read_digits(args.data))
    loop = torch_loop if args.framework == "pytorch" else mindspore_loop
    step, batch, wait = loop(images, labels, args.device)
    size = args.batch_size
    steps = len(labels) // size
    rates = []
    for epoch in range(args.epochs):
        order = np.random.default_rng([tb.SEED, epoch]).permutation(len(labels))
        rows = order[: steps * size].reshape(steps, size)
        batches = [batch(row) for row in rows]
        start = time.perf_counter()
        for batch_images, batch_labels in batches:
            last = step(batch_images, batch_labels)
        wait(last)  # the last step done, not just launched
        rates.append(steps * size / (time.perf_counter() - start))
    print(json.dumps({"samples_per_s": statistics.median(rates[1:] or rates)}))


if __name__ == "__main__":
    main()
