"""What `docker run` must give a training container on each accelerator, as data: one source
for gen image smoke (generator/devices/host.py) and the generated README's `docker run` lines.

Standard library only: the template's filters (local_extensions.py) read it under plain
cookiecutter.
"""

from __future__ import annotations

# What an Ascend container needs from the host besides /dev/davinciN: the control devices
# and the driver and tools CANN calls, read-only (the devices and mounts the Ascend Docker
# Runtime adds: MindCluster's "Ascend Docker Runtime" user guide, mounting by hand).
ASCEND_CONTROL = ("davinci_manager", "devmm_svm", "hisi_hdc")
ASCEND_MANAGER = "davinci_manager"
ASCEND_MOUNTS = (
    "/usr/local/Ascend/driver",
    # The driver's add-ons (as the Kubernetes manifests mount them: generator/jobs/pod.py).
    "/usr/local/Ascend/add-ons",
    "/usr/local/bin/npu-smi",
    "/usr/local/dcmi",
    "/etc/ascend_install.info",
    # The devices' addresses: the per-rank launcher makes a one-node rank table from it.
    "/etc/hccn.conf",
)
SHM = "--shm-size=8g"
# NPUs per line of the README's command.
PER_LINE = 4


def run_flags(target: str, devices: int) -> list[str]:
    """The `docker run` options for a ``target`` container using ``devices`` accelerators,
    one group a line: GPUs through the NVIDIA runtime; NPUs as device nodes (they keep the
    host's numbers; the container numbers them from 0), the driver read-only, and the group
    the driver grants them to."""
    # The data loader's worker processes share batches through /dev/shm (64 MB by default),
    # HCCL its buffers too: as the manifests' memory-backed /dev/shm (generator/jobs/pod.py).
    if target == "cuda":
        return [f"--gpus all {SHM}"]
    npus = [f"--device=/dev/davinci{n}" for n in range(devices)]
    lines = [SHM, *(" ".join(npus[i : i + PER_LINE]) for i in range(0, len(npus), PER_LINE))]
    lines.append(" ".join(f"--device=/dev/{name}" for name in ASCEND_CONTROL))
    mounts = [f"-v {path}:{path}:ro" for path in ASCEND_MOUNTS]
    lines += [" ".join(mounts[i : i + 2]) for i in range(0, len(mounts), 2)]
    lines.append(f'--group-add "$(stat -c %g /dev/{ASCEND_MANAGER})"')
    return lines
