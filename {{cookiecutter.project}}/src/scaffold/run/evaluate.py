"""Scoring a run's checkpoint again (eval.py): the checkpoint chosen (best, last or a path),
its recorded model and normalisation, the split read as the run read it, the Task's metrics;
one line a metric, and an "eval" row in the run's metrics.jsonl.

The output directory is the run's train_url, local or obs:// (fetched with the storage code
the run used), so a platform run is scored where it left its outputs.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from src.scaffold.backend.api import Backend, BatchPlan
from src.scaffold.config import Config
from src.scaffold.data import finder
from src.scaffold.errors import CheckpointError, ConfigError
from src.scaffold.outputs.checkpoints import POINTER, read_pointer
from src.scaffold.outputs.record import METRICS
from src.scaffold.outputs.rundir import run_id_of
from src.scaffold.run.schedule import Schedule
from src.scaffold.storage import where as storage
from src.scaffold.task import Task

log = logging.getLogger("eval")
CHOICES = ("best", "last")
SPLITS = ("test", "val")


def parse_eval(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """eval.py's own options (--checkpoint, --split) and train.py's, which the rest are."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--split", default="test")
    own, rest = parser.parse_known_args(list(argv))
    if own.split not in SPLITS:
        raise ConfigError(f"--split {own.split!r} is not one of {', '.join(SPLITS)}")
    return own.checkpoint, own.split, rest


def choose(output: Path, which: str, suffix: str) -> Path:
    """The checkpoint ``which`` names: best or last of the run in ``output`` (its
    latest.json), or a path; one line when there is none."""
    if which not in CHOICES:
        path = Path(which)
        if not path.is_file():
            raise CheckpointError(f"--checkpoint {path}: no such file")
        return path
    pointer = read_pointer(output)
    name = pointer.get("best" if which == "best" else "latest")
    if not isinstance(name, str) or not (output / name).is_file():
        raise CheckpointError(
            f"{output} holds no {which} checkpoint ({POINTER} names none there): give the run's "
            "--train_url, or --checkpoint PATH"
        )
    if not name.endswith(suffix):
        raise CheckpointError(f"{output / name} is not a checkpoint of this framework ({suffix})")
    return output / name


def _fetch(where: storage.Storage, which: str) -> None:
    """A platform run's pointer and chosen checkpoint, brought from its remote outputs."""
    remote = where.remote
    if remote is None:
        return
    where.output.mkdir(parents=True, exist_ok=True)
    if remote.get([POINTER], where.output) and which in CHOICES:
        pointer = read_pointer(where.output)
        name = pointer.get("best" if which == "best" else "latest")
        remote.get([name, METRICS, "hparams.json"] if name else [METRICS], where.output)


def evaluate(
    task: Task,
    cfg: Config,
    create: Callable[[Config, Task], Backend],
    which: str = "best",
    split: str = "test",
) -> dict[str, float]:
    """Score checkpoint ``which`` of the run in cfg's train_url on ``split``; print a line
    a metric and append an "eval" row to the run's record."""
    backend = create(cfg, task)
    try:
        where = storage.prepare(cfg)
        _fetch(where, which)
        path = choose(where.output, which, backend.suffix)
        meta: dict[str, Any] = backend.read_meta(path)
        cfg = _as_recorded(replace(cfg, data_url=where.data), meta)
        splits = finder.splits(cfg, task.readers, backend.world_size, backend.input_shape)
        plan = BatchPlan(len(splits.train), cfg.batch_size, 1, 0, cfg.seed)
        backend.setup(splits, Schedule.from_config(cfg, plan.steps_per_epoch, 1))
        restored = backend.restore(path, "--checkpoint")
        scores = backend.evaluate(split)
    finally:
        backend.close()
    for name, value in scores.items():
        print(f"{split} {name} {value:.6f}", flush=True)
    _record(where, path, split, restored.get("epoch"), scores)
    return scores


def _as_recorded(cfg: Config, meta: dict[str, Any]) -> Config:
    """The options as the checkpoint records them: its model and normalisation win."""
    recorded: dict[str, Any] = {}
    if meta.get("model_name"):
        recorded["model"] = meta["model_name"]
    if meta.get("data_mean") and meta.get("data_std"):
        recorded["data_mean"] = tuple(meta["data_mean"])
        recorded["data_std"] = tuple(meta["data_std"])
    return replace(cfg, **recorded)


def _record(
    where: storage.Storage, path: Path, split: str, epoch: Any, scores: dict[str, float]
) -> None:
    """The scores as an "eval" row of the run's metrics.jsonl (and its remote copy)."""
    output = where.output
    if not (output / METRICS).is_file() or path.parent.resolve() != output.resolve():
        return  # a checkpoint from elsewhere: this directory is not its run's
    with (output / METRICS).open(encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    # The step the checkpoint was taken at: the last the run logged in its epoch.
    step = max((r["step"] for r in rows if r.get("epoch", 0) <= (epoch or 0)), default=0)
    row = {"run": run_id_of(output) or "", "type": "eval", "epoch": epoch or 0, "step": step}
    row.update({"time": time.time(), "split": split, "checkpoint": path.name, **scores})
    with (output / METRICS).open("a", encoding="utf-8") as lines:
        lines.write(json.dumps(row) + "\n")
    if where.remote is not None:
        where.remote.put(output, [METRICS])
