"""Reading the options: the code defaults, overridden by config.yaml, overridden by flags.
The flags, the config.yaml keys and --help come from the fields of the Config class."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

import yaml

from src.scaffold.config.converters import keywords
from src.scaffold.config.options import DEFAULT_CONFIG, Config, Option, options_of
from src.scaffold.config.platform_args import platform_arguments, unknown_key
from src.scaffold.errors import ConfigError

# The flags besides the options' (argparse adds --help): a typo is compared with them too.
OTHER_FLAGS = ("config_path", "smoke", "strict", "no_tensorboard", "debug", "help")
TRAIN = "Train a model (src/model.py) on your data (src/data.py)."


class _Parser(argparse.ArgumentParser):
    # argparse prints usage and exits: raise, so that train.py reports the error in one line.
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{' '.join(message.split())} (see --help)")


def build_parser(options: dict[str, Option], description: str = TRAIN) -> argparse.ArgumentParser:
    """The command line; every flag defaults to None, meaning 'keep the YAML value'."""
    # allow_abbrev=False: a platform's --data must not be taken for --data_url.
    parser = _Parser(description=description, allow_abbrev=False)
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
        ("--debug", "an error's whole traceback instead of its one line"),
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


def _read_yaml(path: Path, options: dict[str, Option]) -> dict[str, Any]:
    """The options in a YAML file, converted as flags are; relative paths from its directory."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}".replace("\n", " ")) from err
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping of option: value")
    flat: dict[str, Any] = {}  # sections as dotted keys: data: {format: x} -> data.format
    mappings = {option.key for option in options.values() if option.convert is keywords}
    for key, value in raw.items():
        if isinstance(value, dict) and key not in mappings:
            flat.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            flat[str(key)] = value
    values: dict[str, Any] = {}
    keys = {option.key: name for name, option in options.items()}
    for written, value in flat.items():
        if written not in keys:
            raise ConfigError(f"{path}: {unknown_key(written, keys)}")
        if value is None:
            continue
        try:
            values[keys[written]] = convert(options[keys[written]], value, path.parent)
        except argparse.ArgumentTypeError as err:
            raise ConfigError(f"{path}: {written}: {err}") from err
    return values


def convert(option: Option, value: Any, base: Path) -> Any:
    """A value written in a file (config.yaml, hparams.json) as its flag would read it."""
    if value is None:
        return None
    if isinstance(value, list):
        value = ",".join(map(str, value))
    elif isinstance(value, dict):  # name: value pairs, as the flag writes them
        value = ",".join(f"{name}={item}" for name, item in value.items())
    # PyYAML reads 1e-3 as a string: converting like the flag fixes that too.
    converted = option.convert(str(value))
    if isinstance(converted, Path) and not converted.is_absolute():
        converted = base / converted
    return converted


def parse_config(argv: Sequence[str] | None = None, config_class: type[Config] = Config) -> Config:
    """Parse argv (default: sys.argv[1:]) over config.yaml over the code defaults."""
    return parse_script(argv, config_class)[0]


def parse_script(
    argv: Sequence[str] | None,
    config_class: type[Config],
    description: str = TRAIN,
    own: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[Config, argparse.Namespace]:
    """parse_config for a script with arguments of its own: ``own`` adds them; they come apart."""
    options = options_of(config_class)
    parser = build_parser(options, description)
    before = {action.dest for action in parser._actions}
    if own is not None:
        own(parser)
    dests = {action.dest for action in parser._actions} - before
    # Intermixed: a script's inputs may come before, between or after the options.
    read = parser.parse_known_args if own is None else parser.parse_known_intermixed_args
    parsed, extras = read(argv)
    script = argparse.Namespace(**{dest: getattr(parsed, dest) for dest in dests})
    args = {key: value for key, value in vars(parsed).items() if key not in dests}
    known = {name: f"--{name}" for name in (*OTHER_FLAGS, *options)}
    known.update({alias[2:]: alias for option in options.values() for alias in option.aliases})
    ignored = platform_arguments(extras, known)
    config_path = args["config_path"] or DEFAULT_CONFIG
    values = _read_yaml(config_path, options)
    flags = {key: v for key, v in args.items() if v is not None and key != "debug"}
    values.update(flags, given=tuple(flags), config_path=config_path)
    if args["smoke"] and args["epoch_size"] is None:
        values["epoch_size"] = 1  # a smoke run checks the plumbing: one epoch unless asked
    if values.get("init_from") and values.get("data_tokenizer") is None:
        values["data_tokenizer"] = values["init_from"]  # the model's own tokenizer
    if values.get("skip_layers") and not values.get("pretrained"):
        raise ConfigError(
            "--skip_layers applies to the weights --pretrained loads: give --pretrained too, "
            "or leave skip_layers empty"
        )
    return config_class().with_options(**values, ignored_args=ignored), script
