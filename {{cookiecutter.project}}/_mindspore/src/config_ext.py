"""MindSpore's own training options: src/config.py adds them to the shared ones."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from src.config import Config, Options

CONTEXT_MODES = ("graph", "pynative")


@dataclass(frozen=True)
class MSConfig(Config):
    """The options of one MindSpore training run."""

    # graph compiles the network once (faster); pynative runs it op by op (easier to debug).
    context_mode: str = "graph"
    # Model.train only: feed the device whole sinks of steps, not one step at a time.
    dataset_sink_mode: bool = False
    # Steps per sink; -1 is a whole epoch. Model.train counts a sink as one of its epochs.
    sink_size: int = -1
    # A static loss scale; 1 disables scaling. Useful with float16 on Ascend.
    loss_scale: float = 1.0
    # None: from the launcher (RANK_SIZE, set by msrun and Ascend rank tables), else 1.
    device_num: int | None = None
    # None: DEVICE_ID if set, else MindSpore's choice (msrun assigns one per process).
    device_id: int | None = None


def _choice(allowed: tuple[str, ...]) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text.lower() not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(allowed)}")
        return text.lower()

    return convert


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _at_least(minimum: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        value = _whole(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text} must be at least {minimum}")
        return value

    return convert


def _sink_size(text: str) -> int:
    value = _whole(text)
    if value != -1 and value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be -1 (a whole epoch) or at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0")
    return value


EXTRA_OPTIONS: Options = {
    "context_mode": (_choice(CONTEXT_MODES), "graph (compiled) or pynative (eager)"),
    "dataset_sink_mode": (_bool, "Model.train: sink data to the device (true or false)"),
    "sink_size": (_sink_size, "Model.train: steps per sink, -1 for a whole epoch"),
    "loss_scale": (_positive_float, "static loss scale (1 = none)"),
    "device_num": (_at_least(1), "devices in the job (default: RANK_SIZE, else 1)"),
    "device_id": (_at_least(0), "this process's device (default: DEVICE_ID)"),
}

CONFIG_CLASS = MSConfig
