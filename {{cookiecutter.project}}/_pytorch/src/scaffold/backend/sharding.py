"""shard: full (config.yaml): the model, its gradients and optimizer state split over the ranks
with FSDP2 (torch.distributed.fsdp.fully_shard, torchtitan's way): each block @model names its
own shard, then the rest at the root; bfloat16 parameters with float32 reductions under amp."""

from __future__ import annotations

import functools
import logging
from importlib.metadata import version
from typing import Any

import torch

from src.scaffold.backend.precision import Precision
from src.scaffold.errors import ConfigError
from src.scaffold.task import ModelSpec

log = logging.getLogger(__name__)


def blocks_of(net: torch.nn.Module, spec: ModelSpec) -> list[torch.nn.Module]:
    """The modules @model(blocks=...) names (a dotted attribute path); [] where it names none."""
    if not spec.blocks:
        return []
    found: Any = net
    for part in spec.blocks.split("."):
        found = getattr(found, part, None)
    if isinstance(found, list) and found:  # a property's list (hf.py's Pretrained.blocks)
        return found
    if not isinstance(found, torch.nn.Module) or not list(found.children()):
        raise ConfigError(
            f"model {spec.name}: @model(blocks={spec.blocks!r}) names no list of modules of it "
            f"({spec.where}): give the attribute holding its repeated blocks"
        )
    return list(found.children())


def checkpointed(block: torch.nn.Module) -> None:
    """The block's activations recomputed in the backward pass, not kept (its names as they
    were: checkpoints of either setting load into the other)."""
    from torch.utils.checkpoint import checkpoint

    forward = block.forward
    block.forward = functools.wraps(forward)(  # type: ignore[method-assign]
        lambda *args, **kwargs: checkpoint(forward, *args, use_reentrant=False, **kwargs)
    )


def wrap(net: torch.nn.Module, spec: ModelSpec, precision: Precision, recompute: bool) -> None:
    """``net`` sharded in place over the process group's ranks (its parameters DTensors)."""
    import torch.distributed.fsdp as fsdp

    if not hasattr(fsdp, "fully_shard"):  # FSDP2's: public from torch 2.6
        raise ConfigError(
            f"shard: full needs torch 2.6 or newer (FSDP2), and this is torch {version('torch')}:"
            " use an image with a newer torch (images/catalog.yaml), or shard.mode none"
        )
    MixedPrecisionPolicy, fully_shard = fsdp.MixedPrecisionPolicy, fsdp.fully_shard

    blocks = blocks_of(net, spec)
    if not blocks:
        log.warning(
            "model %s names no blocks: it is sharded whole, gathered at once in each forward; "
            'name them, @model(..., blocks="layers") for its list of layers (%s)',
            *(spec.name, spec.where),
        )
    # float16 keeps autocast and its GradScaler (precision.py): FSDP2's policy is bfloat16's.
    policy = MixedPrecisionPolicy()
    if precision.dtype == torch.bfloat16:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in blocks:
        if recompute:
            checkpointed(block)
        fully_shard(block, mp_policy=policy)
    fully_shard(net, mp_policy=policy)


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a tensor: a DTensor's shard, else the tensor."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor: a DTensor gathered from every rank (collective), else the tensor."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def state_bytes(net: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """The bytes this rank holds of parameters, gradients (at their peak, before the step
    clears them: one a trained parameter) and optimizer state (its shards, once stepped)."""
    params = list(net.parameters())
    held = {
        "parameters": sum(local(p).nbytes for p in params),
        "gradients": sum(local(p).nbytes for p in params if p.requires_grad),
        "optimizer": sum(
            local(v).nbytes
            for state in optimizer.state.values()
            for v in state.values()
            if isinstance(v, torch.Tensor) and v.dim() > 0
        ),
    }
    return held


def say(net: torch.nn.Module, optimizer: Any, rank: int, world_size: int, options: Any) -> None:
    """The log's line of what this rank holds (``state_bytes``), after its first step."""
    mode, held = options.shard.mode, state_bytes(net, optimizer)
    split = f"split over {world_size} ranks" if mode == "full" and world_size > 1 else "whole"
    parts = ", ".join(f"{name} {value / 2**20:,.2f} MiB" for name, value in held.items())
    log.info("rank %d holds %s (shard: %s, %s)", rank, parts, mode, split)


def apply(
    net: torch.nn.Module, spec: ModelSpec, precision: Precision, shard: Any, collective: bool
) -> None:
    """shard: full: the model split over the ranks; activation_checkpointing either way."""
    recompute = shard.activation_checkpointing
    if collective:
        wrap(net, spec, precision, recompute)
        return
    if shard.mode == "full":
        log.info(
            "shard: full with one rank: it trains unsharded; its checkpoints are sharded "
            "ones all the same, which any number of ranks resume"
        )
    for block in blocks_of(net, spec) if recompute else ():
        checkpointed(block)
