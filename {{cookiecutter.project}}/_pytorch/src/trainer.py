"""The training loop: the dataset held on the device, deterministic shards, checkpoints, record."""

from __future__ import annotations

import logging
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from src.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from src.config import Config
from src.distributed import Context, average
from src.mnist import Split, load_mnist, synthetic_mnist
from src.model import LeNet
from src.record import RunRecord
from src.sharding import rank_batches

log = logging.getLogger(__name__)

# MNIST's pixel mean and standard deviation, as in PyTorch's own MNIST example.
MEAN, STD = 0.1307, 0.3081
EVAL_BATCH = 1000
SMOKE_STEPS = 2


def to_device(split: Split, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Images as normalised float (N, 1, 28, 28) and labels, on the device, once.

    Batches are then cut from these tensors by index: no per-sample Python,
    no DataLoader, no host-to-device copy inside the training loop.
    """
    # Copy uint8 and convert on the device: a quarter of the bytes to move.
    images = torch.from_numpy(split.images).to(device)
    images = images.unsqueeze(1).float().div_(255).sub_(MEAN).div_(STD)
    return images, torch.from_numpy(split.labels).to(device)


@torch.no_grad()
def evaluate(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Mean loss and accuracy of model on the whole of (images, labels)."""
    model.eval()
    loss = torch.zeros((), device=images.device)
    correct = torch.zeros((), device=images.device, dtype=torch.long)
    for start in range(0, len(labels), EVAL_BATCH):
        logits = model(images[start : start + EVAL_BATCH])
        target = labels[start : start + EVAL_BATCH]
        loss += F.cross_entropy(logits, target, reduction="sum")
        correct += (logits.argmax(dim=1) == target).sum()
    return {"loss": loss.item() / len(labels), "accuracy": correct.item() / len(labels)}


def train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    images: torch.Tensor,
    labels: torch.Tensor,
    batches: torch.Tensor,
) -> torch.Tensor:
    """One pass over the rows of batches (sample indices); return the mean loss."""
    model.train()
    loss_sum = torch.zeros((), device=images.device)
    for index in batches:
        loss = F.cross_entropy(model(images[index]), labels[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        # Summed on the device: reading .item() every step would stall a GPU.
        loss_sum += loss.detach()
    return loss_sum / len(batches)


def _datasets(cfg: Config, ctx: Context) -> tuple[Split, Split]:
    if cfg.smoke:
        # A few steps of random data: exercises every part of a run in seconds.
        num_train = SMOKE_STEPS * cfg.batch_size * ctx.world_size
        return synthetic_mnist(num_train, cfg.batch_size, cfg.seed)
    return load_mnist(cfg.data_dir)


def _resume(
    cfg: Config, net: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device
) -> tuple[int, int]:
    """The epochs done and the data-order seed: from cfg.resume, else 0 and cfg.seed."""
    if cfg.resume is None:
        return 0, cfg.seed
    done, seed = load_checkpoint(cfg.resume, net, optimizer, device)
    if seed != cfg.seed:
        # The data order must continue as it began for the run to match an unbroken one.
        log.warning("continuing with the checkpoint's seed %d, not %d", seed, cfg.seed)
    log.info("resumed from %s after epoch %d", cfg.resume, done)
    return done, seed


def train(cfg: Config, ctx: Context) -> dict[str, float]:
    """Train for cfg.epoch_size epochs (continuing cfg.resume); return the last test metrics."""
    device = ctx.device
    train_set, test_set = _datasets(cfg, ctx)
    train_x, train_y = to_device(train_set, device)
    test_x, test_y = to_device(test_set, device)

    # The same seed on every rank gives the same initial weights everywhere.
    torch.manual_seed(cfg.seed)
    net = LeNet().to(device)
    if device.type == "cpu":
        # oneDNN's CPU convolutions and pooling run markedly faster on NHWC weights.
        net = net.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(net.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    done, seed = _resume(cfg, net, optimizer, device)
    model = net
    if ctx.world_size > 1:
        # DDP averages the gradients over the ranks after every backward pass.
        model = DistributedDataParallel(
            net, device_ids=None if device.type == "cpu" else [device.index]
        )

    record = RunRecord(cfg.output_dir, enabled=ctx.is_main, append=cfg.resume is not None)
    global_batch = cfg.batch_size * ctx.world_size
    launch = {"seed": seed, "world_size": ctx.world_size, "global_batch_size": global_batch}
    record.log_hparams(cfg.hparams() | launch | {"device": str(device)})
    log.info("training on %d x %s, %d samples", ctx.world_size, device, len(train_y))

    if done >= cfg.epoch_size:
        log.info("the checkpoint holds %d epochs already: nothing to train", done)
        return evaluate(net, test_x, test_y)
    for epoch in range(done + 1, cfg.epoch_size + 1):
        batches = rank_batches(len(train_y), cfg.batch_size, ctx.world_size, ctx.rank, seed, epoch)
        indices = torch.from_numpy(batches).to(device)
        start = time.perf_counter()
        loss = train_epoch(model, optimizer, train_x, train_y, indices)
        # .item() waits for the device: the time covers the work, not just its launch.
        train_loss = average(loss, ctx).item()
        elapsed = time.perf_counter() - start
        step = epoch * len(indices)
        throughput = len(indices) * global_batch / elapsed
        record.log("train", {"loss": train_loss, "samples_per_s": throughput}, step, epoch)

        # Every rank evaluates the whole test set: cheap, and no gather needed.
        test = evaluate(net, test_x, test_y)
        record.log("test", test, step, epoch)
        log.info(
            "epoch %d/%d  train loss %.4f  %.0f samples/s  test loss %.4f  accuracy %.4f",
            epoch,
            cfg.epoch_size,
            train_loss,
            throughput,
            test["loss"],
            test["accuracy"],
        )
        if ctx.is_main:
            path = save_checkpoint(
                checkpoint_path(cfg.output_dir, epoch), net, optimizer, epoch, seed
            )
            record.add_artifact(path)
    return test
