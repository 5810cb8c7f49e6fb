"""MindSpore's own training options: src/scaffold/config.py adds them to the shared ones."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from src.scaffold.config import SWITCH, Config, Option, choice, integer, number

CONTEXT_MODES = ("graph", "pynative")
AMP_LEVELS = ("o1", "o2", "o3")


def _sink_size(text: str) -> int:
    value = integer()(text)
    if value != -1 and value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be -1 (a whole epoch) or at least 1")
    return value


@dataclass(frozen=True)
class MSConfig(Config):
    """The options of one MindSpore training run."""

    # graph compiles the network once (faster); pynative runs it op by op (easier to debug).
    context_mode: str = "graph"
    # Feed the device whole sinks of steps: auto is on for Ascend, where it pays.
    dataset_sink_mode: str = "auto"
    # Steps per sink; -1 is a whole epoch.
    sink_size: int = -1
    # With amp: O2 keeps BatchNorm in float32, O3 casts everything to float16.
    amp_level: str = "o2"
    # A static loss scale without amp (1 disables it); with amp the scale is dynamic.
    loss_scale: float = 1.0
    # None: from the launcher (RANK_SIZE, set by msrun and Ascend rank tables), else 1.
    device_num: int | None = None
    # None: DEVICE_ID if set, else MindSpore's choice (msrun assigns one per process).
    device_id: int | None = None


EXTRA_OPTIONS = {
    "context_mode": Option(choice(*CONTEXT_MODES), "graph (compiled) or pynative (eager)"),
    "dataset_sink_mode": Option(choice(*SWITCH), "sink data to the device: auto (Ascend), true"),
    "sink_size": Option(_sink_size, "steps per sink, -1 for a whole epoch"),
    "amp_level": Option(choice(*AMP_LEVELS), "mixed precision level when amp is on: o1, o2, o3"),
    "loss_scale": Option(number(0), "static loss scale without amp (1 = none)"),
    "device_num": Option(integer(1), "devices in the job (default: RANK_SIZE, else 1)"),
    "device_id": Option(integer(0), "this process's device (default: DEVICE_ID)"),
}

CONFIG_CLASS = MSConfig


def sink_on(setting: str, device_target: str) -> bool:
    """dataset_sink_mode auto|true|false on MindSpore's device target: auto is on for
    Ascend, where feeding whole sinks of steps pays; the CPU has no sink at all."""
    wanted = setting == "true" or (setting == "auto" and device_target == "Ascend")
    return wanted and device_target != "CPU"
