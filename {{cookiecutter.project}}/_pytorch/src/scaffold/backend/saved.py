"""PyTorch's checkpoint files: what torch.save wrote, read back safely (weights only), and
what a checkpoint records besides its state (read_meta) for the commands that read it."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from src.scaffold.data.splits import CHECKPOINT_META
from src.scaffold.errors import CheckpointError

CHECKPOINT_SUFFIX = ".pt"
# What a checkpoint carries besides the model's and optimizer's state (read_meta).
META = ("epoch", "seed", *CHECKPOINT_META)
# What torch.load and load_state_dict raise for a file that is not our checkpoint.
LOAD_ERRORS = (OSError, EOFError, RuntimeError, KeyError, TypeError, ValueError)


def load_arrays(path: Path) -> dict[str, Any]:
    """The model weights a checkpoint holds, as numpy arrays (for tests and tools)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: tensor.numpy() for name, tensor in state["model"].items()}


def not_this_model(what: str, path: Path, err: Exception) -> CheckpointError:
    reason = " ".join(str(err).split()) or type(err).__name__
    return CheckpointError(f"{what} {path} is not a checkpoint of this model: {reason}")


def load_state(path: Path, what: str, device: Any = "cpu") -> dict[str, Any]:
    """What torch.save wrote to ``path``; one line naming the option ``what`` that gave the
    path when it is missing or not a checkpoint."""
    if not path.is_file():
        raise CheckpointError(f"{what} {path}: no such file")
    # torch.save writes a zip archive: anything else is not worth unpickling.
    if not zipfile.is_zipfile(path):
        raise CheckpointError(f"{what} {path} is not a PyTorch checkpoint")
    try:
        # weights_only: a checkpoint is data; never run code from a downloaded file.
        state = torch.load(path, map_location=device, weights_only=True)
    except (*LOAD_ERRORS, pickle.UnpicklingError) as err:
        raise CheckpointError(f"{what} {path} cannot be read: {err}") from err
    if not isinstance(state, dict):
        raise CheckpointError(f"{what} {path} is not a checkpoint of this model")
    return state


def read_meta(path: Path, what: str = "--checkpoint") -> dict[str, Any]:
    """What a checkpoint holds besides the state: epoch, seed, model_name, classes, the data's
    shape, format and normalisation (src/scaffold/data/splits.py's CHECKPOINT_META; a
    checkpoint from before they were kept has fewer)."""
    state = load_state(path, what)
    return {key: state[key] for key in META if key in state}
