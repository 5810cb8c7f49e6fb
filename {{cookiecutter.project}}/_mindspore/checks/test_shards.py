"""shard: full, MindSpore's optimizer parallel (Ascend and GPU): the settings for 8 NPUs are the
documented ones and MindSpore takes them; a sharded checkpoint written by two ranks (threads
here, each with its slices) is read back whole by MindSpore's own merge, and a missing shard is
one line."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest

from checks.yours import MODEL
from src.scaffold.backend import saved, shards
from src.scaffold.backend.context import parallel_settings
from src.scaffold.errors import CheckpointError
from src.scaffold.outputs.checkpoints import check_intact
from src.scaffold.task import DataShape

RANKS = 2


def test_shard_full_on_8_npus_is_documented_optimizer_parallel(tmp_path: Path) -> None:
    strategy = tmp_path / "strategy-1.ckpt"
    settings = parallel_settings("full", 8, strategy)
    # https://www.mindspore.cn/docs/en/r2.10.0/features/parallel/optimizer_parallel.html
    assert settings == {
        "parallel_mode": "semi_auto_parallel",
        "enable_parallel_optimizer": True,
        "gradients_mean": True,
        "device_num": 8,
        "dataset_strategy": "data_parallel",
        "strategy_ckpt_config": {"save_file": str(strategy), "only_trainable_params": False},
    }
    assert parallel_settings("none", 8, None) == {
        "parallel_mode": "data_parallel",
        "gradients_mean": True,
        "device_num": 8,
    }
    try:  # MindSpore's own context takes them as they are (it compiles them on NPUs only)
        ms.set_auto_parallel_context(**settings)
        for name, value in settings.items():
            got = ms.get_auto_parallel_context(name)
            assert got == value or {**got, "load_file": ""} == {**value, "load_file": ""}
    finally:
        ms.reset_auto_parallel_context()


def _slices(whole: dict[str, np.ndarray], rank: int) -> list[dict]:
    """This rank's slice of each parameter, as optimizer parallel keeps them: split along the
    first axis where the ranks divide it, else whole on every rank."""
    entries = []
    for name, array in whole.items():
        piece = np.split(array, RANKS)[rank] if array.shape[0] % RANKS == 0 else array
        entries.append({"name": name, "data": ms.Tensor(piece)})
    return entries


def _strategy(whole: dict[str, np.ndarray], path: Path) -> Path:
    """The layout MindSpore's strategy file records for those slices (its JSON form)."""
    items = {}
    for name, array in whole.items():
        split = array.shape[0] % RANKS == 0
        items[name] = {
            "dev_matrix": [RANKS],
            "tensor_map": [-1] * array.ndim,
            "field": 0,
            "opt_weight_shard_size": RANKS if split else 0,
            "opt_weight_shard_step": 1 if split else 0,
        }
    path.write_text(json.dumps({"parallel_layout_item": items}))
    return path


def test_two_ranks_shards_read_back_whole_and_a_missing_one_is_one_line(tmp_path: Path) -> None:
    ms.set_device("CPU")
    net = MODEL.build(DataShape(MODEL.input_shape, 10))
    whole = {p.name: p.asnumpy() for p in net.get_parameters()}
    # Optimizer state too: a moment per weight, named as MindSpore's Adam names them.
    whole |= {f"adam_m.{name}": value + 1 for name, value in list(whole.items())}
    strategy = _strategy(whole, tmp_path / "strategy-7.json")
    path = tmp_path / "net_epoch2.ckpt"
    append = {"epoch": 2, "seed": 1, "model": json.dumps(MODEL.name)}
    barrier = threading.Barrier(RANKS).wait
    needed = sum(value.nbytes for value in whole.values())

    def save(rank: int) -> None:
        entries = _slices(whole, rank)
        shards.save(path, entries, append, strategy, (rank, RANKS), barrier, needed)

    ranks = [threading.Thread(target=save, args=(rank,)) for rank in range(RANKS)]
    for rank in ranks:
        rank.start()
    for rank in ranks:
        rank.join()
    directory = tmp_path / "net_epoch2.shards"
    assert sorted(p.name for p in directory.iterdir()) == [
        "rank_0.ckpt",
        "rank_1.ckpt",
        "strategy.json",
    ]
    index = saved.load_params(path, "--resume")
    assert saved.read_meta(path)["epoch"] == 2
    params = shards.whole_if_sharded(path, index, "--resume")
    assert {name: params[name].asnumpy().tolist() for name in whole} == {
        name: value.tolist() for name, value in whole.items()
    }
    assert params["epoch"].asnumpy() == 2
    (directory / "rank_1.ckpt").unlink()
    with pytest.raises(CheckpointError, match="its shard net_epoch2.shards/rank_1.ckpt is missing"):
        check_intact(path, "--resume")
