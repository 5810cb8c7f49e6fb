"""This process's place in the job and its device: torchrun's RANK, WORLD_SIZE, LOCAL_RANK ...;
or one process per device (ModelArts, OpenI, ModelZoo 8p loops): RANK_SIZE, RANK_ID, DEVICE_ID,
meeting at MASTER_ADDR or at rank 0's server in RANK_TABLE_FILE; or one process alone."""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from src.scaffold.config import env_first, env_int
from src.scaffold.errors import DeviceError

BACKENDS = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}
DEFAULT_PORT = 29500
JOIN_TIMEOUT_ENV = "TRAIN_JOIN_TIMEOUT"


@dataclass(frozen=True)
class Placement:
    """Where this process stands among the job's processes."""

    rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    device_index: int = 0
    master_addr: str | None = None
    master_port: int = DEFAULT_PORT


def _rank_zero_server(table: Path) -> str:
    """The server holding rank 0 (and the store the ranks meet at) in an HCCL rank table."""
    try:
        data = json.loads(table.read_text(encoding="utf-8"))
        if "server_list" in data:
            servers = [(s["server_id"], s.get("device", [])) for s in data["server_list"]]
        else:
            servers = [(i["server_id"], [i]) for i in data["group_list"][0]["instance_list"]]
        zero = [sid for sid, listed in servers if any(str(d.get("rank_id")) == "0" for d in listed)]
        return str((zero or [servers[0][0]])[0])
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
        raise DeviceError(f"RANK_TABLE_FILE={table}: no rank 0 server to read ({err})") from err


def _per_device(world_size: int) -> Placement:
    """A process started for one device with RANK_SIZE, RANK_ID and DEVICE_ID."""
    rank = env_int("RANK_ID")
    device = env_first("DEVICE_ID", "ASCEND_DEVICE_ID")
    master = os.environ.get("MASTER_ADDR") or None
    table = os.environ.get("RANK_TABLE_FILE")
    missing = [name for name, value in (("RANK_ID", rank), ("DEVICE_ID", device)) if value is None]
    if master is None and not table:
        missing.append("MASTER_ADDR (or RANK_TABLE_FILE)")
    if missing:
        raise DeviceError(
            f"RANK_SIZE={world_size} starts one process per device, but {', '.join(missing)} "
            "is not set: the ranks could not meet (set them, or start the job with "
            "scripts/run_8p.sh)"
        )
    assert rank is not None and device is not None
    if not 0 <= rank < world_size:
        raise DeviceError(f"RANK_ID={rank} is not below RANK_SIZE={world_size}")
    return Placement(
        rank=rank,
        world_size=world_size,
        local_world_size=env_int("LOCAL_WORLD_SIZE") or min(world_size, 8),
        device_index=device,
        master_addr=master or _rank_zero_server(Path(str(table))),
        master_port=env_int("MASTER_PORT") or DEFAULT_PORT,
    )


def placement() -> Placement:
    """This process's place, from the launcher's variables (see the module's docstring)."""
    if (world_size := env_int("WORLD_SIZE") or 1) > 1:
        return Placement(
            rank=env_int("RANK") or 0,
            world_size=world_size,
            local_world_size=env_int("LOCAL_WORLD_SIZE") or 1,
            device_index=env_int("LOCAL_RANK") or 0,
            master_addr=os.environ.get("MASTER_ADDR"),
            master_port=env_int("MASTER_PORT") or DEFAULT_PORT,
        )
    if (rank_size := env_int("RANK_SIZE") or 1) > 1:
        return _per_device(rank_size)
    return Placement(device_index=env_first("LOCAL_RANK", "DEVICE_ID", "ASCEND_DEVICE_ID") or 0)


LOOKED_FOR = "torch_npu (torch.npu.is_available()) and torch.cuda.is_available()"  # auto's order


def _npu_available() -> bool:
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)
    except ImportError:
        return False
    return torch.npu.is_available()


def pick_device(target: str, index: int) -> torch.device:
    """The device for target auto, cpu, cuda or npu; an accelerator's is made current."""
    if target == "auto":
        target = "npu" if _npu_available() else "cuda" if torch.cuda.is_available() else "cpu"
    if target == "cpu":
        return torch.device("cpu")
    if target == "cuda" and not torch.cuda.is_available():
        raise DeviceError("device_target cuda was requested but no CUDA GPU is available")
    if target == "npu" and not _npu_available():
        raise DeviceError("device_target npu needs torch_npu and an Ascend NPU; found neither")
    module = torch.cuda if target == "cuda" else torch.npu
    count = module.device_count()
    if index >= count:
        raise DeviceError(f"this process wants {target}:{index}, but {count} are visible")
    module.set_device(index)
    return torch.device(target, index)


def join(place: Placement, device: torch.device) -> None:
    """Join the process group of a multi-rank job; nothing for one process."""
    if place.world_size == 1:
        return
    if place.master_addr:
        os.environ.setdefault("MASTER_ADDR", place.master_addr)
        os.environ.setdefault("MASTER_PORT", str(place.master_port))
    # DDP imports torch._dynamo, which would hold every group existing then past leave().
    if importlib.util.find_spec("torch._dynamo") is not None:
        importlib.import_module("torch._dynamo")
    # The launcher's --join-timeout, for ranks it starts one per device (torchrun keeps its own).
    text = os.environ.get(JOIN_TIMEOUT_ENV, "").strip()
    try:
        seconds = float(text) if text else None
    except ValueError as err:
        raise DeviceError(f"{JOIN_TIMEOUT_ENV}={text!r} is not a number of seconds") from err
    store = None if seconds is None else _meet(place, seconds)
    dist.init_process_group(
        BACKENDS[device.type], store=store, rank=place.rank, world_size=place.world_size
    )


def _meet(place: Placement, seconds: float) -> dist.TCPStore:
    """Rank 0's store, every rank in it within ``seconds`` (torch would wait 30 minutes)."""
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    limit, master = timedelta(seconds=seconds), place.rank == 0
    try:
        store = dist.TCPStore(host, port, place.world_size, is_master=master, timeout=limit)
    except (RuntimeError, ValueError, OSError) as err:  # DistStoreError is a RuntimeError
        reason = " ".join(str(err).split())[:200]
        raise DeviceError(
            f"rank {place.rank} of {place.world_size}: the ranks did not all meet at "
            f"{host}:{port} within {seconds:g} s (is every node started, and does {host} "
            f"resolve and answer from here?): {reason}"
        ) from err
    store.set_timeout(timedelta(minutes=30))  # met: the group's own waits keep torch's default
    return store


def average(value: torch.Tensor, world_size: int) -> torch.Tensor:
    """The mean of a tensor over all ranks (the tensor itself with one process)."""
    if world_size == 1:
        return value
    value = value.clone()
    dist.all_reduce(value)
    return value / world_size


def any_rank(flag: bool, world_size: int, device: torch.device) -> bool:
    """True on every rank when ``flag`` is on one (what rank 0 alone decides)."""
    if world_size == 1:
        return flag
    value = torch.tensor(float(flag), device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def leave() -> None:
    """Leave the process group now (the caller drops its DDP first): at interpreter exit, its
    threads (gloo's, NCCL's, HCCL's) taking the GIL die in a C++ destructor, SIGABRT."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
