"""The accelerator an image is built for, and a warning when a run cannot see it.

The images set TRAIN_ACCELERATOR (npu or cuda: Dockerfile.ascend, Dockerfile.cuda). With
--device_target auto and no such device usable, the run goes on on the CPU, but says so
as a WARNING naming what was looked for: a container started without its devices must
not pass for a slow job.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass

IMAGE_ENV = "TRAIN_ACCELERATOR"
NAMES = {"npu": "Ascend NPUs", "cuda": "CUDA GPUs"}
# The device nodes a container is given (docker run --device, the Ascend docker runtime).
NODES = {"npu": "/dev/davinci[0-9]*", "cuda": "/dev/nvidia[0-9]*"}


def unseen(found: str, checked: str) -> str | None:
    """The warning for a run that chose ``found`` (cpu, cuda or npu) in an image built for
    another accelerator (None when it is the image's own, or the image says none);
    ``checked`` names what the framework was asked."""
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


# What narrows the devices a process may use: CUDA's own variable, and the Ascend docker
# runtime's (ASCEND_RT_VISIBLE_DEVICES is CANN's runtime's, set inside a container too).
VISIBLE = {
    "cuda": ("CUDA_VISIBLE_DEVICES",),
    "npu": ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"),
}


@dataclass(frozen=True)
class Seen:
    """The accelerators of one kind this host or container can use, and how that was told."""

    kind: str  # cuda or npu
    count: int
    how: str

    def describe(self) -> str:
        return f"{self.count} {NAMES[self.kind]} ({self.how})"


def visible(kind: str) -> Seen:
    """The ``kind`` devices this process may use: the count its VISIBLE variable lists when
    set (an empty value, or -1, hides them all), else its device nodes."""
    for name in VISIBLE[kind]:
        value = os.environ.get(name)
        listed = None if value is None else _listed(value.replace(" ", ""))
        if listed is not None:
            return Seen(kind, listed, f"{name}={value}")
    nodes = sorted(glob.glob(NODES[kind]))
    return Seen(kind, len(nodes), ", ".join(nodes) or f"no {NODES[kind]}")


# A backend's device name (torch's cuda:0, MindSpore's GPU:0 or Ascend:0) by its kind.
KINDS = {"cuda": "cuda", "gpu": "cuda", "npu": "npu", "ascend": "npu"}


def idle(device: str, world_size: int) -> str | None:
    """The warning for a run of one process on one of several visible accelerators: a
    platform that starts `python train.py` once per node on a multi-card spec (None when
    the run has several ranks, runs on the CPU, or sees one device)."""
    kind = KINDS.get(device.split(":")[0].lower())
    if kind is None or world_size > 1:
        return None
    found = visible(kind)
    if found.count <= 1:
        return None
    return (
        f"{found.describe()} are visible and this run is one process on one of them: "
        f"{found.count - 1} stay idle. Start one rank per device: boot file launch.py "
        "(OpenI, ModelArts), or bash scripts/run_8p.sh --nproc auto"
    )


def _listed(value: str) -> int | None:
    """How many devices a VISIBLE variable lists: ids (0,2), ranges (0-3), the Ascend
    runtime's names (Ascend910-4) or CUDA's UUIDs (GPU-...), up to the first a runtime
    stops at (-1, an empty entry); None for what it does not list (all)."""
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
    """What a run of --device_target ``target`` would train on, when an accelerator: cuda or
    npu as asked (none seen: a count of 0); with auto the image's own kind (TRAIN_ACCELERATOR)
    or else the first this host shows; None for the CPU."""
    if target in VISIBLE:
        return visible(target)
    if target != "auto":
        return None
    image = os.environ.get(IMAGE_ENV, "")
    kinds = [image] if image in VISIBLE else list(VISIBLE)
    for kind in kinds:
        found = visible(kind)
        if found.count:
            return found
    return None
