"""Converters: the text of a flag, a config.yaml value (argparse.ArgumentTypeError when it does
not fit) or an environment variable a launcher sets (ConfigError) to a typed value."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Callable

from src.scaffold.errors import ConfigError

DEVICE_TARGETS = ("auto", "cpu", "cuda", "npu")
DEVICE_ALIASES = {"gpu": "cuda", "ascend": "npu"}  # OpenI's, ModelArts' and MindSpore's names
AUTO = "auto"


def _parse(text: str, kind: type[Any], noun: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a {noun}") from None


def integer(minimum: int | None = None) -> Callable[[str], int]:
    def convert(text: str) -> int:
        value = _parse(text, int, "whole number")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{text} must be at least {minimum}")
        return value

    return convert


def number(low: float, high: float | None = None, with_low: bool = False) -> Callable[[str], float]:
    """A number above ``low`` (or equal to it, ``with_low``), and below ``high`` when given."""

    def convert(text: str) -> float:
        value = float_value(text)
        if (value < low if with_low else value <= low) or (high is not None and value >= high):
            if with_low:
                where = f"in [{low:g}, {high:g})" if high is not None else f"at least {low:g}"
            else:
                where = f"above {low:g}" if high is None else f"in ({low:g}, {high:g})"
            raise argparse.ArgumentTypeError(f"{text} must be {where}")
        return value

    return convert


def float_value(text: str) -> float:
    """Any number (a metric's threshold may be negative)."""
    return _parse(text, float, "number")


def choice(*allowed: str) -> Callable[[str], str]:
    """One of ``allowed``, compared without case."""

    def convert(text: str) -> str:
        if text.lower() not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(allowed)}")
        return text.lower()

    return convert


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def words(text: str) -> tuple[str, ...]:
    """A comma-separated list (classifier.4,features.0), empty items dropped."""
    return tuple(word.strip() for word in text.split(",") if word.strip())


def keywords(text: str) -> dict[str, Any]:
    """name=value pairs (layers=6,heads=8); numbers, true, false and null read as such."""
    found: dict[str, Any] = {}
    for item in words(text):
        name, equals, value = (part.strip() for part in item.partition("="))
        if not equals or not name.isidentifier():
            raise argparse.ArgumentTypeError(f"{item!r} is not name=value (layers=6,heads=8)")
        found[name] = _literal(value)
    return found


def _literal(text: str) -> Any:
    if text.lower() in ("true", "false", "null", "none"):
        return {"true": True, "false": False}.get(text.lower())
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def location(text: str) -> Path | str:
    """A directory, an obs:// URL, or auto: where the platform puts it, if this is one."""
    if text.strip().lower() == AUTO:
        return AUTO
    # A URL stays a string: Path("obs://b/d") would collapse it to "obs:/b/d".
    return text if "://" in text else Path(text)


def device_target_name(text: str) -> str:
    target = DEVICE_ALIASES.get(text.lower(), text.lower())
    if target not in DEVICE_TARGETS:
        raise argparse.ArgumentTypeError(
            f"unknown device target {text!r}; choose one of {', '.join(DEVICE_TARGETS)}"
        )
    return target


def resume_value(text: str) -> Path | str:
    return AUTO if text.strip().lower() == AUTO else Path(text)


def identifier(text: str) -> str:
    """A model or data format name, checked against the Task's when the run starts."""
    return text.strip().lower()


def image_size(text: str) -> tuple[int, ...]:
    sizes = tuple(integer(1)(p.strip()) for p in text.replace("x", ",").split(",") if p.strip())
    if len(sizes) == 1:
        sizes = sizes * 2
    if len(sizes) != 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: height,width")
    return sizes


def worker_count(text: str) -> int | None:
    return None if text.strip().lower() == AUTO else integer(0)(text)


def floats(text: str) -> tuple[float, ...]:
    return tuple(float_value(word) for word in words(text))


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
    """The first of ``names`` the environment sets, as a whole number; None when none is."""
    return next((value for name in names if (value := env_int(name)) is not None), None)
