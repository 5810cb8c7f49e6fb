"""The accelerators a run can see, and WARNINGs when it leaves them unused: a container started
without its devices (TRAIN_ACCELERATOR names the image's) must not pass for a slow job."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass

IMAGE_ENV = "TRAIN_ACCELERATOR"
NAMES = {"npu": "Ascend NPUs", "cuda": "CUDA GPUs"}
NODES = {"npu": "/dev/davinci[0-9]*", "cuda": "/dev/nvidia[0-9]*"}  # a container's: --device
# What narrows the devices a process may use (the runtimes' own: CANN's, the Ascend docker's).
VISIBLE = {
    "cuda": ("CUDA_VISIBLE_DEVICES",),
    "npu": ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"),
}
KINDS = {"cuda": "cuda", "gpu": "cuda", "npu": "npu", "ascend": "npu"}  # cuda:0, GPU:0, Ascend:0


def unseen(found: str, checked: str) -> str | None:
    """The warning for a run on ``found`` (cpu, cuda, npu) in an image for another accelerator."""
    wanted = os.environ.get(IMAGE_ENV, "")
    if wanted not in NAMES or found == wanted:
        return None
    nodes = sorted(glob.glob(NODES[wanted]))
    return (
        f"this image is built for {NAMES[wanted]} ({IMAGE_ENV}={wanted}) but none is usable: "
        f"looked for {checked} and device nodes {NODES[wanted]} "
        f"({', '.join(nodes) or 'none'}); training on the {found.upper()}. Give the container "
        "its devices (README: Run the image) or pass --device_target cpu"
    )


def accelerator_nodes() -> list[str]:
    """The GPU and NPU device nodes this host or container has (none: the CPU only)."""
    return sorted(node for pattern in NODES.values() for node in glob.glob(pattern))


@dataclass(frozen=True)
class Seen:
    """The accelerators of one kind this host or container can use, and how that was told."""

    kind: str  # cuda or npu
    count: int
    how: str

    def describe(self) -> str:
        return f"{self.count} {NAMES[self.kind]} ({self.how})"


def visible(kind: str) -> Seen:
    """The ``kind`` devices this process may use: as its VISIBLE variable lists, else nodes."""
    for name in VISIBLE[kind]:
        value = os.environ.get(name)
        listed = None if value is None else _listed(value.replace(" ", ""))
        if listed is not None:
            return Seen(kind, listed, f"{name}={value}")
    nodes = sorted(glob.glob(NODES[kind]))
    return Seen(kind, len(nodes), ", ".join(nodes) or f"no {NODES[kind]}")


def idle(device: str, world_size: int) -> str | None:
    """The warning for one process among several visible accelerators (one per node started)."""
    kind = KINDS.get(device.split(":")[0].lower())
    found = None if kind is None or world_size > 1 else visible(kind)
    if found is None or found.count <= 1:
        return None
    return (
        f"{found.describe()} are visible and this run is one process on one of them: "
        f"{found.count - 1} stay idle. Start one rank per device: boot file launch.py "
        "(OpenI, ModelArts), or bash scripts/run_8p.sh --nproc auto"
    )


def _listed(value: str) -> int | None:
    """How many devices a VISIBLE variable lists (ids 0,2, ranges 0-3, Ascend910-4, GPU-<uuid>),
    up to an entry a runtime stops at (-1, empty); None for all."""
    count = 0
    for part in value.split(","):
        part = re.sub(r"^Ascend[A-Za-z0-9]*-(?=\d)", "", part)
        first, dash, last = part.partition("-")
        if not part or part.startswith("-"):
            break
        if part == "all":
            return None
        count += int(last) - int(first) + 1 if dash and first.isdigit() and last.isdigit() else 1
    return count


def seen(target: str) -> Seen | None:
    """What --device_target ``target`` trains on (auto: the image's kind, else the first seen)."""
    if target in VISIBLE:
        return visible(target)
    if target != "auto":
        return None
    image = os.environ.get(IMAGE_ENV, "")
    kinds = [image] if image in VISIBLE else list(VISIBLE)
    return next((found for found in map(visible, kinds) if found.count), None)
