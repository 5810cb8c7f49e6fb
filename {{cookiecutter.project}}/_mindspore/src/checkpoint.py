"""MindSpore checkpoints: names, saving the training state, restoring it for --resume.

Both training loops write the same file: the network's and the optimizer's
parameters (momentum buffers and step count included) under their own names,
plus epoch_num, seed and sinks_per_epoch. Model.train's ModelCheckpoint counts
epoch_num in sinks, so the finished epochs are epoch_num // sinks_per_epoch.
"""

from __future__ import annotations

import os
from pathlib import Path

import mindspore as ms
from mindspore import nn

from src.errors import CheckpointError

PREFIX = "lenet"
# What load_checkpoint and load_param_into_net raise for a file that is not our checkpoint.
LOAD_ERRORS = (OSError, RuntimeError, ValueError, TypeError, KeyError)


def checkpoint_path(output_dir: Path, epoch: int, steps: int) -> Path:
    """Where the checkpoint after ``epoch`` goes, named as ModelCheckpoint names its files."""
    return output_dir / f"{PREFIX}-{epoch}_{steps}.ckpt"


def save_checkpoint(
    path: Path, net: nn.Cell, optimizer: nn.Optimizer, epoch: int, seed: int
) -> Path:
    """Write the network and optimizer parameters, the finished epoch and the seed to path."""
    # The optimizer's parameters include the network's: one entry per name.
    params = {p.name: p for p in (*net.get_parameters(), *optimizer.get_parameters())}
    append = {"epoch_num": epoch, "seed": seed, "sinks_per_epoch": 1}
    # Write then rename: a job killed mid-save leaves the previous checkpoint intact.
    tmp = path.with_name(f".{path.stem}.tmp.ckpt")
    ms.save_checkpoint(
        [{"name": name, "data": p} for name, p in params.items()], str(tmp), append_dict=append
    )
    os.replace(tmp, path)
    return path


def _scalar(params: dict, name: str) -> int:
    return int(params[name].asnumpy())


def load_checkpoint(path: Path, net: nn.Cell, optimizer: nn.Optimizer) -> tuple[int, int]:
    """Restore net and optimizer from path; return the finished epochs and the seed."""
    if not path.is_file():
        raise CheckpointError(f"--resume {path}: no such file")
    try:
        params = ms.load_checkpoint(str(path))
        epoch = _scalar(params, "epoch_num") // max(_scalar(params, "sinks_per_epoch"), 1)
        seed = _scalar(params, "seed")
        missing, _ = ms.load_param_into_net(net, params, strict_load=True)
        missing += ms.load_param_into_net(optimizer, params, strict_load=True)[0]
    except LOAD_ERRORS as err:
        reason = " ".join(str(err).split())[:300] or type(err).__name__
        raise CheckpointError(
            f"--resume {path} is not a checkpoint of this model: {reason}"
        ) from err
    if missing:
        raise CheckpointError(
            f"--resume {path} is not a checkpoint of this model: it lacks {', '.join(missing[:5])}"
        )
    return epoch, seed
