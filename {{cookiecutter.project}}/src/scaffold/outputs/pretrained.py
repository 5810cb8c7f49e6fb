"""Pretrained weights in (fine-tuning starts at epoch 1); --skip_layers (a name or prefix) keep
their fresh initialisation, so a model with another number of classes can start from it."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence, Tuple

from src.scaffold.errors import CheckpointError

Shapes = Mapping[str, Tuple[int, ...]]


def find_file(location: Path, suffix: str, explicit: bool) -> Path | None:
    """``location`` or the only ``*suffix`` file in it; None: an empty folder not asked for."""
    if location.is_file():
        return location
    found = sorted(p for p in location.rglob(f"*{suffix}") if p.is_file())
    if len(found) == 1:
        return found[0]
    if not found:
        if not explicit:
            return None
        missing = "no such file" if not location.exists() else f"no *{suffix} file in it"
        raise CheckpointError(f"--pretrained {location}: {missing}")
    names = ", ".join(str(p.relative_to(location)) for p in found[:5])
    raise CheckpointError(
        f"{location} holds several checkpoints ({names}): choose one with --pretrained FILE"
    )


def _skipped(key: str, skip: Sequence[str]) -> bool:
    return any(key == layer or key.startswith(f"{layer}.") for layer in skip)


def select(path: Path, model: Shapes, checkpoint: Shapes, skip: Sequence[str]) -> list[str]:
    """The names to copy from the checkpoint; CheckpointError names the first misfit layer."""
    unknown = [layer for layer in skip if not any(_skipped(k, [layer]) for k in model)]
    if unknown:
        raise CheckpointError(
            f"--skip_layers {', '.join(unknown)}: the model has no such layer "
            f"(it has {', '.join(sorted({k.rsplit('.', 1)[0] for k in model}))})"
        )
    chosen = []
    for key, shape in model.items():
        if _skipped(key, skip):
            continue
        if key not in checkpoint:
            raise CheckpointError(
                f"--pretrained {path}: it has no {key}; is it a checkpoint of this model?"
            )
        if tuple(checkpoint[key]) != tuple(shape):
            layer = key.rsplit(".", 1)[0]
            raise CheckpointError(
                f"--pretrained {path}: layer {layer} has shape {tuple(checkpoint[key])} there "
                f"but {tuple(shape)} in the model; pass --skip_layers {layer} to train it afresh"
            )
        chosen.append(key)
    return chosen
