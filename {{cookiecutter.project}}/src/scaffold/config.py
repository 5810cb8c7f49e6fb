"""Training options: code defaults, overridden by config.yaml, overridden by command-line flags.

A framework's own options live in its src/scaffold/config_ext.py, if it has one:
EXTRA_OPTIONS (name -> Option) and CONFIG_CLASS (a subclass of Config with their
fields), built from the converters below. config.yaml and the flags take them too.
"""

from __future__ import annotations

import argparse
import importlib
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

import yaml

from src.scaffold.converters import (
    boolean,
    choice,
    choice_of,
    data_formats,
    device_target_name,
    floats,
    image_size,
    integer,
    location,
    model_name,
    number,
    resume_value,
    words,
    worker_count,
)
from src.scaffold.errors import ConfigError
from src.scaffold.platform_args import platform_arguments, unknown_key

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "config.yaml"
SWITCH = ("auto", "true", "false")
SCHEDULES = ("constant", "step", "cosine")


@dataclass(frozen=True)
class Config:
    """The options of one training run. A location is a local Path or an obs:// URL (str)."""

    data_url: Path | str = Path("data")
    train_url: Path | str = Path("output")
    dataset_name: str | None = None
    train_dir: Path | None = None
    test_dir: Path | None = None
    device_target: str = "auto"
    epoch_size: int = 12
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.9
    seed: int = 0
    num_classes: int | None = None
    val_fraction: float = 0.1
    amp: str = "auto"
    resume: Path | str | None = None
    pretrained: Path | None = None
    skip_layers: tuple[str, ...] = ()
    keep_checkpoints: int = 3
    max_steps: int | None = None
    smoke: bool = False
    strict: bool = False  # a failed host check stops the run (src/scaffold/hostline.py)
    # The model (src/model.py) and the data (src/data.py): config.yaml's model: and data:.
    model: str = "lenet"
    data_format: str = "auto"
    label_column: str = "label"
    resize: tuple[int, ...] | None = None
    test_fraction: float = 0.2
    num_workers: int | None = None
    in_memory: str = "auto"
    data_mean: tuple[float, ...] = ()
    data_std: tuple[float, ...] = ()
    random_crop: int = 0
    random_flip: bool = False
    # The learning-rate schedule (src/scaffold/schedule.py): config.yaml's schedule:.
    lr_schedule: str = "constant"
    warmup_epochs: float = 0.0
    lr_step_epochs: int = 4
    lr_gamma: float = 0.1
    min_lr: float = 0.0
    # Watching a run: progress and train loss every log_every steps; TensorBoard files.
    log_every: int = 50
    tensorboard: bool = True
    tensorboard_dir: Path | None = None
    config_path: Path = DEFAULT_CONFIG
    # Names of the arguments a platform added (platform_args.py), accepted and not used.
    ignored_args: tuple[str, ...] = ()
    # The options given as flags: they win over what a platform's environment says.
    given: tuple[str, ...] = ()

    def data_options(self) -> dict[str, Any]:
        """What the readers in src/data.py may use."""
        return {"label_column": self.label_column, "resize": self.resize}

    def hparams(self) -> dict[str, Any]:
        """The options as JSON values, for the run record."""
        values = asdict(self)
        del values["ignored_args"], values["given"]
        return {
            key: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
            for key, v in values.items()
        }


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
    """A flag and config.yaml key: its converter, help text and other flag names."""

    convert: Callable[[str], Any]
    help: str
    aliases: tuple[str, ...] = ()
    # Its key in config.yaml when it sits in a section (data.format), else its name.
    key: str | None = None


OPTIONS: dict[str, Option] = {
    "data_url": Option(location, "dataset directory or obs:// URL (the platform's input path)"),
    "train_url": Option(location, "output directory or obs:// URL: checkpoints and run record"),
    "dataset_name": Option(str, "the dataset under data_url to read, when it holds several"),
    "train_dir": Option(Path, "read the training split from here", ("--traindata",)),
    "test_dir": Option(Path, "read the test split from here", ("--testdata",)),
    "device_target": Option(device_target_name, "auto, cpu, cuda or npu (gpu, ascend)"),
    "epoch_size": Option(integer(1), "number of epochs"),
    "batch_size": Option(integer(1), "samples per step on each device"),
    "lr": Option(number(0), "learning rate"),
    "momentum": Option(number(0, 1, with_low=True), "SGD momentum"),
    "seed": Option(integer(), "seed of the weight init, the data order and the validation split"),
    "num_classes": Option(integer(2), "classes the model predicts (default: the data's)"),
    "val_fraction": Option(number(0, 1), "share of the training data held out for validation"),
    "amp": Option(choice(*SWITCH), "mixed precision: auto (on for accelerators), true, false"),
    "resume": Option(resume_value, "checkpoint to continue from, or auto: the newest in train_url"),
    "pretrained": Option(Path, "load model weights (only) from this checkpoint"),
    "skip_layers": Option(words, "with --pretrained: layers to leave initialised (a,b)"),
    "keep_checkpoints": Option(integer(1), "checkpoints kept besides the best (newest first)"),
    "max_steps": Option(integer(1), "stop after this many training steps (performance runs)"),
    "model": Option(
        model_name, "the model in src/model.py: lenet, mlp, resnet or yours", (), "model.name"
    ),
    "data_format": Option(
        choice_of(data_formats), "auto, mnist, imagefolder, csv or yours", (), "data.format"
    ),
    "label_column": Option(str, "csv: the column holding the label", (), "data.label_column"),
    "resize": Option(
        image_size, "resize images to height,width (needed for mixed sizes)", (), "data.resize"
    ),
    "test_fraction": Option(
        number(0, 1), "share held out for the test when data has none", (), "data.test_fraction"
    ),
    "num_workers": Option(
        worker_count,
        "loader processes: auto (from CPUs and devices) or a number",
        (),
        "data.num_workers",
    ),
    "in_memory": Option(
        choice(*SWITCH),
        "hold the data in memory: auto (if it fits), true, false (stream from disk)",
        (),
        "data.in_memory",
    ),
    "data_mean": Option(
        floats, "per-channel mean (0-255 for images); default: computed", (), "data.mean"
    ),
    "data_std": Option(
        floats, "per-channel std; default: computed from the training split", (), "data.std"
    ),
    "random_crop": Option(
        integer(0), "augmentation: pad by N pixels and crop back at random", (), "data.random_crop"
    ),
    "random_flip": Option(
        boolean, "augmentation: flip images left-right at random", (), "data.random_flip"
    ),
    "lr_schedule": Option(
        choice(*SCHEDULES), "learning rate per step: constant, step or cosine", (), "schedule.name"
    ),
    "warmup_epochs": Option(
        number(0, with_low=True),
        "epochs of linear warmup from 0 to lr (may be a fraction)",
        (),
        "schedule.warmup_epochs",
    ),
    "lr_step_epochs": Option(
        integer(1), "step: multiply the lr by gamma every N epochs", (), "schedule.step_epochs"
    ),
    "lr_gamma": Option(
        number(0, 1), "step: the factor applied every step_epochs", (), "schedule.gamma"
    ),
    "min_lr": Option(
        number(0, with_low=True), "cosine: the lr the curve ends at", (), "schedule.min_lr"
    ),
    "log_every": Option(integer(1), "progress line and train loss every N steps"),
    "tensorboard": Option(boolean, "write TensorBoard event files (--no_tensorboard: off)"),
    "tensorboard_dir": Option(
        Path, "TensorBoard's directory (default: train_url/tensorboard; C2Net: its own)"
    ),
}

EXTENSION = "src.scaffold.config_ext"


def project_options() -> tuple[dict[str, Option], type[Config]]:
    """This project's options and the class that holds them: the shared ones, and a
    framework's own when src/scaffold/config_ext.py exists."""
    try:
        extension = importlib.import_module(EXTENSION)
    except ModuleNotFoundError as err:
        if err.name != EXTENSION:
            raise
        return OPTIONS, Config
    return {**OPTIONS, **extension.EXTRA_OPTIONS}, extension.CONFIG_CLASS


class _Parser(argparse.ArgumentParser):
    # argparse prints usage and exits by itself; raise instead, so that every
    # user error reaches train.py's one-line report.
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{' '.join(message.split())} (see --help)")


# The flags besides the options' (argparse adds --help): a typo is compared with them too.
OTHER_FLAGS = ("config_path", "smoke", "strict", "no_tensorboard", "help")


def _known_flags(options: dict[str, Option]) -> dict[str, str]:
    """Every flag train.py knows, by its name without dashes."""
    flags = {name: f"--{name}" for name in (*OTHER_FLAGS, *options)}
    flags.update({alias[2:]: alias for option in options.values() for alias in option.aliases})
    return flags


def build_parser(options: dict[str, Option]) -> argparse.ArgumentParser:
    """The command line; every flag defaults to None, meaning 'keep the YAML value'."""
    # allow_abbrev=False: a platform's --data must not be taken for --data_url.
    parser = _Parser(
        description="Train a model (src/model.py) on your data (src/data.py).", allow_abbrev=False
    )
    parser.add_argument(
        "--config_path",
        type=Path,
        help=f"YAML file of options (default: {DEFAULT_CONFIG.name} next to train.py)",
    )
    for name, option in options.items():
        parser.add_argument(
            f"--{name}", *option.aliases, dest=name, type=option.convert, help=option.help
        )
    for flag, text in (
        ("--smoke", "a few steps on synthetic data, to check a setup"),
        ("--strict", "stop (exit 2) when the start-up host check fails (driver, devices)"),
    ):
        parser.add_argument(flag, action="store_true", default=None, help=text)
    parser.add_argument(
        "--no_tensorboard",
        action="store_const",
        const=False,
        dest="tensorboard",
        help="write no TensorBoard event files",
    )
    return parser


def _flatten(raw: dict[str, Any]) -> dict[str, Any]:
    """Sections (model:, data:) as dotted keys: {"data": {"format": x}} -> {"data.format": x}."""
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            flat[str(key)] = value
    return flat


def _read_yaml(path: Path, options: dict[str, Option]) -> dict[str, Any]:
    """The options in a YAML file, converted as their flags are; relative paths resolved
    against the file's directory, so that the project runs from any directory."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}".replace("\n", " ")) from err
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping of option: value")
    values: dict[str, Any] = {}
    keys = {option.key or name: name for name, option in options.items()}
    for key, value in _flatten(raw).items():
        if key not in keys:
            raise ConfigError(f"{path}: {unknown_key(key, keys)}")
        key = keys[key]
        if value is None:
            continue
        if isinstance(value, list):
            value = ",".join(map(str, value))
        try:
            # PyYAML reads 1e-3 as a string: converting like the flag fixes that too.
            values[key] = options[key].convert(str(value))
        except argparse.ArgumentTypeError as err:
            raise ConfigError(f"{path}: {key}: {err}") from err
        if isinstance(values[key], Path) and not values[key].is_absolute():
            values[key] = path.parent / values[key]
    return values


def parse_config(argv: Sequence[str] | None = None) -> Config:
    """Parse argv (default: sys.argv[1:]) over config.yaml over the code defaults.

    --smoke trains one epoch unless --epoch_size is given. The arguments OpenI, C2Net
    and ModelArts add (platform_args.py: --multi_data_url, --init_method...) are kept by
    name in ignored_args; any other unknown argument is a ConfigError naming the closest
    option (--epochs: did you mean --epoch_size?).
    """
    options, config_class = project_options()
    args, extras = build_parser(options).parse_known_args(argv)
    ignored = platform_arguments(extras, _known_flags(options))
    config_path = args.config_path or DEFAULT_CONFIG
    values = _read_yaml(config_path, options)
    flags = {key: v for key, v in vars(args).items() if v is not None}
    values.update(flags)
    values["given"] = tuple(flags)
    values["config_path"] = config_path
    if args.smoke and args.epoch_size is None:
        # A smoke run checks the plumbing: one epoch unless asked for more.
        values["epoch_size"] = 1
    return replace(config_class(), **values, ignored_args=ignored)
