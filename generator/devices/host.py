"""What the host offers a container: NVIDIA GPUs (through the engine's runtime) or Ascend
NPUs (device nodes, the driver's files), and the group a non-root user needs for them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from generator.devices.flags import ASCEND_CONTROL, ASCEND_MANAGER, ASCEND_MOUNTS
from generator.engine import ContainerSpec

__all__ = ["ASCEND_MOUNTS", "Accelerators", "ascend_groups", "detect"]


@dataclass(frozen=True)
class Accelerators:
    """Devices, read-only mounts and extra groups to give a container, and what they are."""

    nvidia: bool = False
    npus: int = 0
    devices: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.nvidia:
            return "NVIDIA GPUs"
        if self.npus:
            return f"{self.npus} Ascend device node(s)"
        return "no GPU or NPU: running on the CPU"

    def container(
        self, image: str, command: list[str], *, volumes: dict[str, str], user: str | None
    ) -> ContainerSpec:
        """A container of ``image`` that gets these devices, mounts and groups."""
        return ContainerSpec(
            image,
            command,
            volumes=volumes,
            read_only=self.mounts,
            devices=self.devices,
            group_add=self.groups,
            gpus=self.nvidia,
            user=user,
        )


def ascend_groups(manager: os.stat_result | None) -> list[str]:
    """The group owning /dev/davinci_manager, for the container: the driver grants the
    NPUs to that group (HwHiAiUser's on the host), whatever gid the image's user has."""
    return [] if manager is None else [str(manager.st_gid)]


def detect(runtimes: set[str], dev: Path = Path("/dev"), root: Path = Path("/")) -> Accelerators:
    """GPUs when the engine has the NVIDIA runtime; NPUs when ``dev`` has davinciN nodes.

    The davinci_manager group is added whenever that device exists.
    """
    npus = sorted(str(p) for p in dev.glob("davinci*") if re.fullmatch(r"davinci\d+", p.name))
    try:
        manager: os.stat_result | None = (dev / ASCEND_MANAGER).stat()
    except OSError:
        manager = None
    devices, mounts = [], []
    if npus:
        devices = npus + [str(dev / d) for d in ASCEND_CONTROL if (dev / d).exists()]
        mounts = [path for path in ASCEND_MOUNTS if (root / path.lstrip("/")).exists()]
    return Accelerators("nvidia" in runtimes, len(npus), devices, mounts, ascend_groups(manager))
