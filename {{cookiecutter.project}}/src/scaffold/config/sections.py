"""config.yaml's sections (data:, schedule:, monitor:, early_stop:, shard:, lora:), each a
part's options, and what the run's entry hands the parts that read places (Places, Source)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from src.scaffold.config.converters import (
    boolean,
    choice,
    float_value,
    floats,
    identifier,
    image_size,
    integer,
    number,
    words,
    worker_count,
)

SWITCH = ("auto", "true", "false")
switch = choice(*SWITCH)  # auto, true or false
LABELS = ("classes", "values")


def option(
    default: Any, convert: Callable[[str], Any], help: str, aliases: tuple[str, ...] = ()
) -> Any:
    """The one declaration of an option: flag --NAME, config.yaml key NAME, read by ``convert``."""
    meta = {"convert": convert, "help": help, "aliases": aliases}
    if isinstance(default, dict):  # a mapping: each Config its own
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class DataOptions:
    """config.yaml's data: what the readers and the loader are asked for."""

    format: str = option("auto", identifier, "auto, mnist, imagefolder, csv or yours")
    label_column: str = option(
        "label", str, "csv: the column holding the label", ("--label_column",)
    )
    labels: str = option(
        "classes", choice(*LABELS), "classes (the label names a class) or values (a number)"
    )
    resize: tuple[int, ...] | None = option(
        None, image_size, "resize images to height,width (needed for mixed sizes)", ("--resize",)
    )
    test_fraction: float = option(
        0.2, number(0, 1), "share held out for the test when data has none", ("--test_fraction",)
    )
    num_workers: int | None = option(
        None,
        worker_count,
        "loader processes: auto (from CPUs and devices) or a number",
        ("--num_workers",),
    )
    in_memory: str = option(
        "auto", switch, "hold the data in memory: auto (if it fits), true, false", ("--in_memory",)
    )
    mean: tuple[float, ...] = option(
        (), floats, "per-channel mean (0-255 for images); default: computed"
    )
    std: tuple[float, ...] = option(
        (), floats, "per-channel std; default: computed from the training split"
    )
    random_crop: int = option(
        0, integer(0), "augmentation: pad by N pixels and crop back at random", ("--random_crop",)
    )
    random_flip: bool = option(
        False, boolean, "augmentation: flip images left-right at random", ("--random_flip",)
    )

    block_size: int = option(
        128, integer(1), "text: tokens a window (what a language model sees)", ("--block_size",)
    )
    tokenizer: Path | None = option(
        None, Path, "text: a tokenizer.json or Hugging Face tokenizer dir (null: UTF-8 bytes)"
    )

    def reader_options(self) -> dict[str, Any]:
        return {
            "label_column": self.label_column,
            "resize": self.resize,
            "labels": self.labels,
            "test_fraction": self.test_fraction,
            "block_size": self.block_size,
            "tokenizer": self.tokenizer,
        }


@dataclass(frozen=True)
class ScheduleOptions:
    """config.yaml's schedule: the learning rate of every step (backend/schedule.py)."""

    name: str = option(
        "constant",
        choice("constant", "step", "cosine"),
        "learning rate per step: constant, step or cosine",
        ("--lr_schedule",),
    )
    warmup_epochs: float = option(
        0.0,
        number(0, with_low=True),
        "epochs of linear warmup from 0 to lr (may be a fraction)",
        ("--warmup_epochs",),
    )
    step_epochs: int = option(
        4, integer(1), "step: multiply the lr by gamma every N epochs", ("--lr_step_epochs",)
    )
    gamma: float = option(
        0.1, number(0, 1), "step: the factor applied every step_epochs", ("--lr_gamma",)
    )
    min_lr: float = option(
        0.0, number(0, with_low=True), "cosine: the lr the curve ends at", ("--min_lr",)
    )


@dataclass(frozen=True)
class MonitorOptions:
    """config.yaml's monitor: the validation metric choosing the best checkpoint."""

    metric: str = option("accuracy", str, "the validation metric choosing the best checkpoint")
    mode: str = option("max", choice("max", "min"), "max or min: which way the metric is better")


@dataclass(frozen=True)
class EarlyStopOptions:
    """config.yaml's early_stop: stopping on the monitored metric."""

    patience: int | None = option(
        None, integer(1), "stop after N validations without a better monitored metric"
    )
    threshold: float | None = option(
        None, float_value, "stop once the monitored metric reaches this"
    )


SHARD_MODES = ("none", "full")


@dataclass(frozen=True)
class ShardOptions:
    """config.yaml's shard: the model, its gradients and optimizer state split over the ranks."""

    mode: str = option(
        "none",
        choice(*SHARD_MODES),
        "none (a whole copy on every rank) or full (split over the ranks: FSDP2)",
        ("--shard",),
    )
    activation_checkpointing: bool = option(
        False,
        boolean,
        "recompute each block's activations in the backward pass (less memory, more time)",
        ("--activation_checkpointing",),
    )


@dataclass(frozen=True)
class LoraOptions:
    """config.yaml's lora: low-rank adapters trained on init_from's frozen model (peft)."""

    rank: int = option(0, integer(0), "adapters' rank (0: no LoRA, the whole model trains)")
    alpha: float = option(16.0, number(0), "adapters' scale: alpha / rank times their product")
    dropout: float = option(0.0, number(0, 1, with_low=True), "dropout on the adapters' input")
    target_modules: tuple[str, ...] = option(
        (), words, "the layers adapted, by name (q_proj,v_proj); empty: peft's for the model"
    )


@dataclass(frozen=True)
class Places:
    """The places as asked (a path, an obs:// URL or auto), resolved by storage/where.py."""

    data_url: Path | str
    train_url: Path | str
    pretrained: Path | None = None
    given: tuple[str, ...] = ()  # the options given as flags: they win over a platform's


@dataclass(frozen=True)
class Source:
    """The data under ``root`` (the run's data directory) and how to pick and split it."""

    root: Path
    dataset_name: str | None = None
    train_dir: Path | None = None
    test_dir: Path | None = None
    num_classes: int | None = None
    val_fraction: float = 0.1
    seed: int = 0
