"""What image build, smoke and push ask of a container engine: the protocol, its values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

Lines = Callable[[str], None]
# A registry login (username, password); None: the one docker login stored.
Auth = dict[str, str] | None


@dataclass(frozen=True)
class ImageInfo:
    """An image on the host: id, total size, its user, labels, platform and parent."""

    id: str
    size: int
    user: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    architecture: str = "amd64"
    parent: str = ""  # the image a classic build step made it from ("" for pulled images)

    @property
    def runs_as_root(self) -> bool:
        return self.user.split(":")[0] in ("", "root", "0")


@dataclass(frozen=True)
class BuildContext:
    """A build context as a tar stream: its Dockerfile's name inside, and its size in bytes."""

    fileobj: IO[bytes]
    dockerfile: str
    size: int


@dataclass(frozen=True)
class BuildSpec:
    """How to build a context: its tag, build arguments, cache, network, labels, last stage."""

    tag: str
    buildargs: dict[str, str] = field(default_factory=dict)
    nocache: bool = False
    network: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    target: str | None = None
    platform: str | None = None  # linux/arm64: the CPU the image is for (None: the engine's)


@dataclass(frozen=True)
class ContainerSpec:
    """A container to run with networking off: command, user, mounts and host devices."""

    image: str
    command: list[str]
    volumes: dict[str, str] = field(default_factory=dict)  # host path -> path inside
    read_only: list[str] = field(default_factory=list)  # host paths mounted as they are
    devices: list[str] = field(default_factory=list)
    group_add: list[str] = field(default_factory=list)
    gpus: bool = False
    user: str | None = None
    environment: dict[str, str] = field(default_factory=dict)


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


class Engine(Protocol):
    """A container engine. Every method raises generator.errors only: EngineUnavailable
    when the engine stops answering, EngineError when it refuses, or the more specific
    errors each method names."""

    def image(self, ref: str) -> ImageInfo | None:
        """The image ``ref`` names, or None when the host does not have it."""

    def require_image(self, ref: str, hint: str) -> ImageInfo:
        """The image ``ref`` names; ImageNotFound (with ``hint``) when it is not here."""

    def image_ids(self) -> set[str]:
        """Every image on the host, build-cache layers included."""

    def container_ids(self) -> set[str]:
        """Every container on the host, running or not."""

    def remove_images(self, refs: set[str]) -> set[str]:
        """Remove images, children before parents (absent is fine); return those that stay."""

    def tag(self, ref: str, repository: str, tag: str) -> None:
        """Give the image ``ref`` the name ``repository:tag``."""

    def runtimes(self) -> set[str]:
        """The container runtimes the engine offers (``nvidia`` means GPUs can be passed)."""

    def info(self) -> dict[str, Any]:
        """What `docker info` says: Runtimes, DefaultRuntime, DockerRootDir, ServerVersion."""

    def registry_knows(self, ref: str) -> str | None:
        """None when ``ref``'s registry serves it (nothing is pulled); else why not."""

    def build(
        self, context: BuildContext, spec: BuildSpec, log: IO[str], on_line: Lines
    ) -> ImageInfo:
        """Build with the classic builder, nothing pulled; BaseImageMissing or BuildFailed."""

    def run(self, spec: ContainerSpec, *, timeout_s: float, on_line: Lines) -> RunResult:
        """Run a container to its end, killed at the deadline (ContainerFailed) and
        removed in every case; a command that cannot start exits 127."""

    def push(self, local_ref: str, remote_ref: str, *, auth: Auth, on_progress: Progress) -> str:
        """Push ``local_ref`` as ``remote_ref`` (repository:tag); return the digest.
        PushFailed subclasses on failure; ``auth`` None: what docker login stored."""

    def pull(
        self, reference: str, *, auth: Auth, on_progress: Progress, platform: str | None = None
    ) -> str:
        """Pull ``reference`` (for ``platform``, else the engine's); return the image id.
        PushFailed subclasses on failure."""
