"""shard.activation_checkpointing: each block @model(blocks=...) names recomputes its activations
in the backward pass rather than keeping them, MindSpore's recomputation (Cell.recompute():
https://www.mindspore.cn/docs/en/r2.10.0/api_python/nn/mindspore.nn.Cell.html#mindspore.nn.Cell.recompute)."""

from __future__ import annotations

import logging
from typing import Any

from mindspore import nn

from src.scaffold.errors import ConfigError
from src.scaffold.task import ModelSpec

log = logging.getLogger(__name__)


def blocks_of(net: nn.Cell, spec: ModelSpec) -> list[nn.Cell]:
    """The cells @model(blocks=...) names (a dotted attribute path); [] where it names none."""
    if not spec.blocks:
        return []
    found: Any = net
    for part in spec.blocks.split("."):
        found = getattr(found, part, None)
    if not isinstance(found, nn.Cell) or not list(found.cells()):
        raise ConfigError(
            f"model {spec.name}: @model(blocks={spec.blocks!r}) names no list of cells of it "
            f"({spec.where}): give the attribute holding its repeated blocks"
        )
    return list(found.cells())


def apply(net: nn.Cell, spec: ModelSpec, on: bool) -> None:
    """Each named block recomputed where ``on``; a WARNING where the model names none."""
    if not on:
        return
    blocks = blocks_of(net, spec)
    if not blocks:
        log.warning(
            "activation_checkpointing: model %s names no blocks to recompute, so nothing is: "
            'name them in src/model.py, @model(..., blocks="blocks") (%s)',
            spec.name,
            spec.where,
        )
    for block in blocks:
        block.recompute()
