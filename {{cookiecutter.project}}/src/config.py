"""Training options: code defaults, overridden by config.yaml, overridden by command-line flags."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

import yaml

from src.errors import ConfigError

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config.yaml"
DEVICE_TARGETS = ("auto", "cpu", "cuda", "npu")
# The names OpenI, ModelArts and MindSpore use for the same targets.
DEVICE_ALIASES = {"gpu": "cuda", "ascend": "npu"}
# A local directory, or an object-storage URL (obs://bucket/dir) that src/storage.py copies.
Location = Path | str


@dataclass(frozen=True)
class Config:
    """The options of one training run."""

    data_url: Location = Path("data")
    train_url: Location = Path("output")
    dataset_name: str | None = None
    device_target: str = "auto"
    epoch_size: int = 10
    batch_size: int = 64
    lr: float = 0.02
    momentum: float = 0.9
    seed: int = 0
    resume: Path | None = None
    smoke: bool = False
    config_path: Path = DEFAULT_CONFIG
    # Flags the platform added that this script does not use (logged once).
    ignored_args: tuple[str, ...] = ()

    @property
    def data_dir(self) -> Location:
        """Where the dataset is: OpenI mounts each of several datasets under its name."""
        if not self.dataset_name:
            return self.data_url
        if isinstance(self.data_url, str):
            return f"{self.data_url.rstrip('/')}/{self.dataset_name}"
        return self.data_url / self.dataset_name

    @property
    def output_dir(self) -> Location:
        """Where checkpoints and the run record go."""
        return self.train_url

    def hparams(self) -> dict[str, Any]:
        """The options as JSON values, for the run record."""
        values = asdict(self)
        del values["ignored_args"]
        return {key: str(v) if isinstance(v, Path) else v for key, v in values.items()}


def env_int(name: str) -> int | None:
    """A whole number a launcher put in the environment (RANK_SIZE, DEVICE_ID...), or None."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError as err:
        raise ConfigError(f"environment variable {name}={value!r} is not a whole number") from err


class _Parser(argparse.ArgumentParser):
    # argparse prints usage and exits by itself; raise instead, so that every
    # user error reaches train.py's one-line report.
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message} (see --help)")


def _device_target(text: str) -> str:
    target = DEVICE_ALIASES.get(text.lower(), text.lower())
    if target not in DEVICE_TARGETS:
        raise argparse.ArgumentTypeError(
            f"unknown device target {text!r}; choose one of {', '.join(DEVICE_TARGETS)}"
        )
    return target


def _parse(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text)
    except ValueError:
        noun = "whole number" if kind is int else "number"
        raise argparse.ArgumentTypeError(f"{text!r} is not a {noun}") from None


def _positive_int(text: str) -> int:
    value = int(_parse(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def _positive_float(text: str) -> float:
    value = _parse(text, float)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0")
    return value


def _momentum(text: str) -> float:
    value = _parse(text, float)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be in [0, 1)")
    return value


def _whole(text: str) -> int:
    return int(_parse(text, int))


def _location(text: str) -> Location:
    # A URL stays a string: Path("obs://b/d") would collapse it to "obs:/b/d".
    return text if "://" in text else Path(text)


# The options config.yaml and the flags share: name -> (converter, help).
Options = dict[str, tuple[Callable[[str], Any], str]]
OPTIONS: Options = {
    "data_url": (_location, "dataset directory or obs:// URL (the platform's input path)"),
    "train_url": (_location, "output directory or obs:// URL for checkpoints and the run record"),
    "dataset_name": (str, "read the data from <data_url>/<dataset_name> (OpenI multi-dataset)"),
    "device_target": (_device_target, "auto, cpu, cuda or npu"),
    "epoch_size": (_positive_int, "number of epochs"),
    "batch_size": (_positive_int, "samples per step on each device"),
    "lr": (_positive_float, "learning rate"),
    "momentum": (_momentum, "SGD momentum"),
    "seed": (_whole, "seed of the weight init and the data order"),
    "resume": (Path, "checkpoint to continue from"),
}


# A framework's own options live in its overlay's src/config_ext.py, if it has
# one: EXTRA_OPTIONS (name -> (converter, help)) and CONFIG_CLASS (a subclass of
# Config with their fields). config.yaml and the flags then take them too.
EXTENSION = "src.config_ext"


def project_options() -> tuple[Options, type[Config]]:
    """This project's options and the class that holds them: the shared ones, and a
    framework's own when src/config_ext.py exists."""
    try:
        extension = importlib.import_module(EXTENSION)
    except ModuleNotFoundError as err:
        if err.name != EXTENSION:
            raise
        return OPTIONS, Config
    return OPTIONS | extension.EXTRA_OPTIONS, extension.CONFIG_CLASS


def build_parser(options: Options | None = None) -> argparse.ArgumentParser:
    """The command line; every flag defaults to None, meaning 'keep the YAML value'."""
    options = options or project_options()[0]
    # allow_abbrev=False: a platform's --data must not be taken for --data_url.
    parser = _Parser(description="Train LeNet on MNIST.", allow_abbrev=False)
    parser.add_argument(
        "--config_path",
        type=Path,
        help=f"YAML file of options (default: {DEFAULT_CONFIG.name} next to train.py)",
    )
    for name, (convert, text) in options.items():
        parser.add_argument(f"--{name}", type=convert, help=text)
    parser.add_argument(
        "--smoke",
        action="store_true",
        default=None,
        help="a few steps on synthetic data, to check a setup",
    )
    return parser


def _read_yaml(path: Path, options: Options = OPTIONS) -> dict[str, Any]:
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
    for key, value in raw.items():
        if key not in options:
            raise ConfigError(f"{path}: unknown option {key!r}; known: {', '.join(options)}")
        if value is None:
            continue
        try:
            # PyYAML reads 1e-3 as a string: converting like the flag fixes that too.
            values[key] = options[key][0](str(value))
        except argparse.ArgumentTypeError as err:
            raise ConfigError(f"{path}: {key}: {err}") from err
        if isinstance(values[key], Path) and not values[key].is_absolute():
            values[key] = path.parent / values[key]
    return values


def parse_config(argv: Sequence[str] | None = None) -> Config:
    """Parse argv (default: sys.argv[1:]) over config.yaml over the code defaults.

    --smoke trains one epoch unless --epoch_size is given. Flags this script
    does not know, such as the --multi_data_url or --init_method that OpenI
    and ModelArts add, are kept in ignored_args instead of failing the job.
    With src/config_ext.py the result is its CONFIG_CLASS.
    """
    options, config_class = project_options()
    parser = build_parser(options)
    args, unknown = parser.parse_known_args(argv)
    config_path = args.config_path or DEFAULT_CONFIG
    values = _read_yaml(config_path, options)
    values.update({key: v for key, v in vars(args).items() if v is not None})
    values["config_path"] = config_path
    if args.smoke and args.epoch_size is None:
        # A smoke run checks the plumbing: one epoch unless asked for more.
        values["epoch_size"] = 1
    return replace(config_class(), **values, ignored_args=tuple(unknown))
