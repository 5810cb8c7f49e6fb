"""The platform floor: what your files may use of it, each name imported when first used (a
script that needs one part of the floor, the launchers' check, does not import the rest)."""

import importlib
from typing import Any

# What a researcher may use, and the module that holds each.
PUBLIC = {
    "Config": "src.scaffold.config",
    **dict.fromkeys(("DataShape", "Monitor", "Task", "image_input", "model"), "src.scaffold.task"),
    **dict.fromkeys(("Reader", "augment", "reader"), "src.scaffold.data.readers"),
    **dict.fromkeys(("Split", "array_split"), "src.scaffold.data.splits"),
    **dict.fromkeys(
        ("ByteTokenizer", "CharTokenizer", "tokenizer_from"), "src.scaffold.data.tokens"
    ),
    **dict.fromkeys(("prepared", "text_files", "windows"), "src.scaffold.data.corpus"),
}

__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(PUBLIC[name]), name)
    globals()[name] = value
    return value
