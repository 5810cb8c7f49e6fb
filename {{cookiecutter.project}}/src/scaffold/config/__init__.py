"""Training options: code defaults, overridden by config.yaml, overridden by command-line flags.
Each is one field (options.py, sections.py, a MindSpore project's backend/options.py)."""

from src.scaffold.config.converters import env_first, env_int
from src.scaffold.config.options import DEFAULT_CONFIG, Config, Named, option, options_of
from src.scaffold.config.parse import parse_config, parse_script
from src.scaffold.config.sections import SWITCH, DataOptions, Places, ScheduleOptions, Source
from src.scaffold.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG",
    "SWITCH",
    "Config",
    "ConfigError",
    "DataOptions",
    "Named",
    "Places",
    "ScheduleOptions",
    "Source",
    "env_first",
    "env_int",
    "option",
    "options_of",
    "parse_config",
    "parse_script",
]
