"""The Docker engine, through the docker SDK: the only module that imports docker.

Everything here returns values or raises generator.errors; nothing prints.
Long operations report progress through callbacks, so the CLI decides how to show it.
"""

from __future__ import annotations

import re
import tarfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors
import docker.utils.build
import requests.exceptions
from docker.types import DeviceRequest

from generator.errors import (
    AuthRefused,
    BaseImageMissing,
    BuildFailed,
    ContainerFailed,
    EngineUnavailable,
    GenError,
    ImageNotFound,
    PushFailed,
    RemoteUnreachable,
)

# Builds that install torch or MindSpore take minutes; the SDK's default is 60 s.
API_TIMEOUT_S = 1800
TAIL_LINES = 20
Lines = Callable[[str], None]


@dataclass(frozen=True)
class ImageInfo:
    """A built image: id, tags, total size, its layers, its user and labels."""

    id: str
    tags: list[str]
    size: int
    layers: list[tuple[str, int]] = field(default_factory=list)
    user: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def runs_as_root(self) -> bool:
        return self.user.split(":")[0] in ("", "root", "0")


@dataclass(frozen=True)
class RunResult:
    """What a finished container left: its exit code and its whole log."""

    exit_code: int
    log: list[str]


@dataclass(frozen=True)
class LayerProgress:
    """One update of a push or pull stream: a layer's short id, its status, bytes so far."""

    layer: str
    status: str
    current: int = 0
    total: int = 0


Progress = Callable[[LayerProgress], None]


@dataclass(frozen=True)
class Accelerators:
    """What the host offers a container: NVIDIA GPUs (through the runtime) or Ascend NPUs."""

    nvidia: bool
    ascend_devices: list[str]

    def describe(self) -> str:
        if self.nvidia:
            return "NVIDIA GPUs"
        if self.ascend_devices:
            return f"{len(self.ascend_devices)} Ascend device node(s)"
        return "no GPU or NPU: running on the CPU"


# What an Ascend container needs from the host besides /dev/davinci*: the driver
# and the tools CANN calls (the layout Huawei's container runtime mounts).
ASCEND_CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
ASCEND_MOUNTS = (
    "/usr/local/Ascend/driver",
    "/usr/local/bin/npu-smi",
    "/usr/local/dcmi",
    "/etc/ascend_install.info",
)


class Engine:
    """A connection to one Docker engine."""

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client

    # -- images -------------------------------------------------------------------
    def image(self, ref: str) -> ImageInfo | None:
        """The image ``ref`` names, or None when the host does not have it."""
        try:
            image = self._client.images.get(ref)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as err:
            raise GenError(f"the engine could not look up {ref}: {err.explanation}") from err
        # (instruction, bytes) per layer, newest first.
        layers = [(str(e.get("CreatedBy", "")), int(e.get("Size", 0))) for e in image.history()]
        config = image.attrs.get("Config") or {}
        return ImageInfo(
            image.id,
            list(image.tags),
            int(image.attrs["Size"]),
            layers,
            user=config.get("User") or "",
            labels=config.get("Labels") or {},
        )

    def require_image(self, ref: str, hint: str) -> ImageInfo:
        found = self.image(ref)
        if found is None:
            raise ImageNotFound(f"no image {ref} on this host; {hint}")
        return found

    def image_ids(self) -> set[str]:
        """Every image on the host, build-cache layers included."""
        return {image.id for image in self._client.images.list(all=True)}

    def container_ids(self) -> set[str]:
        """Every container on the host, running or not."""
        return {container.id for container in self._client.containers.list(all=True)}

    def remove_image(self, ref: str) -> None:
        """Remove an image (and its untagged parents); absent is fine."""
        try:
            self._client.images.remove(ref, force=True)
        except docker.errors.ImageNotFound:
            pass

    def remove_images(self, ids: set[str]) -> set[str]:
        """Remove several images, children before parents; return those that stay."""
        left = set(ids)
        while left:
            removed = set()
            for image_id in left:
                try:
                    self._client.images.remove(image_id, force=True)
                except docker.errors.ImageNotFound:
                    pass
                except docker.errors.APIError:
                    continue  # a child still uses it: the next pass
                removed.add(image_id)
            if not removed:
                break
            left -= removed
        return left

    def tag(self, ref: str, repository: str, tag: str) -> None:
        self._client.images.get(ref).tag(repository, tag)

    # -- registries ---------------------------------------------------------------
    def push(
        self,
        local_ref: str,
        repository: str,
        tag: str,
        *,
        auth: dict[str, str] | None,
        on_progress: Progress,
    ) -> str:
        """Tag ``local_ref`` as ``repository:tag``, push it and return the manifest digest.

        ``auth`` None means the credentials ``docker login`` stored. Error chunks in
        the stream raise RemoteUnreachable, AuthRefused or PushFailed.
        """
        remote_ref = f"{repository}:{tag}"
        tagged_here = self.image(remote_ref) is None
        self.tag(local_ref, repository, tag)
        stream = self._stream(
            lambda: self._client.api.push(
                repository, tag=tag, stream=True, decode=True, auth_config=auth
            ),
            repository,
            auth,
        )
        digest = None
        try:
            for chunk in stream:
                digest = (chunk.get("aux") or {}).get("Digest") or digest
                _report(chunk, on_progress)
            if not digest:
                raise PushFailed(f"the push of {remote_ref} ended without a digest")
        except BaseException:
            if tagged_here:  # a failed push leaves no tag behind (the image stays)
                with suppress(docker.errors.APIError):
                    self._client.images.remove(remote_ref)
            raise
        return digest

    def pull(self, reference: str, *, auth: dict[str, str] | None, on_progress: Progress) -> str:
        """Pull ``reference`` (``name:tag`` or ``name@sha256:...``); return the image id."""
        repository, _, digest = reference.partition("@")
        stream = self._stream(
            lambda: self._client.api.pull(
                repository, tag=digest or None, stream=True, decode=True, auth_config=auth
            ),
            repository,
            auth,
        )
        for chunk in stream:
            _report(chunk, on_progress)
        return self.require_image(reference, "the pull ended without it").id

    def _stream(
        self, start: Callable[[], Iterator[dict]], repository: str, auth: dict[str, str] | None
    ) -> Iterator[dict]:
        """The chunks of a push or pull; an error (at the start or in a chunk) raises."""
        registry = repository.split("/", 1)[0]
        secret = (auth or {}).get("password") or ""
        try:
            for chunk in start():
                if "error" in chunk or "errorDetail" in chunk:
                    detail = chunk.get("errorDetail") or {}
                    message = str(chunk.get("error") or detail.get("message") or chunk)
                    raise _registry_error(registry, message, secret)
                yield chunk
        except docker.errors.APIError as err:
            raise _registry_error(registry, str(err.explanation or err), secret) from err
        except requests.exceptions.ConnectionError as err:
            raise EngineUnavailable(f"lost the Docker engine during the transfer: {err}") from err

    def build(
        self,
        context: IO[bytes],
        *,
        dockerfile: str,
        tag: str,
        buildargs: dict[str, str],
        log: IO[str],
        on_line: Lines,
        nocache: bool = False,
        network_mode: str | None = None,
    ) -> ImageInfo:
        """Build from a tar ``context`` with the classic builder, streaming each log line.

        Raises BaseImageMissing when FROM names an image that is not here (nothing
        is pulled), BuildFailed with the failing step and the log tail otherwise.
        """
        tail: list[str] = []
        step = ""
        image_id = None
        try:
            stream = self._client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile=dockerfile,
                tag=tag,
                buildargs=buildargs,
                nocache=nocache,
                rm=True,
                forcerm=True,
                pull=False,
                network_mode=network_mode,
                decode=True,
            )
            for chunk in stream:
                if "error" in chunk:
                    message = str(chunk["error"]).strip()
                    log.write(message + "\n")
                    if re.match(r"Step \S+ : FROM ", step):
                        base = _from_image(step, buildargs)
                        raise BaseImageMissing(
                            f"{base} is not on this host and cannot be pulled here: load it "
                            "(docker load) or pass --base-image with a local image"
                        )
                    raise BuildFailed(
                        f"build failed at {step or 'the first step'}: {message}",
                        step,
                        tail[-TAIL_LINES:],
                        log.name,
                    )
                if "aux" in chunk and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
                text = chunk.get("stream", "")
                for line in text.splitlines():
                    log.write(line + "\n")
                    if line.startswith("Step "):
                        step = line
                    if line.strip():
                        tail.append(line)
                        del tail[:-TAIL_LINES]
                        on_line(line)
        except docker.errors.APIError as err:
            message = f"the engine refused the build: {err.explanation}"
            raise BuildFailed(message, step, tail, log.name) from err
        except requests.exceptions.ConnectionError as err:
            raise EngineUnavailable(f"lost the Docker engine during the build: {err}") from err
        built = self.image(image_id or tag)
        if built is None:
            raise BuildFailed("the build ended without an image", step, tail, log.name)
        return built

    # -- containers ---------------------------------------------------------------
    def accelerators(self) -> Accelerators:
        """GPUs when the engine has the NVIDIA runtime, NPUs when /dev/davinciN exist."""
        runtimes = self._client.info().get("Runtimes", {}) or {}
        davinci = sorted(
            str(p) for p in Path("/dev").glob("davinci*") if re.fullmatch(r"davinci\d+", p.name)
        )
        return Accelerators(nvidia="nvidia" in runtimes, ascend_devices=davinci)

    def run(
        self,
        image: str,
        command: list[str],
        *,
        timeout_s: float,
        on_line: Lines,
        volumes: dict[str, str],
        accelerators: Accelerators | None = None,
        user: str | None = None,
        environment: dict[str, str] | None = None,
    ) -> RunResult:
        """Run ``command`` in a fresh container with networking off and wait for it.

        The container is killed on timeout or Ctrl-C and removed in every case:
        nothing is left running. A timeout raises ContainerFailed.
        """
        kwargs: dict[str, Any] = {
            "network_mode": "none",
            # The default 64 MB /dev/shm starves DataLoader workers and NCCL.
            "shm_size": "2g",
            "volumes": {host: {"bind": inside, "mode": "rw"} for host, inside in volumes.items()},
            "environment": environment or {},
            "user": user,
        }
        if accelerators and accelerators.nvidia:
            kwargs["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        elif accelerators and accelerators.ascend_devices:
            nodes = accelerators.ascend_devices + [
                d for d in ASCEND_CONTROL_DEVICES if Path(d).exists()
            ]
            kwargs["devices"] = [f"{d}:{d}" for d in nodes]
            for path in ASCEND_MOUNTS:
                if Path(path).exists():
                    kwargs["volumes"][path] = {"bind": path, "mode": "ro"}
        with self._container(image, command, kwargs) as container:
            log: list[str] = []
            # The log stream blocks until the container ends: a watchdog thread
            # kills it at the deadline, which ends the stream.
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                with suppress(docker.errors.APIError):
                    container.kill()

            watchdog = threading.Timer(timeout_s, expire)
            container.start()
            watchdog.start()
            try:
                for raw in container.logs(stream=True, follow=True):
                    for line in raw.decode("utf-8", "replace").splitlines():
                        log.append(line)
                        on_line(line)
                status = container.wait()
            finally:
                watchdog.cancel()
            if expired.is_set():
                raise ContainerFailed(
                    f"timed out after {timeout_s:.0f} s; the container was killed",
                    None,
                    log[-TAIL_LINES:],
                )
            return RunResult(int(status.get("StatusCode", -1)), log)

    @contextmanager
    def _container(self, image: str, command: list[str], kwargs: dict[str, Any]) -> Iterator[Any]:
        try:
            container = self._client.containers.create(image, command, **kwargs)
        except docker.errors.ImageNotFound as err:
            raise ImageNotFound(f"no image {image} on this host; build it first") from err
        except docker.errors.APIError as err:
            raise GenError(f"the engine could not create a container: {err.explanation}") from err
        try:
            yield container
        finally:
            # Runs on success, timeout and KeyboardInterrupt alike.
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass


def build_context(project_dir: Path, dockerfile: str, extra: dict[str, Path]) -> IO[bytes]:
    """The build context as a tar file: the project as its .dockerignore filters it,
    plus ``extra`` directories (a wheelhouse kept elsewhere) under the given names."""
    ignore = project_dir / ".dockerignore"
    patterns = []
    if ignore.is_file():
        for line in ignore.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                patterns.append(line.strip())
    context = docker.utils.build.tar(
        str(project_dir), exclude=patterns, dockerfile=(dockerfile, None)
    )
    with tarfile.open(fileobj=context, mode="a") as archive:
        for name, path in extra.items():
            archive.add(str(path), arcname=name)
    context.seek(0)
    return context


def _report(chunk: dict, on_progress: Progress) -> None:
    if chunk.get("id") and chunk.get("status"):
        detail = chunk.get("progressDetail") or {}
        on_progress(
            LayerProgress(
                str(chunk["id"]),
                str(chunk["status"]),
                int(detail.get("current") or 0),
                int(detail.get("total") or 0),
            )
        )


def _registry_error(registry: str, message: str, secret: str) -> PushFailed:
    """The error a registry transfer's message describes, with what to do about it."""
    if secret:
        message = message.replace(secret, "***")
    low = message.lower()
    if "http response to https client" in low:
        return RemoteUnreachable(
            f"{registry} speaks plain HTTP: add it to insecure-registries in "
            "/etc/docker/daemon.json (and restart dockerd), or serve it with TLS",
            [message],
        )
    if re.search(
        r"connection refused|no such host|i/o timeout|dial tcp|network is unreachable|"
        r"no route to host|connection reset|tls handshake timeout|eof$",
        low,
    ):
        return RemoteUnreachable(
            f"the registry {registry} does not answer: check --registry and the network "
            "(the engine's proxy settings apply)",
            [message],
        )
    if re.search(r"unauthorized|authentication required|denied|no basic auth|\b401\b", low):
        return AuthRefused(
            f"the registry {registry} refused the credentials: set GEN_REGISTRY_USER and "
            f"GEN_REGISTRY_PASSWORD, or run docker login {registry}",
            [message],
        )
    return PushFailed(f"the registry {registry} refused the transfer: {message}", [message])


def _from_image(step: str, buildargs: dict[str, str]) -> str:
    """The image a FROM step names, with ${ARG} references filled in."""
    match = re.search(r"\bFROM\s+(\S+)", step, re.I)
    name = match.group(1) if match else "the base image"
    return re.sub(r"\$\{(\w+)\}", lambda m: buildargs.get(m.group(1), m.group(0)), name)


def connect(timeout_s: int = API_TIMEOUT_S) -> Engine:
    """Connect to the engine DOCKER_HOST names (else /var/run/docker.sock); check it answers."""
    try:
        client = docker.from_env(timeout=timeout_s)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as err:
        raise EngineUnavailable(
            "no Docker engine answers (DOCKER_HOST or /var/run/docker.sock): start dockerd "
            f"or set DOCKER_HOST ({err.__class__.__name__})"
        ) from err
    return Engine(client)
