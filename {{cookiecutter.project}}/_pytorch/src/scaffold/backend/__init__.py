"""PyTorch's side of a run: this process's place and device (distributed), mixed precision,
the step's run (stepping), the batches (loader) and the Backend (core)."""

from __future__ import annotations

from typing import Any

# What a project of this framework imports to train (the launchers check it first).
FRAMEWORK = "torch"

__all__ = ["FRAMEWORK", "ProjectConfig", "start"]


def start() -> None:
    """What train.py and the other entry scripts do before torch is imported: nothing."""


def __getattr__(name: str) -> Any:
    # ProjectConfig, this framework's options, on first use: the launchers' check reads
    # FRAMEWORK with a Python that may lack what the options import.
    if name == "ProjectConfig":
        from src.scaffold.config import Config

        return Config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
