"""sweep.yaml: the search space over the project's own options, by their config.yaml keys, the
metric and its direction, the number of trials, the sampler and the pruner; read and checked
whole before any trial runs (a mistake is one line)."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from src.scaffold.config import ConfigError
from src.scaffold.config.options import Option
from src.scaffold.config.platform_args import unknown_key
from src.scaffold.config.sections import MonitorOptions

KEYS = ("space", "metric", "direction", "trials", "sampler", "pruner", "startup_trials")
RANGES = ("log", "uniform", "int")
SAMPLERS = ("tpe", "random", "grid")
PRUNERS = ("median", "none")
DIRECTIONS = {"max": "maximize", "min": "minimize", "maximize": "maximize", "minimize": "minimize"}


@dataclass(frozen=True)
class Dimension:
    """One searched option: its config.yaml key, its flag, and what a trial draws from."""

    key: str
    name: str  # the option's name: its flag is --name
    kind: str  # "choice", or one of RANGES
    values: tuple[Any, ...]  # the choices, or (low, high)

    def suggest(self, trial: Any) -> Any:
        """The trial's value, drawn by Optuna's sampler."""
        if self.kind == "choice":
            return trial.suggest_categorical(self.key, list(self.values))
        low, high = self.values
        if self.kind == "int":
            return trial.suggest_int(self.key, low, high)
        return trial.suggest_float(self.key, low, high, log=self.kind == "log")


@dataclass(frozen=True)
class Sweep:
    """sweep.yaml, checked."""

    dimensions: tuple[Dimension, ...]
    metric: str
    direction: str  # "maximize" or "minimize"
    trials: int
    sampler: str
    pruner: str
    startup_trials: int

    def flags(self, values: dict[str, Any]) -> list[str]:
        """A trial's values as train.py's flags."""
        return [arg for d in self.dimensions for arg in (f"--{d.name}", _text(values[d.key]))]


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def read(path: Path, monitor: MonitorOptions, options: dict[str, Option]) -> Sweep:
    """``path`` (sweep.yaml) checked against ``options`` (train.py's); ``monitor``: the trials'
    config.yaml's, the default metric."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {' '.join(str(err).split())}") from err
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping (space:, metric:, trials: ...)")
    for key in raw:
        if key not in KEYS:
            raise ConfigError(f"{path}: unknown key {key!r} (known: {', '.join(KEYS)})")
    space = raw.get("space")
    if not isinstance(space, dict) or not space:
        raise ConfigError(
            f"{path}: space: give at least one option to search, e.g. lr: [0.1, 0.01]"
        )
    keys = {option.key: name for name, option in options.items()}
    dimensions = tuple(_dimension(path, str(k), v, keys, options) for k, v in space.items())
    metric = raw.get("metric") or monitor.metric
    direction = DIRECTIONS.get(str(raw.get("direction") or monitor.mode))
    if direction is None:
        raise ConfigError(f"{path}: direction {raw['direction']!r}: give max or min")
    sampler = _one_of(path, "sampler", raw.get("sampler", "tpe"), SAMPLERS)
    if sampler == "grid" and any(d.kind != "choice" for d in dimensions):
        ranged = next(d.key for d in dimensions if d.kind != "choice")
        raise ConfigError(f"{path}: sampler grid takes lists only, and space.{ranged} is a range")
    return Sweep(
        dimensions,
        str(metric),
        direction,
        _count(path, "trials", raw.get("trials", 20), 1),
        sampler,
        _one_of(path, "pruner", raw.get("pruner", "median"), PRUNERS),
        _count(path, "startup_trials", raw.get("startup_trials", 2), 0),
    )


def _one_of(path: Path, key: str, value: Any, known: tuple[str, ...]) -> str:
    if value not in known:
        raise ConfigError(f"{path}: {key} {value!r}: choose {', '.join(known)}")
    return str(value)


def _count(path: Path, key: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{path}: {key} {value!r}: give a whole number, at least {least}")
    return value


def _dimension(
    path: Path, key: str, value: Any, keys: dict[str, str], options: dict[str, Option]
) -> Dimension:
    where = f"{path}: space.{key}"
    if key not in keys:
        raise ConfigError(f"{path}: space: {unknown_key(key, keys)}")
    name = keys[key]
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{where}: an empty list: give the values to try")
        return Dimension(key, name, "choice", tuple(_check(where, options[name], v) for v in value))
    kinds = list(value) if isinstance(value, dict) else []
    if len(kinds) != 1 or kinds[0] not in RANGES:
        raise ConfigError(
            where + ": give a list of values, or a range: {log: [low, high]}, "
            "{uniform: [low, high]} or {int: [low, high]}"
        )
    kind = kinds[0]
    ends = value[kind]
    numbers = (int,) if kind == "int" else (int, float)
    if (
        not isinstance(ends, list)
        or len(ends) != 2
        or not all(isinstance(e, numbers) and not isinstance(e, bool) for e in ends)
    ):
        raise ConfigError(
            f"{where}: {kind}: give [low, high], two {'whole ' * (kind == 'int')}numbers"
        )
    low, high = ends
    if kind == "log" and low <= 0:
        raise ConfigError(
            f"{where}: log range [{low}, {high}] reaches 0: both ends must be above 0"
        )
    if not low < high and not (kind == "int" and low == high):
        raise ConfigError(f"{where}: {kind} range [{low}, {high}] is empty: low must be below high")
    for end in ends:
        _check(where, options[name], end)
    return Dimension(key, name, kind, (low, high) if kind == "int" else (float(low), float(high)))


def _check(where: str, option: Option, value: Any) -> Any:
    """A value as train.py would take it, else one line."""
    try:
        option.convert(_text(value))
    except (argparse.ArgumentTypeError, ValueError) as err:
        raise ConfigError(f"{where}: {value!r}: {err}") from err
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {value!r} is not a finite number")
    return value
