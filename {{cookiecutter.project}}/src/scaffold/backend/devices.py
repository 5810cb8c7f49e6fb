"""The accelerator an image is built for, and a warning when a run cannot see it.

The images set TRAIN_ACCELERATOR (npu or cuda: Dockerfile.ascend, Dockerfile.cuda). With
--device_target auto and no such device usable, the run goes on on the CPU, but says so
as a WARNING naming what was looked for: a container started without its devices must
not pass for a slow job.
"""

from __future__ import annotations

import glob
import os

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
