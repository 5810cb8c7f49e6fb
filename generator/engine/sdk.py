"""The docker SDK behind one door: the only module of gen that imports docker (or requests).

Every call goes through ``_translated``, so the SDK's exceptions never leave this
module: an engine that does not answer, or stops answering mid-call (a closed
socket, a broken stream), is EngineUnavailable; a refusal is EngineError with the
engine's explanation. Streams are translated while they are read, not only when
they start. Methods return plain values (dicts, ids, byte chunks).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors
import docker.utils.build
import requests.exceptions
import urllib3.exceptions
from docker.types import DeviceRequest

from generator.engine.types import ContainerSpec
from generator.errors import EngineError, EngineUnavailable, GenError, ImageNotFound

# Builds that install torch or MindSpore take minutes; the SDK's default is 60 s.
API_TIMEOUT_S = 1800
RESTART = "start dockerd again (or point DOCKER_HOST at one that runs) and retry"


@contextmanager
def _translated(doing: str) -> Iterator[None]:
    """Turn whatever the SDK raises while ``doing`` something into gen's own errors."""
    try:
        yield
    except GenError:
        raise
    # First: docker's APIError is also a requests HTTPError.
    except docker.errors.APIError as err:
        said = " ".join(str(err.explanation or err).split())
        raise EngineError(f"the Docker engine failed at {doing}: {said}") from err
    except requests.exceptions.Timeout as err:
        raise EngineUnavailable(
            f"the Docker engine did not answer within {API_TIMEOUT_S} s while {doing}"
        ) from err
    except (
        requests.exceptions.RequestException,
        urllib3.exceptions.HTTPError,
        ConnectionError,
        TimeoutError,
    ) as err:
        raise EngineUnavailable(
            f"lost the Docker engine while {doing} ({type(err).__name__}): {RESTART}"
        ) from err
    except docker.errors.DockerException as err:
        raise EngineError(f"the Docker engine failed at {doing}: {err}") from err


def _stream(doing: str, start: Any) -> Iterator[Any]:
    """The chunks ``start()`` yields, translated while they are read."""
    with _translated(doing):
        yield from start()


class Sdk:
    """One connection, one method a call; nothing here prints or decides."""

    def __init__(self, client: docker.DockerClient) -> None:
        self._api = client.api

    def ping(self) -> bool:
        """Whether the engine still takes new connections: a stopping dockerd closes its
        socket first and serves the connections it has (ours are pooled) to the end."""
        try:
            fresh = docker.from_env(timeout=10)
            try:
                return bool(fresh.ping())
            finally:
                fresh.close()
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            return False

    # -- images -------------------------------------------------------------------
    def inspect_image(self, ref: str) -> dict[str, Any] | None:
        """The image's attributes, or None when the host does not have it."""
        with _translated(f"looking up the image {ref}"):
            try:
                return self._api.inspect_image(ref)
            except docker.errors.ImageNotFound:
                return None

    def image_ids(self) -> set[str]:
        with _translated("listing images"):
            return set(self._api.images(all=True, quiet=True))

    def remove_image(self, ref: str) -> bool:
        """Remove an image (force); False when it was already gone. A conflict raises."""
        with _translated(f"removing the image {ref}"):
            try:
                self._api.remove_image(ref, force=True)
            except docker.errors.ImageNotFound:
                return False
        return True

    def tag(self, ref: str, repository: str, tag: str) -> None:
        with _translated(f"tagging {ref} as {repository}:{tag}"):
            try:
                self._api.tag(ref, repository, tag)
            except docker.errors.ImageNotFound as err:
                raise ImageNotFound(f"no image {ref} on this host; build it first") from err

    def runtimes(self) -> set[str]:
        with _translated("reading the engine's runtimes"):
            return set(self._api.info().get("Runtimes") or {})

    def info(self) -> dict[str, Any]:
        """`docker info`: what gen doctor reads (runtimes, the default, the data root)."""
        with _translated("reading the engine's information"):
            return dict(self._api.info())

    def registry_knows(self, ref: str) -> str | None:
        """None when the registry serves ``ref`` (the engine asks it, pulling nothing);
        else what the engine said."""
        try:
            with _translated(f"asking the registry for {ref}"):
                self._api.inspect_distribution(ref)
        except EngineUnavailable:
            raise
        except EngineError as err:
            return str(err)
        return None

    # -- streams ------------------------------------------------------------------
    def build(self, context: IO[bytes], **kwargs: Any) -> Iterator[dict[str, Any]]:
        """The classic builder's decoded stream; nothing is pulled that is not asked for."""
        return _stream(
            "building",
            lambda: self._api.build(
                fileobj=context, custom_context=True, rm=True, forcerm=True, decode=True, **kwargs
            ),
        )

    def push(
        self, repository: str, tag: str, auth: dict[str, str] | None
    ) -> Iterator[dict[str, Any]]:
        return _stream(
            f"pushing {repository}:{tag}",
            lambda: self._api.push(repository, tag=tag, stream=True, decode=True, auth_config=auth),
        )

    def pull(
        self,
        repository: str,
        tag: str | None,
        auth: dict[str, str] | None,
        platform: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        return _stream(
            f"pulling {repository}",
            lambda: self._api.pull(
                repository,
                tag=tag,
                stream=True,
                decode=True,
                auth_config=auth,
                platform=platform,
            ),
        )

    # -- containers ---------------------------------------------------------------
    def container_ids(self) -> set[str]:
        with _translated("listing containers"):
            return {c["Id"] for c in self._api.containers(all=True, quiet=True)}

    def create_container(self, spec: ContainerSpec) -> str:
        """Create (not start) a container with networking off; return its id."""
        binds = {host: {"bind": inside, "mode": "rw"} for host, inside in spec.volumes.items()}
        binds.update({path: {"bind": path, "mode": "ro"} for path in spec.read_only})
        with _translated(f"creating a container from {spec.image}"):
            host_config = self._api.create_host_config(
                binds=binds,
                network_mode="none",
                # The default 64 MB /dev/shm starves DataLoader workers and NCCL.
                shm_size="2g",
                devices=[f"{d}:{d}" for d in spec.devices] or None,
                group_add=spec.group_add or None,
                device_requests=(
                    [DeviceRequest(count=-1, capabilities=[["gpu"]])] if spec.gpus else None
                ),
            )
            try:
                created = self._api.create_container(
                    spec.image,
                    spec.command,
                    user=spec.user,
                    environment=spec.environment,
                    volumes=[bind["bind"] for bind in binds.values()] or None,
                    host_config=host_config,
                )
            except docker.errors.ImageNotFound as err:
                raise ImageNotFound(f"no image {spec.image} on this host; build it first") from err
        return str(created["Id"])

    def start(self, container: str) -> None:
        with _translated("starting a container"):
            self._api.start(container)

    def logs(self, container: str) -> Iterator[bytes]:
        """The container's output as it comes, until it ends."""
        return _stream(
            "following a container's log",
            lambda: self._api.logs(container, stream=True, follow=True),
        )

    def wait(self, container: str) -> int:
        with _translated("waiting for a container"):
            return int(self._api.wait(container).get("StatusCode", -1))

    def kill(self, container: str) -> None:
        """Kill a container; one that already ended or is gone is fine."""
        with _translated("killing a container"):
            try:
                self._api.kill(container)
            except docker.errors.APIError as err:
                if err.status_code not in (404, 409):
                    raise

    def remove_container(self, container: str) -> None:
        with _translated("removing a container"):
            try:
                self._api.remove_container(container, force=True)
            except docker.errors.NotFound:
                pass


def context_files(root: Path, patterns: list[str]) -> list[str]:
    """The paths under ``root`` a .dockerignore with ``patterns`` lets into a context,
    by docker's own rules (``!`` exceptions, ``**``)."""
    with _translated("reading the .dockerignore"):
        return sorted(docker.utils.build.exclude_paths(str(root), list(patterns)))


def connect(timeout_s: int = API_TIMEOUT_S) -> Sdk:
    """Connect to the engine DOCKER_HOST names (else /var/run/docker.sock); check it answers."""
    try:
        client = docker.from_env(timeout=timeout_s)
        client.ping()
    except (
        docker.errors.DockerException,
        requests.exceptions.RequestException,
        urllib3.exceptions.HTTPError,
        OSError,
    ) as err:
        raise EngineUnavailable(
            "no Docker engine answers (DOCKER_HOST or /var/run/docker.sock): start dockerd "
            f"or set DOCKER_HOST ({err.__class__.__name__})"
        ) from err
    return Sdk(client)
