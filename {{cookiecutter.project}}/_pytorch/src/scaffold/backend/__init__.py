"""PyTorch's side of a run: place and device (distributed), precision, stepping, loader, core."""

from __future__ import annotations

from typing import Any

FRAMEWORK = "torch"  # what a project of this framework imports to train (the launchers check it)

__all__ = ["FRAMEWORK", "ProjectConfig", "start"]


def start() -> None:
    """What train.py and the other entry scripts do before torch is imported: nothing."""


def __getattr__(name: str) -> Any:
    # ProjectConfig on first use: the launchers' check reads FRAMEWORK with a Python that may
    # lack what the options import.
    if name == "ProjectConfig":
        from src.scaffold.config import Config

        return Config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
