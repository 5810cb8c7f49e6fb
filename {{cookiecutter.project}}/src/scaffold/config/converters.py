"""Converters: the text of a flag or a config.yaml value to a typed value, with one clear
line when it does not fit (argparse.ArgumentTypeError). Shared with backend/options.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

DEVICE_TARGETS = ("auto", "cpu", "cuda", "npu")
# The names OpenI, ModelArts and MindSpore use for the same targets.
DEVICE_ALIASES = {"gpu": "cuda", "ascend": "npu"}


def _parse(text: str, kind: type[Any], noun: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a {noun}") from None


def integer(minimum: int | None = None) -> Callable[[str], int]:
    """A whole number, at least ``minimum`` when one is given."""

    def convert(text: str) -> int:
        value = int(_parse(text, int, "whole number"))
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{text} must be at least {minimum}")
        return value

    return convert


def number(low: float, high: float | None = None, with_low: bool = False) -> Callable[[str], float]:
    """A number above ``low`` (or equal to it, ``with_low``), and below ``high`` when given."""

    def convert(text: str) -> float:
        value = float(_parse(text, float, "number"))
        if (value < low if with_low else value <= low) or (high is not None and value >= high):
            where = f"above {low:g}" if high is None else f"in ({low:g}, {high:g})"
            if with_low:
                where = f"in [{low:g}, {high:g})" if high is not None else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text} must be {where}")
        return value

    return convert


def float_value(text: str) -> float:
    """Any number (a metric's threshold may be negative)."""
    return float(_parse(text, float, "number"))


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


AUTO = "auto"


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
    return "auto" if text.strip().lower() == "auto" else Path(text)


def identifier(text: str) -> str:
    """A model or data format name; checked against the Task's when the run starts (the
    models and your readers live in your files, which the options never import)."""
    return text.strip().lower()


def image_size(text: str) -> tuple[int, ...]:
    parts = [p for p in text.replace("x", ",").split(",") if p.strip()]
    sizes = tuple(integer(1)(p.strip()) for p in parts)
    if len(sizes) == 1:
        sizes = sizes * 2
    if len(sizes) != 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: height,width")
    return sizes


def worker_count(text: str) -> int | None:
    return None if text.strip().lower() == "auto" else integer(0)(text)


def floats(text: str) -> tuple[float, ...]:
    return tuple(float(_parse(word, float, "number")) for word in words(text))
