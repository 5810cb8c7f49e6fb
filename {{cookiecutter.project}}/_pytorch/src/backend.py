"""PyTorch's side of a run (src/backend_api.py): device, process group, LeNet, the
training step, evaluation and checkpoints as state_dicts."""

from __future__ import annotations

import gc
import os
import pickle
import time
import zipfile
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from src import distributed, pretrained
from src.backend_api import BatchPlan, EpochEnd
from src.config import Config
from src.errors import CheckpointError
from src.mnist import Split, Splits
from src.model import LeNet
from src.precision import choose

# MNIST's pixel mean and standard deviation, as in PyTorch's own MNIST example.
MEAN, STD = 0.1307, 0.3081
EVAL_BATCH = 1000
CHECKPOINT_SUFFIX = ".pt"
# The output layer: the one to --skip_layers when fine-tuning to another number of classes.
HEAD = "classifier.5"
# What torch.load and load_state_dict raise for a file that is not our checkpoint.
LOAD_ERRORS = (OSError, EOFError, RuntimeError, KeyError, TypeError, ValueError)


def _cpu_count() -> int:
    # The CPUs this process may use: fewer than the machine's in a container with a cpuset.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class TorchBackend:
    """LeNet trained with SGD, the data held on the device, DDP across ranks."""

    name = "pytorch"
    suffix = CHECKPOINT_SUFFIX
    scheduler_only = False

    def __init__(self, cfg: Config) -> None:
        place = distributed.placement()
        self.rank, self.world_size = place.rank, place.world_size
        self.torch_device = distributed.pick_device(cfg.device_target, place.device_index)
        self.device = str(self.torch_device)
        if self.torch_device.type == "cpu" and place.local_world_size > 1:
            # Each process would otherwise start a thread per CPU: N times oversubscribed.
            torch.set_num_threads(max(1, _cpu_count() // place.local_world_size))
        distributed.join(place, self.torch_device)
        # The same seed on every rank gives the same initial weights everywhere.
        torch.manual_seed(cfg.seed)
        self.net = LeNet(cfg.num_classes).to(self.torch_device)
        self.channels_last = self.torch_device.type == "cpu"
        if self.channels_last:
            # oneDNN's CPU convolutions and pooling run markedly faster on NHWC weights.
            self.net = self.net.to(memory_format=torch.channels_last)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        self.model: torch.nn.Module = self.net
        if self.world_size > 1:
            # DDP averages the gradients over the ranks after every backward pass.
            ids = None if self.torch_device.type == "cpu" else [self.torch_device.index]
            self.model = DistributedDataParallel(self.net, device_ids=ids)
        self.precision = choose(cfg.amp, self.torch_device)
        self.scaler = self.precision.scaler()
        self.data: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def describe(self) -> dict[str, Any]:
        return {"amp": self.precision.name, "channels_last": self.channels_last}

    def _to_device(self, split: Split) -> tuple[torch.Tensor, torch.Tensor]:
        # Copy uint8 and convert on the device: a quarter of the bytes to move. Batches
        # are then cut by index: no DataLoader, no host-to-device copy per step.
        images = torch.from_numpy(split.images).to(self.torch_device)
        images = images.unsqueeze(1).float().div_(255).sub_(MEAN).div_(STD)
        return images, torch.from_numpy(split.labels).to(self.torch_device)

    def load_data(self, splits: Splits) -> None:
        self.data = {name: self._to_device(getattr(splits, name)) for name in splits.__dict__}

    def _epoch(self, batches: torch.Tensor) -> torch.Tensor:
        """One pass over the rows of batches (sample indices); return the mean loss."""
        images, labels = self.data["train"]
        self.model.train()
        loss_sum = torch.zeros((), device=self.torch_device)
        for index in batches:
            with self.precision.autocast():
                loss = F.cross_entropy(self.model(images[index]), labels[index])
            self.optimizer.zero_grad(set_to_none=True)
            if self.scaler is None:
                loss.backward()
                self.optimizer.step()
            else:
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            # Summed on the device: reading .item() every step would stall a GPU.
            loss_sum += loss.detach().float()
        return loss_sum / max(len(batches), 1)

    def fit(self, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
        for epoch in range(first, last + 1):
            indices = torch.from_numpy(plan.batches(epoch)).to(self.torch_device)
            start = time.perf_counter()
            loss = self._epoch(indices)
            # .item() waits for the device: the time covers the work, not just its launch.
            train_loss = distributed.average(loss, self.world_size).item()
            on_epoch_end(epoch, train_loss, time.perf_counter() - start)

    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        images, labels = self.data[split]
        self.net.eval()
        loss = torch.zeros((), device=self.torch_device)
        correct = torch.zeros((), device=self.torch_device, dtype=torch.long)
        for start in range(0, len(labels), EVAL_BATCH):
            with self.precision.autocast():
                logits = self.net(images[start : start + EVAL_BATCH]).float()
            target = labels[start : start + EVAL_BATCH]
            loss += F.cross_entropy(logits, target, reduction="sum")
            correct += (logits.argmax(dim=1) == target).sum()
        count = max(len(labels), 1)
        return {"loss": loss.item() / count, "accuracy": correct.item() / count}

    def save(self, path: Path, meta: dict[str, int]) -> None:
        state = {"model": self.net.state_dict(), "optimizer": self.optimizer.state_dict(), **meta}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        # Write then rename: a job killed mid-save leaves the previous checkpoint intact.
        tmp = path.with_name(f".{path.name}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)

    def _load(self, path: Path, what: str) -> dict[str, Any]:
        if not path.is_file():
            raise CheckpointError(f"{what} {path}: no such file")
        # torch.save writes a zip archive: anything else is not worth unpickling.
        if not zipfile.is_zipfile(path):
            raise CheckpointError(f"{what} {path} is not a PyTorch checkpoint")
        try:
            # weights_only: a checkpoint is data; never run code from a downloaded file.
            state = torch.load(path, map_location=self.torch_device, weights_only=True)
        except (*LOAD_ERRORS, pickle.UnpicklingError) as err:
            raise CheckpointError(f"{what} {path} cannot be read: {err}") from err
        if not isinstance(state, dict):
            raise CheckpointError(f"{what} {path} is not a checkpoint of this model")
        return state

    def restore(self, path: Path) -> dict[str, int]:
        state = self._load(path, "--resume")
        try:
            self.net.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.scaler is not None and "scaler" in state:
                self.scaler.load_state_dict(state["scaler"])
            return {"epoch": int(state["epoch"]), "seed": int(state["seed"])}
        except LOAD_ERRORS as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            raise CheckpointError(
                f"--resume {path} is not a checkpoint of this model: {reason}"
            ) from err

    def load_pretrained(self, path: Path, skip: tuple[str, ...]) -> None:
        state = self._load(path, "--pretrained")
        # Our checkpoints hold {"model": state_dict, ...}; others are a bare state_dict.
        weights = state.get("model", state)
        own = self.net.state_dict()
        shapes = {k: tuple(v.shape) for k, v in weights.items() if hasattr(v, "shape")}
        chosen = pretrained.select(path, {k: tuple(v.shape) for k, v in own.items()}, shapes, skip)
        own.update({key: weights[key] for key in chosen})
        self.net.load_state_dict(own)

    def close(self) -> None:
        # DDP's reducer holds the process group: without it, leave() ends the group's threads.
        self.model = self.net
        gc.collect()
        distributed.leave()


def create(cfg: Config) -> TorchBackend:
    return TorchBackend(cfg)


def load_arrays(path: Path) -> dict[str, Any]:
    """The model weights a checkpoint holds, as numpy arrays (for tests and tools)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: tensor.numpy() for name, tensor in state["model"].items()}
