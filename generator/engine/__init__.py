"""The container engine behind one protocol (types.Engine); the docker SDK stays in sdk.py."""

from __future__ import annotations

from generator.engine.local import DockerEngine, connect
from generator.engine.sdk import context_files
from generator.engine.types import (
    Auth,
    BuildContext,
    BuildSpec,
    ContainerSpec,
    Engine,
    ImageInfo,
    LayerProgress,
    Lines,
    Progress,
    RunResult,
)

__all__ = [
    "Auth",
    "BuildContext",
    "BuildSpec",
    "ContainerSpec",
    "DockerEngine",
    "Engine",
    "ImageInfo",
    "LayerProgress",
    "Lines",
    "Progress",
    "RunResult",
    "connect",
    "context_files",
]
