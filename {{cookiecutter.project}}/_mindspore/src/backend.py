"""MindSpore's side of a run (src/backend_api.py): device and process group, LeNet-5,
mixed precision, evaluation and checkpoints. The epochs themselves run in
src/train_loop.py: Model.train with callbacks, or a hand-written loop."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import mindspore as ms
from mindspore import nn
from mindspore.amp import auto_mixed_precision

from src import pretrained
from src.backend_api import BatchPlan, EpochEnd
from src.config_ext import MSConfig, sink_on
from src.dataset import normalised
from src.env import init_env
from src.errors import CheckpointError
from src.mnist import Split, Splits
from src.model import LeNet5, evaluate
from src.train_loop import LOOP, fit

CHECKPOINT_SUFFIX = ".ckpt"
# The output layer: the one to --skip_layers when fine-tuning to another number of classes.
HEAD = "fc3"
# Checkpoint entries that are bookkeeping, not weights or optimizer state.
META = ("epoch", "seed")
# What load_checkpoint and load_param_into_net raise for a file that is not our checkpoint.
LOAD_ERRORS = (OSError, RuntimeError, ValueError, TypeError, KeyError)


class MindSporeBackend:
    """LeNet-5 trained with Momentum; gradients averaged over the ranks (data parallel)."""

    name = "mindspore"
    suffix = CHECKPOINT_SUFFIX

    def __init__(self, cfg: MSConfig) -> None:
        ctx = init_env(cfg)
        # msrun's scheduler never gets here: its init() coordinates the job, then exits.
        self.scheduler_only = os.environ.get("MS_ROLE") == "MS_SCHED"
        self.rank, self.world_size, self.target = ctx.rank, ctx.group_size, ctx.device_target
        self.device = ctx.device_target
        if ctx.device_id is not None:
            self.device += f":{ctx.device_id}"
        self.cfg = cfg
        self.amp = cfg.amp == "true" or (cfg.amp == "auto" and self.target != "CPU")
        self.net = LeNet5(cfg.num_classes)
        if self.amp:
            # float16 compute; the loops then scale the loss dynamically and skip steps
            # whose gradients overflow.
            self.net = auto_mixed_precision(self.net, cfg.amp_level.upper())
        self.optimizer = nn.Momentum(self.net.trainable_params(), cfg.lr, cfg.momentum)
        self.sink = sink_on(cfg.dataset_sink_mode, self.target)
        if cfg.dataset_sink_mode == "true" and not self.sink:
            logging.getLogger(__name__).info(
                "MindSpore has no data sink on the CPU: training without it"
            )
        self.data: dict[str, Split] = {}

    def describe(self) -> dict[str, Any]:
        return {
            "train_loop": LOOP,
            "amp": self.cfg.amp_level.upper() if self.amp else "O0",
            "dataset_sink_mode": self.sink,
        }

    def load_data(self, splits: Splits) -> None:
        self.data = {name: normalised(getattr(splits, name)) for name in ("train", "val", "test")}

    def fit(self, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
        fit(self, first, last, plan, on_epoch_end)

    def evaluate(self, split: str) -> dict[str, float]:
        return evaluate(self.net, self.data[split].images, self.data[split].labels)

    def save(self, path: Path, meta: dict[str, int]) -> None:
        # The optimizer's parameters include the network's: one entry per name.
        params = {p.name: p for p in (*self.net.get_parameters(), *self.optimizer.get_parameters())}
        # Write then rename: a job killed mid-save leaves the previous checkpoint intact.
        tmp = path.with_name(f".{path.stem}.tmp.ckpt")
        entries = [{"name": name, "data": p} for name, p in params.items()]
        ms.save_checkpoint(entries, str(tmp), append_dict=dict(meta))
        os.replace(tmp, path)

    def _read(self, path: Path, what: str) -> dict[str, Any]:
        if not path.is_file():
            raise CheckpointError(f"{what} {path}: no such file")
        try:
            return ms.load_checkpoint(str(path))
        except LOAD_ERRORS as err:
            reason = " ".join(str(err).split())[:300] or type(err).__name__
            raise CheckpointError(f"{what} {path} cannot be read: {reason}") from err

    def restore(self, path: Path) -> dict[str, int]:
        params = self._read(path, "--resume")
        try:
            meta = {key: int(params.pop(key).asnumpy()) for key in META}
            missing, _ = ms.load_param_into_net(self.net, params, strict_load=True)
            missing += ms.load_param_into_net(self.optimizer, params, strict_load=True)[0]
        except LOAD_ERRORS as err:
            reason = " ".join(str(err).split())[:300] or type(err).__name__
            raise CheckpointError(
                f"--resume {path} is not a checkpoint of this model: {reason}"
            ) from err
        if missing:
            lacks = ", ".join(missing[:5])
            raise CheckpointError(
                f"--resume {path} is not a checkpoint of this model: it lacks {lacks}"
            )
        return meta

    def load_pretrained(self, path: Path, skip: tuple[str, ...]) -> None:
        params = self._read(path, "--pretrained")
        own = {p.name: tuple(p.shape) for p in self.net.trainable_params()}
        shapes = {k: tuple(v.shape) for k, v in params.items()}
        chosen = pretrained.select(path, own, shapes, skip)
        ms.load_param_into_net(self.net, {k: params[k] for k in chosen})

    def close(self) -> None:
        """MindSpore leaves its process group at exit."""


def create(cfg: MSConfig) -> MindSporeBackend:
    return MindSporeBackend(cfg)


def load_arrays(path: Path) -> dict[str, Any]:
    """The weights and optimizer state a checkpoint holds, as numpy arrays (tests, tools)."""
    params = ms.load_checkpoint(str(path))
    return {name: p.asnumpy() for name, p in params.items() if name not in META}
