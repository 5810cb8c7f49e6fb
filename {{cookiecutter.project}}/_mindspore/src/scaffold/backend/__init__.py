"""MindSpore's side of a run: the device and process group (context), this framework's
options, the batches (loader), the training loop (train_loop) and the Backend (core)."""

from __future__ import annotations

from typing import Any

# What a project of this framework imports to train (the launchers check it first).
FRAMEWORK = "mindspore"

__all__ = ["FRAMEWORK", "ProjectConfig", "start"]


def start() -> None:
    """What train.py and the other entry scripts do before numpy and MindSpore are imported
    (they start threads): Ctrl-C kept as SIGINT (sigint.py)."""
    from src.scaffold.backend.sigint import take_sigint

    take_sigint()


def __getattr__(name: str) -> Any:
    # ProjectConfig, this framework's options, on first use: the launchers' check reads
    # FRAMEWORK with a Python that may lack what the options import.
    if name == "ProjectConfig":
        from src.scaffold.backend.options import MSConfig

        return MSConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
