"""The Engine protocol over a local Docker engine, through the SDK door (sdk.py)."""

from __future__ import annotations

from typing import IO, Any

from generator.engine import build as builds
from generator.engine import registry, run
from generator.engine.sdk import API_TIMEOUT_S, Sdk
from generator.engine.sdk import connect as sdk_connect
from generator.engine.types import (
    Auth,
    BuildContext,
    BuildSpec,
    ContainerSpec,
    ImageInfo,
    Lines,
    Progress,
    RunResult,
)
from generator.errors import EngineError, EngineUnavailable, ImageNotFound


class DockerEngine:
    """A connection to one Docker engine; see generator.engine.types.Engine."""

    def __init__(self, sdk: Sdk) -> None:
        self._sdk = sdk

    def image(self, ref: str) -> ImageInfo | None:
        return builds.image_info(self._sdk, ref)

    def require_image(self, ref: str, hint: str) -> ImageInfo:
        found = self.image(ref)
        if found is None:
            raise ImageNotFound(f"no image {ref} on this host; {hint}")
        return found

    def image_ids(self) -> set[str]:
        return self._sdk.image_ids()

    def container_ids(self) -> set[str]:
        return self._sdk.container_ids()

    def remove_images(self, refs: set[str]) -> set[str]:
        left = set(refs)
        while left:
            removed = set()
            for ref in left:
                try:
                    self._sdk.remove_image(ref)
                except EngineUnavailable:
                    raise
                except EngineError:
                    continue  # a child still uses it: the next pass
                removed.add(ref)
            if not removed:
                break
            left -= removed
        return left

    def tag(self, ref: str, repository: str, tag: str) -> None:
        self._sdk.tag(ref, repository, tag)

    def info(self) -> dict[str, Any]:
        return self._sdk.info()

    def registry_knows(self, ref: str) -> str | None:
        return self._sdk.registry_knows(ref)

    def runtimes(self) -> set[str]:
        return self._sdk.runtimes()

    def build(
        self, context: BuildContext, spec: BuildSpec, log: IO[str], on_line: Lines
    ) -> ImageInfo:
        return builds.build(self._sdk, context, spec, log, on_line)

    def run(self, spec: ContainerSpec, *, timeout_s: float, on_line: Lines) -> RunResult:
        return run.run(self._sdk, spec, timeout_s=timeout_s, on_line=on_line)

    def push(self, local_ref: str, remote_ref: str, *, auth: Auth, on_progress: Progress) -> str:
        return registry.push(self._sdk, local_ref, remote_ref, auth=auth, on_progress=on_progress)

    def pull(
        self, reference: str, *, auth: Auth, on_progress: Progress, platform: str | None = None
    ) -> str:
        return registry.pull(
            self._sdk, reference, auth=auth, on_progress=on_progress, platform=platform
        )


def connect(timeout_s: int = API_TIMEOUT_S) -> DockerEngine:
    """The engine DOCKER_HOST names (else /var/run/docker.sock); EngineUnavailable if none."""
    return DockerEngine(sdk_connect(timeout_s))
