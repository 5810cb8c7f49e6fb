"""The loop a language-model project's train.py is measured against: nanoGPT's training loop
(karpathy/nanoGPT train.py, as it is written there: random windows cut from the token file's
memory map by get_batch, forward, cross-entropy, backward, the optimizer step, the gradients
set to None; the learning rate set each iteration), for PyTorch; MindSpore's bare loop (the
same batches through a compiled value_and_grad step) for MindSpore. The model and optimizer are
the project's own (src/model.py's gpt, src/step.py's optimizer) at config.yaml's sizes, so the
two differ only in the loop around them.

    python bench/nanogpt_loop.py pytorch|mindspore PROJECT TOKENS.bin [--steps 100]
        [--batch-size 32] [--block 128] [--lr 0.002]

Prints the steady-state tokens/s (the steps after the first WARMUP) as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import yaml

WARMUP = 10  # steps before the clock starts: allocation, MindSpore's compile


def project_parts(project: Path, block: int, vocabulary: int = 256):
    """The project's model at config.yaml's model_args, and its step module."""
    sys.path.insert(0, str(project))
    from src import model, step  # noqa: F401  (the project's own files)
    from src.scaffold.task import DataShape

    config = yaml.safe_load((project / "config.yaml").read_text(encoding="utf-8"))
    net = model.gpt(DataShape((block,), vocabulary), **config["model_args"])
    return net, step


def torch_loop(project: Path, data: np.ndarray, args: argparse.Namespace) -> float:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model, step = project_parts(project, args.block)
    optimizer = step.optimizer(model.parameters(), args.lr)
    block, batch_size = args.block, args.batch_size

    def get_batch():  # nanoGPT's, for the CPU
        ix = torch.randint(len(data) - block, (batch_size,))
        x = torch.stack([torch.from_numpy((data[i : i + block]).astype(np.int64)) for i in ix])
        y = torch.stack(
            [torch.from_numpy((data[i + 1 : i + 1 + block]).astype(np.int64)) for i in ix]
        )
        return x, y

    model.train()
    X, Y = get_batch()
    for iter_num in range(WARMUP + args.steps):
        if iter_num == WARMUP:
            start = time.perf_counter()
        for param_group in optimizer.param_groups:
            param_group["lr"] = args.lr
        logits = model(X)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), Y.view(-1), ignore_index=-1)
        X, Y = get_batch()  # the next batch while the step's work is queued, as nanoGPT does
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
    return args.steps * batch_size * block / (time.perf_counter() - start)


def mindspore_loop(project: Path, data: np.ndarray, args: argparse.Namespace) -> float:
    import mindspore as ms
    from mindspore import ops

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    net, step = project_parts(project, args.block)
    optimizer = step.optimizer(net.trainable_params(), args.lr)

    def forward(x, y):
        return step.loss(net(x), y)

    grad = ms.value_and_grad(forward, None, optimizer.parameters)

    @ms.jit
    def train_step(x, y):
        loss, grads = grad(x, y)
        return ops.depend(loss, optimizer(grads))

    rng = np.random.default_rng(0)
    block, batch_size = args.block, args.batch_size

    def get_batch():
        ix = rng.integers(0, len(data) - block, batch_size)
        x = np.stack([data[i : i + block] for i in ix]).astype(np.int64)
        y = np.stack([data[i + 1 : i + 1 + block] for i in ix]).astype(np.int32)
        return ms.Tensor(x), ms.Tensor(y)

    for iter_num in range(WARMUP + args.steps):
        if iter_num == WARMUP:
            start = time.perf_counter()
        train_step(*get_batch()).asnumpy()
    return args.steps * batch_size * block / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=["pytorch", "mindspore"])
    parser.add_argument("project", type=Path)
    parser.add_argument("tokens", type=Path, help="the token file (uint8 bytes)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.002)
    args = parser.parse_args()
    data = np.memmap(args.tokens, dtype=np.uint8, mode="r")
    loop = torch_loop if args.framework == "pytorch" else mindspore_loop
    print(json.dumps({"tokens_per_s": loop(args.project.resolve(), data, args)}))


if __name__ == "__main__":
    main()
