"""The options, each declared once as a field of Config with its default, converter and
help; env_int and env_first for what the launchers put in the environment."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from src.scaffold.config.converters import (
    boolean,
    choice,
    device_target_name,
    float_value,
    floats,
    identifier,
    image_size,
    integer,
    location,
    number,
    resume_value,
    words,
    worker_count,
)
from src.scaffold.errors import ConfigError

DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "config.yaml"
SWITCH = ("auto", "true", "false")
SCHEDULES = ("constant", "step", "cosine")
LABELS = ("classes", "values")
MODES = ("max", "min")
# config.yaml's sections: the options data_*, schedule_*, monitor_* and early_stop_* sit
# under them.
SECTIONS = ("data", "schedule", "monitor", "early_stop")
# Except the names the platforms pass (ModelArts and OpenI: --data_url), kept at the top.
PLATFORM_NAMES = ("data_url",)


def option(
    default: Any, convert: Callable[[str], Any], help: str, aliases: tuple[str, ...] = ()
) -> Any:
    """A field that is an option: its flag is --NAME, its config.yaml key NAME (or, for
    data_*, schedule_* and monitor_*, the key under that section: data_format is
    data: format), its value read by ``convert``. The one place an option is declared."""
    return field(default=default, metadata={"convert": convert, "help": help, "aliases": aliases})


@dataclass(frozen=True)
class Config:
    """The options of one training run. A location is a local Path or an obs:// URL (str)."""

    data_url: Path | str = option(
        "auto", location, "dataset directory, obs:// URL, or auto (the platform's, else ./data)"
    )
    train_url: Path | str = option(
        "auto", location, "output directory, obs:// URL, or auto (the platform's, else ./output)"
    )
    dataset_name: str | None = option(
        None, str, "the dataset under data_url to read, when it holds several"
    )
    train_dir: Path | None = option(
        None, Path, "read the training split from here", ("--traindata",)
    )
    test_dir: Path | None = option(None, Path, "read the test split from here", ("--testdata",))
    device_target: str = option("auto", device_target_name, "auto, cpu, cuda or npu (gpu, ascend)")
    epoch_size: int = option(12, integer(1), "number of epochs")
    batch_size: int = option(32, integer(1), "samples per step on each device")
    lr: float = option(0.01, number(0), "learning rate")
    momentum: float = option(0.9, number(0, 1, with_low=True), "SGD momentum")
    seed: int = option(
        0, integer(), "seed of the weight init, the data order and the validation split"
    )
    num_classes: int | None = option(
        None, integer(1), "outputs the model predicts (default: the data's classes, or 1 value)"
    )
    val_fraction: float = option(
        0.1, number(0, 1), "share of the training data held out for validation"
    )
    amp: str = option(
        "auto", choice(*SWITCH), "mixed precision: auto (on for accelerators), true, false"
    )
    resume: Path | str | None = option(
        None, resume_value, "checkpoint to continue from, or auto: the newest in train_url"
    )
    pretrained: Path | None = option(None, Path, "load model weights (only) from this checkpoint")
    skip_layers: tuple[str, ...] = option(
        (), words, "with --pretrained: layers to leave initialised (a,b)"
    )
    keep_checkpoints: int = option(
        3, integer(1), "checkpoints kept besides the best (newest first)"
    )
    max_steps: int | None = option(
        None, integer(1), "stop after this many training steps (performance runs)"
    )
    # Inside an epoch (an epoch of real data can last hours): counted in optimizer steps.
    validate_every: int | None = option(
        None, integer(1), "validate every N optimizer steps as well as after each epoch"
    )
    checkpoint_every: int | None = option(
        None, integer(1), "a checkpoint every N optimizer steps, resumed from inside its epoch"
    )
    # The optimizer step: the gradients of `accumulate` batches, clipped (src/step.py's).
    accumulate: int = option(
        1, integer(1), "batches whose gradients make one optimizer step (the schedule counts steps)"
    )
    clip_grad_norm: float | None = option(
        None, number(0), "clip the gradients' global norm to this before each optimizer step"
    )
    # The model (src/model.py) and the data (the readers, yours in src/data.py).
    model: str | None = option(
        None,
        identifier,
        "the model in src/model.py (default: its only one): lenet, mlp, resnet, yours",
    )
    data_format: str = option("auto", identifier, "auto, mnist, imagefolder, csv or yours")
    data_label_column: str = option(
        "label", str, "csv: the column holding the label", ("--label_column",)
    )
    data_labels: str = option(
        "classes", choice(*LABELS), "classes (the label names a class) or values (a number)"
    )
    data_resize: tuple[int, ...] | None = option(
        None, image_size, "resize images to height,width (needed for mixed sizes)", ("--resize",)
    )
    data_test_fraction: float = option(
        0.2, number(0, 1), "share held out for the test when data has none", ("--test_fraction",)
    )
    data_num_workers: int | None = option(
        None,
        worker_count,
        "loader processes: auto (from CPUs and devices) or a number",
        ("--num_workers",),
    )
    data_in_memory: str = option(
        "auto",
        choice(*SWITCH),
        "hold the data in memory: auto (if it fits), true, false",
        ("--in_memory",),
    )
    data_mean: tuple[float, ...] = option(
        (), floats, "per-channel mean (0-255 for images); default: computed"
    )
    data_std: tuple[float, ...] = option(
        (), floats, "per-channel std; default: computed from the training split"
    )
    data_random_crop: int = option(
        0, integer(0), "augmentation: pad by N pixels and crop back at random", ("--random_crop",)
    )
    data_random_flip: bool = option(
        False, boolean, "augmentation: flip images left-right at random", ("--random_flip",)
    )
    # The learning-rate schedule (src/scaffold/backend/schedule.py).
    schedule_name: str = option(
        "constant",
        choice(*SCHEDULES),
        "learning rate per step: constant, step or cosine",
        ("--lr_schedule",),
    )
    schedule_warmup_epochs: float = option(
        0.0,
        number(0, with_low=True),
        "epochs of linear warmup from 0 to lr (may be a fraction)",
        ("--warmup_epochs",),
    )
    schedule_step_epochs: int = option(
        4, integer(1), "step: multiply the lr by gamma every N epochs", ("--lr_step_epochs",)
    )
    schedule_gamma: float = option(
        0.1, number(0, 1), "step: the factor applied every step_epochs", ("--lr_gamma",)
    )
    schedule_min_lr: float = option(
        0.0, number(0, with_low=True), "cosine: the lr the curve ends at", ("--min_lr",)
    )
    # The best checkpoint: the validation metric (one src/step.py's metrics returns).
    monitor_metric: str = option(
        "accuracy", str, "the validation metric choosing the best checkpoint"
    )
    monitor_mode: str = option("max", choice(*MODES), "max or min: which way the metric is better")
    # Stopping early: on the monitored metric, at the end of an epoch.
    early_stop_patience: int | None = option(
        None, integer(1), "stop after N validations without a better monitored metric"
    )
    early_stop_threshold: float | None = option(
        None, float_value, "stop once the monitored metric reaches this"
    )
    # Watching a run: progress and train loss every log_every steps; TensorBoard files.
    log_every: int = option(50, integer(1), "progress line and train loss every N steps")
    tensorboard: bool = option(
        True, boolean, "write TensorBoard event files (--no_tensorboard: off)"
    )
    tensorboard_dir: Path | None = option(
        None, Path, "TensorBoard's directory (default: train_url/tensorboard; C2Net: its own)"
    )
    # Switches (flags only): --smoke, --strict.
    smoke: bool = False
    strict: bool = False  # a failed host check stops the run (src/scaffold/run/hostline.py)
    config_path: Path = DEFAULT_CONFIG
    # Names of the arguments a platform added (platform_args.py), accepted and not used.
    ignored_args: tuple[str, ...] = ()
    # The options given as flags: they win over what a platform's environment says.
    given: tuple[str, ...] = ()

    def data_options(self) -> dict[str, Any]:
        """What the readers may use: config.yaml's data: section, by its keys."""
        return {
            "label_column": self.data_label_column,
            "resize": self.data_resize,
            "labels": self.data_labels,
        }

    def hparams(self) -> dict[str, Any]:
        """The options as JSON values, for the run record: as asked (auto stays auto),
        a local path made absolute, so that the record reads the same from any directory."""
        values = asdict(self)
        del values["ignored_args"], values["given"]
        return {key: _json(value) for key, value in values.items()}


def _json(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value.absolute())
    return list(value) if isinstance(value, tuple) else value


def env_int(name: str) -> int | None:
    """A whole number a launcher put in the environment (RANK_SIZE, DEVICE_ID...), or None."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError as err:
        raise ConfigError(f"environment variable {name}={value!r} is not a whole number") from err


def env_first(*names: str) -> int | None:
    """The first of ``names`` the environment sets, as a whole number; None when none is.
    DEVICE_ID before ASCEND_DEVICE_ID: OpenI's NPU jobs and CANN's samples set the latter."""
    for name in names:
        value = env_int(name)
        if value is not None:
            return value
    return None


@dataclass(frozen=True)
class Option:
    """A flag and config.yaml key, read from a Config field's declaration."""

    convert: Callable[[str], Any]
    help: str
    aliases: tuple[str, ...] = ()
    # Its key in config.yaml: data.format for data_format, else its name.
    key: str = ""


def yaml_key(name: str) -> str:
    """config.yaml's key of option ``name``: a section's (data.format) or the name."""
    for section in SECTIONS:
        if name.startswith(f"{section}_") and name not in PLATFORM_NAMES:
            return f"{section}.{name[len(section) + 1 :]}"
    return name


def options_of(config_class: type[Config]) -> dict[str, Option]:
    """Every option of ``config_class`` (a Config or a framework's subclass), by name."""
    return {
        f.name: Option(
            f.metadata["convert"], f.metadata["help"], f.metadata["aliases"], yaml_key(f.name)
        )
        for f in fields(config_class)
        if "convert" in f.metadata
    }
