"""The options, each declared once as a field of Config with its default, converter and help."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import reduce
from pathlib import Path
from typing import Any, Callable, TypeVar

from src.scaffold.config.converters import (
    boolean,
    device_target_name,
    identifier,
    integer,
    keywords,
    location,
    number,
    resume_value,
    words,
)
from src.scaffold.config.sections import (
    DataOptions,
    EarlyStopOptions,
    LoraOptions,
    MonitorOptions,
    Places,
    ScheduleOptions,
    ShardOptions,
    Source,
    option,
    switch,
)

T = TypeVar("T")
DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "config.yaml"


@dataclass(frozen=True)
class Named:
    """A command's options by name: values, declarations, and the names given as flags."""

    values: dict[str, Any]
    declared: dict[str, Option]
    given: tuple[str, ...] = ()


SECTION_TYPES = dict(
    data=DataOptions,
    schedule=ScheduleOptions,
    monitor=MonitorOptions,
    early_stop=EarlyStopOptions,
    shard=ShardOptions,
    lora=LoraOptions,
)


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
    amp: str = option("auto", switch, "mixed precision: auto (on for accelerators), true, false")
    resume: Path | str | None = option(
        None, resume_value, "checkpoint to continue from, or auto: the newest in train_url"
    )
    pretrained: Path | None = option(None, Path, "load model weights (only) from this checkpoint")
    init_from: Path | None = option(
        None, Path, "a Hugging Face model directory (save_pretrained's) to start from"
    )
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
    accumulate: int = option(
        1, integer(1), "batches whose gradients make one optimizer step (the schedule counts steps)"
    )
    clip_grad_norm: float | None = option(
        None, number(0), "clip the gradients' global norm to this before each optimizer step"
    )
    model: str | None = option(
        None,
        identifier,
        "the model in src/model.py (default: its only one): lenet, mlp, resnet, yours",
    )
    model_args: dict[str, Any] = option(
        {}, keywords, "the model function's own parameters, name=value (layers=6,width=256)"
    )
    # config.yaml's sections, each handed whole to the part it configures.
    data: DataOptions = field(default_factory=DataOptions)
    schedule: ScheduleOptions = field(default_factory=ScheduleOptions)
    monitor: MonitorOptions = field(default_factory=MonitorOptions)
    early_stop: EarlyStopOptions = field(default_factory=EarlyStopOptions)
    shard: ShardOptions = field(default_factory=ShardOptions)
    lora: LoraOptions = field(default_factory=LoraOptions)
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
    ignored_args: tuple[str, ...] = ()  # the platform's arguments (platform_args.py), unused
    given: tuple[str, ...] = ()  # the options given as flags: they win over a platform's

    def places(self) -> Places:
        return self.pick(Places)

    def source(self, root: Path) -> Source:
        return self.pick(Source, root=root)

    def pick(self, kind: type[T], **more: Any) -> T:
        """A ``kind`` (a dataclass) filled from the options of its fields' names, and ``more``."""
        filled = {f.name: getattr(self, f.name) for f in fields(kind) if f.name not in more}
        return kind(**filled, **more)

    def smoke_sizes(self, world_size: int, steps: int = 2) -> tuple[int, int] | None:
        """--smoke: the sizes of the random training split and of the others; else None."""
        return (steps * self.batch_size * world_size, self.batch_size) if self.smoke else None

    def named(self) -> Named:
        declared = options_of(type(self))
        # An option's value by its key: data.format is self.data.format.
        values = {name: reduce(getattr, o.key.split("."), self) for name, o in declared.items()}
        return Named(values, declared, self.given)

    def with_options(self, **values: Any) -> Config:
        """A copy with the options named as their flags are (data_format=...) set."""
        declared = options_of(type(self))
        top: dict[str, Any] = {}
        for name, value in values.items():
            # ("data", "format") for data_format; ("", "lr") for lr, or a name no option has.
            section, _, key = (declared[name].key if name in declared else name).rpartition(".")
            if section:
                top[section] = replace(top.get(section, getattr(self, section)), **{key: value})
            else:
                top[key] = value
        return replace(self, **top)

    def hparams(self) -> dict[str, Any]:
        """The options as JSON values for the run record, as asked; a local path made absolute."""
        values = dict(self.named().values)
        values.update(smoke=self.smoke, strict=self.strict, config_path=self.config_path)
        return {key: _json(value) for key, value in values.items()}


def _json(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value.absolute())
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Option:
    """A flag and config.yaml key, read from a Config field's declaration."""

    convert: Callable[[str], Any]
    help: str
    aliases: tuple[str, ...] = ()
    key: str = ""  # in config.yaml: data.format for data_format, else the name


def options_of(config_class: type[Config]) -> dict[str, Option]:
    """Every option of ``config_class`` by name (a section's as data_format, key data.format)."""
    found: dict[str, Option] = {}
    for f in fields(config_class):
        kind = SECTION_TYPES.get(f.name)
        inner = (
            [(f"{f.name}_{g.name}", f"{f.name}.{g.name}", g) for g in fields(kind)] if kind else []
        )
        for name, key, declared in inner or [(f.name, f.name, f)]:
            meta = declared.metadata
            if "convert" in meta:
                found[name] = Option(meta["convert"], meta["help"], meta["aliases"], key)
    return found
