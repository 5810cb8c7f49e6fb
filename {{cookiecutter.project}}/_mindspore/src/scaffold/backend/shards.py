"""Sharded checkpoints of MindSpore's optimizer parallel (shard: full, Ascend and GPU): after the
first step compiles, each rank holds a slice of every parameter the ranks can split and of its
optimizer state. Each rank writes its slices (rank_R.ckpt) into NAME.shards/, rank 0 the parallel
strategy MindSpore saved (strategy_ckpt_config) beside them, then the small NAME.ckpt naming them
(outputs/checkpoints.py). They are read back whole with ms.transform_checkpoints, MindSpore's own
merge: a parameter stays whole until the step compiles, then each rank keeps its slice, so a run
resumes on any number of ranks, and eval.py, predict.py and export.py read them in one process.

Sources: https://www.mindspore.cn/docs/en/r2.10.0/features/parallel/optimizer_parallel.html
(semi-automatic parallel with enable_parallel_optimizer; parameters saved as slices) and
https://www.mindspore.cn/docs/en/r2.10.0/api_python/mindspore/mindspore.transform_checkpoints.html
(rank_R/ directories and the source strategy; no destination strategy: merged whole)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import mindspore as ms

from src.scaffold.errors import CheckpointError
from src.scaffold.outputs import checkpoints

KEY = "sharded"  # in the index NAME.ckpt: JSON {"directory", "world_size", "strategy"}
STRATEGY = "strategy"  # + the suffix MindSpore reads it by: .ckpt protobuf, .json JSON


def rank_file(rank: int) -> str:
    return f"rank_{rank}.ckpt"


def save(
    path: Path,
    entries: list[dict[str, Any]],
    append: dict[str, Any],
    strategy: Path,
    ranks: tuple[int, int],
    barrier: Callable[[], None],
    needed: int,
) -> None:
    """Each rank's ``entries`` (its slices) into ``path``'s NAME.shards, then (rank 0) the
    strategy and ``path`` naming them, ``append`` its entries: through temporary names, so that
    a kill at any point leaves the checkpoints before. ``ranks``: (this rank, the world size)."""
    rank, world = ranks
    directory = checkpoints.shards_of(path)
    tmp = path.with_name(f".{directory.name}.tmp")
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    barrier()
    tmp.mkdir(exist_ok=True)
    try:
        ms.save_checkpoint(entries, str(tmp / rank_file(rank)))
        checkpoints.usual_mode(tmp / rank_file(rank))
    except (OSError, RuntimeError) as err:
        if (full := checkpoints.disk_full(err, path, needed)) is not None:
            raise full from err
        raise
    barrier()
    if rank == 0:
        kept = STRATEGY + strategy.suffix
        shutil.copyfile(strategy, tmp / kept)
        shutil.rmtree(directory, ignore_errors=True)
        os.replace(tmp, directory)
        parts = {
            f"{directory.name}/{p.name}": p.stat().st_size for p in sorted(directory.iterdir())
        }
        found = {"directory": directory.name, "world_size": world, "strategy": kept}
        index = {**append, KEY: json.dumps(found)}

        def write(tmp: Path) -> None:
            ms.save_checkpoint([], str(tmp), append_dict=index)
            checkpoints.usual_mode(tmp)

        checkpoints.write(path, write, needed, parts)
    barrier()  # the checkpoint whole before any rank goes on (or reads it)


def whole_if_sharded(path: Path, params: dict[str, Any], what: str) -> dict[str, Any]:
    """``params``, a checkpoint's, or where it is a sharded one's index, the whole parameters."""
    return whole(path, params, what) if KEY in params else params


def whole(path: Path, index: dict[str, Any], what: str) -> dict[str, Any]:
    """The parameters of the sharded checkpoint ``path`` (``index``: its file's), merged whole
    by ms.transform_checkpoints from each rank's slices and the strategy; its entries too."""
    found = json.loads(index[KEY])
    directory = path.parent / str(found["directory"])
    world = int(found["world_size"])
    with tempfile.TemporaryDirectory(prefix="shards-") as tmp:
        source, merged = Path(tmp, "source"), Path(tmp, "merged")
        for rank in range(world):  # the layout transform_checkpoints reads: rank_R/NAME.ckpt
            (source / f"rank_{rank}").mkdir(parents=True)
            os.symlink(directory / rank_file(rank), source / f"rank_{rank}" / "shard.ckpt")
        strategy = str(directory / str(found["strategy"]))
        try:
            ms.transform_checkpoints(str(source), str(merged), "whole", strategy, None)
            params = ms.load_checkpoint(str(next(merged.rglob("*.ckpt"))))
        except (OSError, RuntimeError, ValueError, TypeError, StopIteration) as err:
            reason = " ".join(str(err).split())[:300] or type(err).__name__
            raise CheckpointError(f"{what} {path}: its shards cannot be merged: {reason}") from err
    return {**{k: v for k, v in index.items() if k != KEY}, **params}
