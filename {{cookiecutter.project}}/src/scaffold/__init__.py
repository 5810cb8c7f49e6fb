"""The platform floor: what your files may use of it, in one place.

src/model.py, src/data.py and src/step.py are yours; train.py gathers them into a Task
and hands it to the floor, which never imports them. The floor's packages, each with
its own docstring: config (options), data (finding, reading and splitting data),
run (the loop around your step), outputs (checkpoints and the run record), storage
(the platforms' storage), backend (the framework: devices, batches, training).

Each name is imported from its module when first used: a script that needs one part of
the floor (the launchers' check) does not import the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

# What a researcher may use, and the module that holds each.
PUBLIC = {
    "Config": "src.scaffold.config",
    "DataShape": "src.scaffold.task",
    "Monitor": "src.scaffold.task",
    "Reader": "src.scaffold.data.readers",
    "Split": "src.scaffold.data.splits",
    "Task": "src.scaffold.task",
    "array_split": "src.scaffold.data.splits",
    "augment": "src.scaffold.data.readers",
    "image_input": "src.scaffold.task",
    "model": "src.scaffold.task",
    "reader": "src.scaffold.data.readers",
}

__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(PUBLIC[name]), name)
    globals()[name] = value
    return value
