"""Save and restore the training state as state_dicts, written atomically, loaded safely."""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import torch
from torch import nn

from src.errors import CheckpointError

# What torch.load and load_state_dict raise for a file that is not our checkpoint.
LOAD_ERRORS = (
    OSError,
    EOFError,
    RuntimeError,
    KeyError,
    TypeError,
    ValueError,
    pickle.UnpicklingError,
)


def checkpoint_path(output_dir: Path, epoch: int) -> Path:
    """Where the checkpoint taken after ``epoch`` goes."""
    return output_dir / f"lenet_epoch{epoch}.pt"


def save_checkpoint(
    path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int, seed: int
) -> Path:
    """Write model and optimizer state, the finished epoch and the seed to path."""
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "epoch": epoch,
        "seed": seed,
    }
    # Write then rename: a job killed mid-save leaves the previous checkpoint intact.
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(
    path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device
) -> tuple[int, int]:
    """Restore model and optimizer from path; return the finished epoch and the seed."""
    if not path.is_file():
        raise CheckpointError(f"--resume {path}: no such file")
    # torch.save writes a zip archive: anything else is not worth unpickling.
    if not zipfile.is_zipfile(path):
        raise CheckpointError(f"--resume {path} is not a PyTorch checkpoint")
    try:
        # weights_only: a checkpoint is data; never run code from a downloaded file.
        state = torch.load(path, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        return int(state["epoch"]), int(state["seed"])
    except LOAD_ERRORS as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise CheckpointError(
            f"--resume {path} is not a checkpoint of this model: {reason}"
        ) from err
