"""The model registry behind src/model.py: what a model function is given (the data's
shape) and how @model records it. Framework-free: each framework's model.py uses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class DataShape:
    """One sample's input shape, (C, H, W) for images or (F,) for table rows, and the
    number of classes."""

    input: tuple[int, ...]
    num_classes: int


@dataclass(frozen=True)
class ModelSpec:
    build: Callable[[DataShape], Any]
    # The input a model takes when there is no data to read it from (a --smoke run).
    input_shape: tuple[int, ...]
    # The output layer's name: left initialised by --pretrained with another class count.
    head: str


MODELS: dict[str, ModelSpec] = {}


def model(name: str, input_shape: tuple[int, ...], head: str = "") -> Callable:
    """Register a model function under ``name`` (config.yaml's model.name)."""

    def register(build: Callable[[DataShape], Any]) -> Callable[[DataShape], Any]:
        MODELS[name] = ModelSpec(build, tuple(input_shape), head)
        return build

    return register


def image_input(name: str, shape: DataShape) -> tuple[int, int, int]:
    """(C, H, W) of image data; one clear line for data a model of images cannot take."""
    if len(shape.input) != 3:
        raise ValueError(
            f"model {name} takes images (C, H, W); the data's samples have shape {shape.input}: "
            "use mlp, or a model of your own"
        )
    channels, height, width = shape.input
    return channels, height, width
