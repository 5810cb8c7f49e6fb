"""Set MindSpore up for this process: seed, device, execution mode and data parallelism."""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mindspore as ms
from mindspore.communication import get_group_size, get_rank, init

from src.scaffold.backend.options import MSOptions, shard_refusal
from src.scaffold.config import env_first, env_int
from src.scaffold.data.sharding import cpu_count
from src.scaffold.errors import DeviceError

# config.py's target names -> MindSpore's.
TARGETS = {"cpu": "CPU", "cuda": "GPU", "npu": "Ascend"}
MODES = {"graph": ms.GRAPH_MODE, "pynative": ms.PYNATIVE_MODE}
# How the ranks of a job find each other: a rank table (ModelArts, ModelZoo) or msrun's cluster.
RANK_TABLE_VARS = ("RANK_TABLE_FILE", "RANK_ID")
CLUSTER_VARS = ("MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM")
# A process's device (in this container; scripts/rank_table.py) as launchers set it: DEVICE_ID
# (ModelArts, MindCluster) or ASCEND_DEVICE_ID (OpenI's NPU jobs; CANN's name).
DEVICE_VARS = ("DEVICE_ID", "ASCEND_DEVICE_ID")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Context:
    """Where this process runs: its device target and its place among the ranks."""

    device_target: str
    rank: int = 0
    group_size: int = 1
    device_id: int | None = None
    strategy: Path | None = None  # where MindSpore saves the parallel strategy (shard: full)


def parallel_settings(shard: str, device_num: int, strategy: Path | None) -> dict[str, Any]:
    """set_auto_parallel_context's settings for ``device_num`` ranks: data parallel, or with
    shard full optimizer parallel in semi-automatic parallel mode, as MindSpore's documentation
    gives it (https://www.mindspore.cn/docs/en/r2.10.0/features/parallel/optimizer_parallel.html
    and .../api_python/mindspore/mindspore.set_auto_parallel_context.html): each rank keeps a
    slice of the weights and optimizer state, the batches split over the ranks as in data
    parallel, and the strategy saved for the checkpoints (shards.py), optimizer state included."""
    if shard != "full":
        mode = ms.ParallelMode.DATA_PARALLEL
        return dict(parallel_mode=mode, gradients_mean=True, device_num=device_num)
    return dict(
        parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
        enable_parallel_optimizer=True,
        gradients_mean=True,
        device_num=device_num,
        dataset_strategy="data_parallel",
        strategy_ckpt_config={"save_file": str(strategy), "only_trainable_params": False},
    )


def device_target(requested: str) -> str:
    """MindSpore's name for auto, cpu, cuda or npu: auto is the target whose drivers loaded (CANN,
    CUDA) else the CPU; an accelerator must be that one (asking about others prints warnings)."""
    default = ms.get_context("device_target")
    if requested == "auto":
        return default
    target = TARGETS.get(requested)
    if target is None:
        raise DeviceError(f"unknown device target {requested!r}; choose auto, cpu, cuda or npu")
    if target != "CPU" and target != default:
        raise DeviceError(
            f"device_target {requested}: MindSpore found no {target} here (its drivers "
            f"did not load); it runs on {default}"
        )
    return target


def _check_device(target: str, device_num: int, device_id: int | None) -> None:
    """Each rank's device named (else MindSpore puts all on device 0), but for msrun's workers."""
    if target == "CPU" or device_num == 1 or device_id is not None or os.environ.get("MS_ROLE"):
        return
    raise DeviceError(
        f"device_num {device_num} on {target}, but neither {' nor '.join(DEVICE_VARS)} is set "
        "and every rank would use device 0: set one per process (scripts/run_8p.sh does), "
        "pass --device_id, or start the job with msrun"
    )


def init_env(options: MSOptions) -> Context:
    """Seed, device, execution mode and, with device_num > 1, the data-parallel process group."""
    ms.set_seed(options.seed)  # the same everywhere: every rank starts from the same weights
    target = device_target(options.device_target)
    if options.shard.mode == "full" and target == "CPU":  # before the device starts
        raise shard_refusal()
    device_num = options.device_num or env_int("RANK_SIZE") or 1
    device_id = options.device_id if options.device_id is not None else env_first(*DEVICE_VARS)
    _check_device(target, device_num, device_id)
    # A CPU has no device index; msrun's DEVICE_ID is meant for accelerators.
    device = None if target == "CPU" else device_id
    ms.set_device(target, device)
    ms.set_context(mode=MODES[options.context_mode])
    if device_num == 1:
        if options.shard.mode == "full":
            log.info("shard: full with one rank: it trains unsharded")
        return Context(target, device_id=device)
    # One line naming what is missing, rather than a failure deep inside init().
    missing = [name for name in RANK_TABLE_VARS if not os.environ.get(name)]
    if missing and not all(os.environ.get(name) for name in CLUSTER_VARS):
        raise DeviceError(
            f"{device_num} ranks, but {', '.join(missing)} is not set: start one process per "
            f"device with RANK_TABLE_FILE, RANK_ID and DEVICE_ID, or use msrun (which sets "
            f"{', '.join(CLUSTER_VARS)}); scripts/run_8p.sh does either"
        )
    try:
        init()
    except (RuntimeError, ValueError) as err:
        reason = " ".join(str(err).split())[:300]
        raise DeviceError(
            f"device_num {device_num}: joining the process group failed; start the ranks "
            f"with msrun or an Ascend rank table ({reason})"
        ) from err
    group_size = get_group_size()
    if group_size != device_num:
        raise DeviceError(
            f"device_num is {device_num} but {group_size} processes joined the group; "
            "set --device_num (or RANK_SIZE) to the number of processes started"
        )
    strategy = None
    if options.shard.mode == "full":  # one file a process: written when the step compiles
        strategy = Path(tempfile.gettempdir(), f"strategy-{os.getpid()}.ckpt")
    ms.set_auto_parallel_context(**parallel_settings(options.shard.mode, device_num, strategy))
    if target == "CPU":
        # Each process would otherwise start its own full pool of threads on the same cores.
        ms.device_context.cpu.op_tuning.threads_num(max(1, cpu_count() // device_num))
    return Context(target, get_rank(), group_size, device, strategy)
