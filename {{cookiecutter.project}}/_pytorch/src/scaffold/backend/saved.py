"""PyTorch's checkpoint files, read back safely (weights only), and their meta (read_meta)."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from src.scaffold.backend import shards
from src.scaffold.data.splits import CHECKPOINT_META
from src.scaffold.errors import CheckpointError
from src.scaffold.outputs.checkpoints import check_intact

CHECKPOINT_SUFFIX = ".pt"
META = ("epoch", "seed", *CHECKPOINT_META)  # what a checkpoint holds besides the state
LOAD_ERRORS = (OSError, EOFError, RuntimeError, KeyError, TypeError, ValueError)  # not ours


def load_arrays(path: Path) -> dict[str, Any]:
    """The model weights a checkpoint holds, as numpy arrays (for tests and tools)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    weights = shards.whole(path, state) if shards.KEY in state else state["model"]
    return {name: tensor.numpy() for name, tensor in weights.items()}


def nbytes(value: Any) -> int:
    """The bytes of the tensors in ``value`` (nested dicts and lists): a checkpoint's size."""
    if isinstance(value, torch.Tensor):
        return value.nelement() * value.element_size()
    if isinstance(value, dict):
        value = list(value.values())
    return sum(map(nbytes, value)) if isinstance(value, (list, tuple)) else 0


def not_this_model(what: str, path: Path, err: Exception) -> CheckpointError:
    reason = " ".join(str(err).split()) or type(err).__name__
    return CheckpointError(f"{what} {path} is not a checkpoint of this model: {reason}")


def load_state(path: Path, what: str, device: Any = "cpu") -> dict[str, Any]:
    """What torch.save wrote to ``path``; one line naming the option ``what`` if it cannot."""
    if not path.is_file():
        raise CheckpointError(f"{what} {path}: no such file")
    check_intact(path, what)
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
    """META: epoch, seed and data/splits.py's CHECKPOINT_META (fewer in an older checkpoint)."""
    state = load_state(path, what)
    return {key: state[key] for key in META if key in state}
