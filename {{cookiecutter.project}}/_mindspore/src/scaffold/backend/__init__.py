"""MindSpore's side of a run: context, options, loader, train_loop and the Backend (core)."""

from __future__ import annotations

from typing import Any

# What a project of this framework imports to train (the launchers check it first).
FRAMEWORK = "mindspore"

__all__ = ["FRAMEWORK", "ProjectConfig", "start"]


def start() -> None:
    """Before numpy and MindSpore start threads: Ctrl-C kept as SIGINT (sigint.py)."""
    from src.scaffold.backend.sigint import take_sigint

    take_sigint()


def __getattr__(name: str) -> Any:
    # On first use: the launchers read FRAMEWORK with a Python that may lack MindSpore.
    if name == "ProjectConfig":
        from src.scaffold.backend.options import MSConfig

        return MSConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
