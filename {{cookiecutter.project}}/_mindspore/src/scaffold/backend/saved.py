"""MindSpore's checkpoint files: what save_checkpoint wrote, read back with one line for a
file that is not one, and what a checkpoint records besides its state (read_meta) for the
commands that read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mindspore as ms

from src.scaffold.data.splits import CHECKPOINT_META
from src.scaffold.errors import CheckpointError

CHECKPOINT_SUFFIX = ".ckpt"
# Checkpoint entries that are bookkeeping, not weights or optimizer state: the numbers
# (PARTIAL: the batches of the next epoch a checkpoint_every one holds), and what
# describes the model and the data (strings; lists as JSON).
META = ("epoch", "seed")
PARTIAL = "batches"
DATA_META = CHECKPOINT_META
# Every entry that is not state.
BOOKKEEPING = (*META, PARTIAL, *DATA_META)
# What load_checkpoint and load_param_into_net raise for a file that is not our checkpoint.
LOAD_ERRORS = (OSError, RuntimeError, ValueError, TypeError, KeyError)


def load_arrays(path: Path) -> dict[str, Any]:
    """The weights and optimizer state a checkpoint holds, as numpy arrays (tests, tools)."""
    params = ms.load_checkpoint(str(path))
    return {name: p.asnumpy() for name, p in params.items() if name not in BOOKKEEPING}


def _reason(err: Exception) -> str:
    return " ".join(str(err).split())[:300] or type(err).__name__


def not_this_model(what: str, path: Path, err: Exception) -> CheckpointError:
    return CheckpointError(f"{what} {path} is not a checkpoint of this model: {_reason(err)}")


def load_params(path: Path, what: str) -> dict[str, Any]:
    """What save_checkpoint wrote to ``path``; one line naming the option ``what`` that gave
    the path when it is missing or not a checkpoint."""
    if not path.is_file():
        raise CheckpointError(f"{what} {path}: no such file")
    try:
        return ms.load_checkpoint(str(path))
    except LOAD_ERRORS as err:
        raise CheckpointError(f"{what} {path} cannot be read: {_reason(err)}") from err


def read_meta(path: Path, what: str = "--checkpoint") -> dict[str, Any]:
    """What a checkpoint holds besides the state: epoch, seed, model_name, classes, the data's
    shape, format and normalisation (src/scaffold/data/splits.py's CHECKPOINT_META; a
    checkpoint from before they were kept has fewer)."""
    params = load_params(path, what)
    meta: dict[str, Any] = {key: int(params[key].asnumpy()) for key in META if key in params}
    for key in DATA_META:
        value = params.get(key)
        if isinstance(value, str):
            meta[key] = _decoded(value)
    return meta


def _decoded(text: str) -> Any:
    """A meta entry as saved: JSON text; a checkpoint from before that holds a bare name."""
    try:
        return json.loads(text)
    except ValueError:
        return text
