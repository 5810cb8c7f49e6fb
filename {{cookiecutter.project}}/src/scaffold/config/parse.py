"""Reading the options: the code defaults, overridden by config.yaml, overridden by flags.
The flags, the config.yaml keys and --help come from the fields of the Config class."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

import yaml

from src.scaffold.config.options import DEFAULT_CONFIG, Config, Option, options_of
from src.scaffold.config.platform_args import platform_arguments, unknown_key
from src.scaffold.errors import ConfigError


class _Parser(argparse.ArgumentParser):
    # argparse prints usage and exits by itself; raise instead, so that every
    # user error reaches train.py's one-line report.
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{' '.join(message.split())} (see --help)")


# The flags besides the options' (argparse adds --help): a typo is compared with them too.
OTHER_FLAGS = ("config_path", "smoke", "strict", "no_tensorboard", "debug", "help")


def _known_flags(options: dict[str, Option]) -> dict[str, str]:
    """Every flag train.py knows, by its name without dashes."""
    flags = {name: f"--{name}" for name in (*OTHER_FLAGS, *options)}
    flags.update({alias[2:]: alias for option in options.values() for alias in option.aliases})
    return flags


TRAIN = "Train a model (src/model.py) on your data (src/data.py)."


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
    keys = {option.key: name for name, option in options.items()}
    for key, value in _flatten(raw).items():
        if key not in keys:
            raise ConfigError(f"{path}: {unknown_key(key, keys)}")
        written, key = key, keys[key]
        if value is None:
            continue
        try:
            values[key] = convert(options[key], value, path.parent)
        except argparse.ArgumentTypeError as err:
            raise ConfigError(f"{path}: {written}: {err}") from err
    return values


def convert(option: Option, value: Any, base: Path) -> Any:
    """A value written in a file (config.yaml, a run's hparams.json) as its flag would read
    it; a relative path is taken from ``base``. None stays None (the option unset)."""
    if value is None:
        return None
    if isinstance(value, list):
        value = ",".join(map(str, value))
    # PyYAML reads 1e-3 as a string: converting like the flag fixes that too.
    converted = option.convert(str(value))
    if isinstance(converted, Path) and not converted.is_absolute():
        converted = base / converted
    return converted


def parse_config(argv: Sequence[str] | None = None, config_class: type[Config] = Config) -> Config:
    """Parse argv (default: sys.argv[1:]) over config.yaml over the code defaults.

    --smoke trains one epoch unless --epoch_size is given. The arguments OpenI, C2Net
    and ModelArts add (platform_args.py: --multi_data_url, --init_method...) are kept by
    name in ignored_args; any other unknown argument is a ConfigError naming the closest
    option (--epochs: did you mean --epoch_size?).
    """
    return parse_script(argv, config_class)[0]


def parse_script(
    argv: Sequence[str] | None,
    config_class: type[Config],
    description: str = TRAIN,
    own: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[Config, argparse.Namespace]:
    """parse_config for a script with arguments of its own besides train.py's (predict.py's
    inputs and --top_k ...): ``own`` adds them to the parser; they come back apart."""
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
    args = argparse.Namespace(
        **{key: value for key, value in vars(parsed).items() if key not in dests}
    )
    ignored = platform_arguments(extras, _known_flags(options))
    config_path = args.config_path or DEFAULT_CONFIG
    values = _read_yaml(config_path, options)
    flags = {key: v for key, v in vars(args).items() if v is not None and key != "debug"}
    values.update(flags)
    values["given"] = tuple(flags)
    values["config_path"] = config_path
    if args.smoke and args.epoch_size is None:
        # A smoke run checks the plumbing: one epoch unless asked for more.
        values["epoch_size"] = 1
    if values.get("skip_layers") and not values.get("pretrained"):
        raise ConfigError(
            "--skip_layers applies to the weights --pretrained loads: give --pretrained too, "
            "or leave skip_layers empty"
        )
    return config_class().with_options(**values, ignored_args=ignored), script
