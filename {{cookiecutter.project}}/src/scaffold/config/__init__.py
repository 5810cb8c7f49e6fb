"""Training options: code defaults, overridden by config.yaml, overridden by command-line flags.

Each option is declared once, as a field of Config or of one of its sections (options.py:
data:'s in DataOptions; a MindSpore project adds its own in src/scaffold/backend/options.py)
with its default, converter and help: the flag (--data_format), the config.yaml key (data:
format) and --help all come from it. Each part of the floor is handed its section (cfg.data)
or plain values; what a run resolves (its places on the node) is never written back.
"""

from src.scaffold.config.options import (
    DEFAULT_CONFIG,
    Config,
    Named,
    Option,
    env_first,
    env_int,
    option,
    options_of,
)
from src.scaffold.config.parse import build_parser, parse_config, parse_script
from src.scaffold.config.sections import (
    LABELS,
    MODES,
    SCHEDULES,
    SWITCH,
    DataOptions,
    EarlyStopOptions,
    MonitorOptions,
    Places,
    ScheduleOptions,
    Source,
)
from src.scaffold.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG",
    "LABELS",
    "MODES",
    "SCHEDULES",
    "SWITCH",
    "Config",
    "ConfigError",
    "DataOptions",
    "EarlyStopOptions",
    "MonitorOptions",
    "Named",
    "Option",
    "Places",
    "ScheduleOptions",
    "Source",
    "build_parser",
    "env_first",
    "env_int",
    "option",
    "options_of",
    "parse_config",
    "parse_script",
]
