"""Training options: code defaults, overridden by config.yaml, overridden by command-line flags.

Each option is declared once, as a field of Config (options.py; a MindSpore project adds
its own in src/scaffold/backend/options.py) with its default, converter and help: the flag
(--data_format), the config.yaml key (data: format) and --help all come from it.
"""

from src.scaffold.config.options import (
    DEFAULT_CONFIG,
    LABELS,
    MODES,
    SCHEDULES,
    SWITCH,
    Config,
    Option,
    env_first,
    env_int,
    option,
    options_of,
    yaml_key,
)
from src.scaffold.config.parse import build_parser, parse_config, parse_script
from src.scaffold.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG",
    "LABELS",
    "MODES",
    "SCHEDULES",
    "SWITCH",
    "Config",
    "ConfigError",
    "Option",
    "build_parser",
    "env_first",
    "env_int",
    "option",
    "options_of",
    "parse_config",
    "parse_script",
    "yaml_key",
]
