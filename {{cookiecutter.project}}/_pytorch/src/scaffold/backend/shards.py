"""Sharded checkpoints (shard: full): each rank writes its shards with torch.distributed.checkpoint
into NAME.shards/, then rank 0 the small NAME.pt naming them (outputs/checkpoints.py); read back
on any number of ranks, or by one process (eval.py, predict.py, export.py): DCP reshards."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.distributed as dist

from src.scaffold.errors import CheckpointError
from src.scaffold.outputs import checkpoints

KEY = "sharded"  # in a sharded checkpoint's file: {"directory": NAME.shards, "world_size": N}


@contextlib.contextmanager
def _alone() -> Iterator[None]:
    """DCP's warning that one process reads or writes alone (eval.py, one rank): as meant."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def _state(net: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """The model's (and optimizer's) state by parameter name: each rank's shards of it."""
    from torch.distributed.checkpoint import state_dict as dcp_state

    options = dcp_state.StateDictOptions(ignore_frozen_params=True)  # LoRA's: init_from's
    if optimizer is None:
        return {"model": dcp_state.get_model_state_dict(net, options=options)}
    model, optim = dcp_state.get_state_dict(net, optimizer, options=options)  # state made
    return {"model": model, "optimizer": optim}


def save(
    path: Path,
    net: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    meta: dict[str, Any],
    needed: int,
) -> None:
    """Every rank's shards into ``path``'s NAME.shards, then ``path`` naming them (rank 0):
    through temporary names, so that a kill at any point leaves the checkpoints before."""
    import torch.distributed.checkpoint as dcp

    directory = checkpoints.shards_of(path)
    tmp = path.with_name(f".{directory.name}.tmp")
    rank = dist.get_rank() if dist.is_initialized() else 0
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    _barrier()
    try:
        with _alone():
            dcp.save(_state(net, optimizer), checkpoint_id=tmp)
    except Exception as err:
        shutil.rmtree(tmp, ignore_errors=True)
        for cause in (err, *getattr(err, "failures", {}).values()):  # DCP's, by rank
            if (full := checkpoints.disk_full(cause, path, needed)) is not None:
                raise full from err
        raise
    if rank == 0:  # DCP's coordinator: every rank's shards are written when its save returns
        shutil.rmtree(directory, ignore_errors=True)
        os.replace(tmp, directory)
        parts = {
            f"{directory.name}/{p.name}": p.stat().st_size for p in sorted(directory.iterdir())
        }
        world = dist.get_world_size() if dist.is_initialized() else 1
        index = {**meta, KEY: {"directory": directory.name, "world_size": world}}
        checkpoints.write(path, lambda tmp: torch.save(index, tmp), needed, parts)
    _barrier()  # the checkpoint whole before any rank goes on (or reads it)


def shapes(path: Path, state: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The model tensors a sharded checkpoint holds, by name, with their whole shapes."""
    from torch.distributed.checkpoint import FileSystemReader

    metadata = FileSystemReader(str(directory(path, state))).read_metadata()
    found = {}
    for key, item in metadata.state_dict_metadata.items():
        if key.startswith("model.") and hasattr(item, "size"):
            found[key[len("model.") :]] = tuple(item.size)
    return found


def directory(path: Path, state: dict[str, Any]) -> Path:
    """The shards' directory; one line where this torch cannot read them (before 2.2)."""
    if importlib.util.find_spec("torch.distributed.checkpoint") is None:
        raise CheckpointError(
            f"{path} is a sharded checkpoint, which torch {version('torch')} cannot read: "
            "read it with torch 2.6 or newer (export.py --format checkpoint makes one file)"
        )
    return path.parent / str(state[KEY]["directory"])


def load(
    path: Path,
    state: dict[str, Any],
    net: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    what: str,
) -> None:
    """The shards of the checkpoint ``path`` (its file's ``state``) into ``net`` (and the
    optimizer), sharded or whole, on this run's ranks."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import state_dict as dcp_state

    wanted = _state(net, optimizer)
    try:
        with _alone():
            dcp.load(wanted, checkpoint_id=directory(path, state))
    except Exception as err:  # checked intact: a checkpoint of another model or optimizer
        reason = " ".join(str(err).split())[:300] or type(err).__name__
        raise CheckpointError(f"{what} {path} cannot be read into this run: {reason}") from err
    # Not strict: a LoRA run's frozen weights are init_from's, in no checkpoint.
    options = dcp_state.StateDictOptions(strict=False)
    if optimizer is None:
        dcp_state.set_model_state_dict(net, wanted["model"], options=options)
    else:
        dcp_state.set_state_dict(
            net,
            optimizer,
            model_state_dict=wanted["model"],
            optim_state_dict=wanted["optimizer"],
            options=options,
        )


def whole(path: Path, state: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The model weights of a sharded checkpoint, whole, in this process (no model built)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader

    found = directory(path, state)
    metadata = FileSystemReader(str(found)).read_metadata()
    weights = {
        key: torch.empty(item.size, dtype=item.properties.dtype)
        for key, item in metadata.state_dict_metadata.items()
        if key.startswith("model.") and hasattr(item, "size")
    }
    nested = {"model": {key[len("model.") :]: value for key, value in weights.items()}}
    with _alone():
        dcp.load(nested, checkpoint_id=found)  # alone where no process group is
    return nested["model"]


def load_whole(net: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Whole tensors (--pretrained's), on every rank, into a sharded ``net``: each its shards."""
    from torch.distributed.checkpoint import state_dict as dcp_state

    options = dcp_state.StateDictOptions(full_state_dict=True, strict=False)
    dcp_state.set_model_state_dict(net, weights, options=options)
