"""The sharded loop a language-model project's train.py --shard full is measured against, written
as torchtitan writes its training loop (torchtitan/train.py, parallelize_llama's apply_fsdp):
each transformer block fully_shard-ed, then the root; AdamW; per step the forward, the
cross-entropy over the vocabulary, backward, the gradients clipped by their total norm, the
optimizer step and zero_grad. The model and optimizer are the project's own (src/model.py's gpt
at the sizes given, src/step.py's optimizer); each rank draws random windows of the token file
as nanoGPT's get_batch does.

    torchrun --nproc_per_node 2 bench/titan_loop.py PROJECT TOKENS --sizes layers=8,...
        [--steps 30] [--batch-size 32] [--block 128] [--lr 0.002]

Rank 0 prints, as JSON: tokens/s over every rank after WARMUP steps, and the bytes it holds of
parameters, gradients and optimizer state (the local parts of the DTensors).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

WARMUP = 5


def sizes(text: str) -> dict[str, int]:
    return {key: int(value) for key, value in (pair.split("=") for pair in text.split(","))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("tokens", type=Path, help="a byte file: its bytes are its tokens")
    parser.add_argument("--sizes", default="", help="model_args, as train.py's --model_args")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.002)
    args = parser.parse_args()

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.fsdp import fully_shard

    sys.path.insert(0, str(args.project))
    import yaml
    from src import model, step
    from src.scaffold.task import DataShape

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    config = yaml.safe_load((args.project / "config.yaml").read_text(encoding="utf-8"))
    options = {**config.get("model_args", {}), **(sizes(args.sizes) if args.sizes else {})}
    torch.manual_seed(0)
    net = model.gpt(DataShape((args.block,), 256), **options)
    for block in net.blocks:
        fully_shard(block)
    fully_shard(net)
    optimizer = step.optimizer(net.parameters(), args.lr)
    data = np.memmap(args.tokens, dtype=np.uint8, mode="r")
    generator = torch.Generator().manual_seed(1000 + rank)

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(data) - args.block, (args.batch_size,), generator=generator)
        x = torch.stack([torch.from_numpy(data[i : i + args.block].astype(np.int64)) for i in ix])
        y = torch.stack(
            [torch.from_numpy(data[i + 1 : i + 1 + args.block].astype(np.int64)) for i in ix]
        )
        return x, y

    held = {}
    began = 0.0
    for number in range(WARMUP + args.steps):
        if number == WARMUP:
            dist.barrier()
            began = time.perf_counter()
        inputs, labels = get_batch()
        logits = net(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        if number == 0:
            local = [p.to_local() if hasattr(p, "to_local") else p for p in net.parameters()]
            held = {"parameters": sum(p.nbytes for p in local)}
            held["gradients"] = held["parameters"]
        optimizer.step()
        optimizer.zero_grad()
    loss.item()
    dist.barrier()
    seconds = time.perf_counter() - began
    held["optimizer"] = sum(
        (v.to_local() if hasattr(v, "to_local") else v).nbytes
        for state in optimizer.state.values()
        for v in state.values()
        if isinstance(v, torch.Tensor) and v.dim() > 0
    )
    if rank == 0:
        tokens = args.steps * args.batch_size * args.block * world
        print(json.dumps({"tokens_per_s": tokens / seconds, "held": held, "ranks": world}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
