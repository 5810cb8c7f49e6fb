"""Pick this process's device and join the process group when torchrun started several."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from src.errors import DeviceError

BACKENDS = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}


@dataclass(frozen=True)
class Context:
    """Where this process runs: its device and its place among the ranks."""

    device: torch.device
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0 alone logs, saves checkpoints and writes the run record."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    if not value.strip():
        return default
    try:
        return int(value)
    except ValueError as err:
        raise DeviceError(f"environment variable {name}={value!r} is not a whole number") from err


def _npu_available() -> bool:
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)
    except ImportError:
        return False
    return torch.npu.is_available()


def _cpu_count() -> int:
    # The CPUs this process may use: fewer than the machine's in a container with a cpuset.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def pick_device(target: str, index: int = 0) -> torch.device:
    """The device for target auto, cpu, cuda or npu; an accelerator's is made current."""
    if target == "auto":
        target = "npu" if _npu_available() else "cuda" if torch.cuda.is_available() else "cpu"
    if target == "cpu":
        return torch.device("cpu")
    if target == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError("device_target cuda was requested but no CUDA GPU is available")
        count = torch.cuda.device_count()
        if index >= count:
            raise DeviceError(f"this process wants cuda:{index}, but {count} GPUs are visible")
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    if target == "npu":
        if not _npu_available():
            raise DeviceError("device_target npu needs torch_npu and an Ascend NPU; found neither")
        count = torch.npu.device_count()
        if index >= count:
            raise DeviceError(f"this process wants npu:{index}, but {count} NPUs are visible")
        torch.npu.set_device(index)
        return torch.device("npu", index)
    raise DeviceError(f"unknown device target {target!r}; choose one of auto, cpu, cuda, npu")


def setup(target: str) -> Context:
    """Pick the device; with WORLD_SIZE > 1 (set by torchrun) also join the process group.

    LOCAL_RANK (torchrun) or DEVICE_ID (Ascend launch scripts) says which
    device of this node is ours.
    """
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", _env_int("DEVICE_ID", 0))
    device = pick_device(target, local_rank)
    local_world_size = _env_int("LOCAL_WORLD_SIZE", 1)
    if device.type == "cpu" and local_world_size > 1:
        # Each process would otherwise start a thread per CPU: N times oversubscribed.
        torch.set_num_threads(max(1, _cpu_count() // local_world_size))
    if world_size > 1:
        dist.init_process_group(BACKENDS[device.type], rank=rank, world_size=world_size)
    return Context(device, rank, world_size, local_rank)


def average(value: torch.Tensor, ctx: Context) -> torch.Tensor:
    """The mean of a tensor over all ranks (the tensor itself with one process)."""
    if ctx.world_size == 1:
        return value
    value = value.clone()
    dist.all_reduce(value)
    return value / ctx.world_size


def cleanup() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
