"""MindSpore's own training options, declared as the shared ones are (src/scaffold/config)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from src.scaffold.backend.api import TrainOptions
from src.scaffold.config import SWITCH, Config, ConfigError, option
from src.scaffold.config.converters import choice, integer, number


def _sink_size(text: str) -> int:
    value = integer()(text)
    if value != -1 and value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be -1 (a whole epoch) or at least 1")
    return value


@dataclass(frozen=True)
class MSConfig(Config):
    """The options of one MindSpore training run."""

    context_mode: str = option(
        "graph", choice("graph", "pynative"), "graph (compiled) or pynative (eager)"
    )
    dataset_sink_mode: str = option(
        "auto", choice(*SWITCH), "sink data to the device: auto (Ascend), true, false"
    )
    sink_size: int = option(-1, _sink_size, "steps per sink, -1 for a whole epoch")
    amp_level: str = option(
        "o2", choice("o1", "o2", "o3"), "mixed precision level when amp is on: o1, o2, o3"
    )
    loss_scale: float = option(1.0, number(0), "static loss scale without amp (1 = none)")
    device_num: int | None = option(
        None, integer(1), "devices in the job (default: RANK_SIZE, else 1)"
    )
    device_id: int | None = option(None, integer(0), "this process's device (default: DEVICE_ID)")


@dataclass(frozen=True)
class MSOptions(TrainOptions):
    """What MindSpore's backend reads of the options besides every backend's."""

    context_mode: str
    dataset_sink_mode: str
    sink_size: int
    amp_level: str
    loss_scale: float
    device_num: int | None
    device_id: int | None


def sink_on(setting: str, device_target: str, sharded: bool = False) -> bool:
    """auto is on for Ascend, where feeding whole sinks of steps pays; the CPU has no sink, nor
    a sharded step (MindSpore's parallel training step takes no data sink)."""
    if sharded and setting == "true":
        raise ConfigError(
            "dataset_sink_mode: true with shard: full: MindSpore's optimizer parallel trains "
            "without a data sink; set dataset_sink_mode auto or false in config.yaml"
        )
    wanted = setting == "true" or (setting == "auto" and device_target == "Ascend")
    return wanted and device_target != "CPU" and not sharded


def pytorch_only(options: TrainOptions) -> None:
    """init_from and lora: Hugging Face's transformers and peft, PyTorch's; one line here."""
    named = [f for f, on in (("init_from", options.init_from), ("lora", options.lora.rank)) if on]
    if named:
        raise _refusal(named, "a PyTorch project (Hugging Face's transformers and peft)")


def shard_refusal() -> ConfigError:
    """shard: full, MindSpore's optimizer parallel: Ascend and GPU only (its support table)."""
    return ConfigError(
        "shard: full (MindSpore's optimizer parallel) needs Ascend or GPU, and this run is "
        "on the CPU: set shard.mode none (--shard none), or run on an NPU or GPU"
    )


def _refusal(named: list[str], need: str) -> ConfigError:
    return ConfigError(f"{' and '.join(named)} {'needs' if len(named) == 1 else 'need'} {need}")


def check_step_options(options: MSOptions, loop: str, sink: bool) -> None:
    """accumulate, clip_grad_norm and checkpoint_every need the custom loop, some no data sink."""
    accumulate = [f"accumulate {options.accumulate}"] if options.accumulate > 1 else []
    clip = options.clip_grad_norm
    clipped = [f"clip_grad_norm {clip:g}"] if clip is not None else []
    every_n = [f"checkpoint_every {options.checkpoint_every}"] if options.checkpoint_every else []
    if loop == "model" and accumulate + clipped + every_n:
        raise _refusal(
            accumulate + clipped + every_n,
            "the custom training loop: Model.train's step neither accumulates nor clips, and "
            "resumes at an epoch's start only (gen update --set ms_train_loop=custom switches "
            "this project's loop)",
        )
    if sink and accumulate + every_n:
        raise _refusal(
            accumulate + every_n,
            "dataset_sink_mode: false (a sink runs its steps on the device, where the host "
            "cannot group them or resume inside one): set it in config.yaml",
        )
