"""MindSpore's checkpoint files read back, one line for a file that is not one; read_meta."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mindspore as ms

from src.scaffold.data.splits import CHECKPOINT_META
from src.scaffold.errors import CheckpointError
from src.scaffold.outputs.checkpoints import check_intact

CHECKPOINT_SUFFIX = ".ckpt"
# Entries that are not state: numbers (PARTIAL: the batches of the next epoch that a
# checkpoint_every checkpoint holds) and what describes the model and data (JSON text).
META = ("epoch", "seed")
PARTIAL = "batches"
BOOKKEEPING = (*META, PARTIAL, *CHECKPOINT_META)
# What load_checkpoint and load_param_into_net raise for a file that is not our checkpoint.
LOAD_ERRORS = (OSError, RuntimeError, ValueError, TypeError, KeyError)


def load_arrays(path: Path) -> dict[str, Any]:
    """The weights and optimizer state a checkpoint holds, as numpy arrays (tests, tools)."""
    params = ms.load_checkpoint(str(path))
    return {name: p.asnumpy() for name, p in params.items() if name not in BOOKKEEPING}


def _reason(err: Exception) -> str:
    return " ".join(str(err).split())[:300] or type(err).__name__


def not_this_model(what: str, path: Path, why: Exception | str) -> CheckpointError:
    reason = why if isinstance(why, str) else _reason(why)
    return CheckpointError(f"{what} {path} is not a checkpoint of this model: {reason}")


def load_params(path: Path, what: str) -> dict[str, Any]:
    """What save_checkpoint wrote to ``path``, else one line naming the option ``what``."""
    if not path.is_file():
        raise CheckpointError(f"{what} {path}: no such file")
    check_intact(path, what)
    try:
        return ms.load_checkpoint(str(path))
    except LOAD_ERRORS as err:
        raise CheckpointError(f"{what} {path} cannot be read: {_reason(err)}") from err


def read_meta(path: Path, what: str = "--checkpoint") -> dict[str, Any]:
    """What a checkpoint holds besides the state: epoch, seed, CHECKPOINT_META (older: fewer)."""
    params = load_params(path, what)
    meta: dict[str, Any] = {key: int(params[key].asnumpy()) for key in META if key in params}
    for key in CHECKPOINT_META:
        value = params.get(key)
        if isinstance(value, str):
            try:
                meta[key] = json.loads(value)
            except ValueError:  # saved before entries were JSON: a bare name
                meta[key] = value
    return meta
