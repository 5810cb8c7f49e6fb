"""The container engine behind one protocol (types.Engine); the docker SDK stays in sdk.py."""

from __future__ import annotations

from generator.engine.local import DockerEngine
from generator.engine.sdk import API_TIMEOUT_S, context_files
from generator.engine.sdk import connect as _connect
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


def connect(timeout_s: int = API_TIMEOUT_S) -> Engine:
    """The engine DOCKER_HOST names (else /var/run/docker.sock); EngineUnavailable if none."""
    return DockerEngine(_connect(timeout_s))
