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
from pathlib import Path
from typing import Any

from src.scaffold.backend.api import BatchPlan
from src.scaffold.config import Config
from src.scaffold.data import finder
from src.scaffold.infer.recorded import Framework, locate
from src.scaffold.outputs.record import METRICS
from src.scaffold.outputs.rundir import run_id_of
from src.scaffold.run.schedule import Schedule
from src.scaffold.storage import where as storage
from src.scaffold.task import Task

log = logging.getLogger("eval")
SPLITS = ("test", "val")


DESCRIPTION = "Score a run's checkpoint again (train.py's options apply)."


def options(parser: argparse.ArgumentParser) -> None:
    """eval.py's own arguments, besides train.py's options."""
    parser.add_argument(
        "--checkpoint", default="best", help="best (default) or last of the run, or a path"
    )
    parser.add_argument("--split", default="test", type=_split, help="test (default) or val")


def _split(value: str) -> str:
    if value not in SPLITS:
        raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(SPLITS)}")
    return value


def evaluate(
    task: Task, cfg: Config, framework: Framework, which: str = "best", split: str = "test"
) -> dict[str, float]:
    """Score checkpoint ``which`` of the run in cfg's train_url on ``split``; print a line
    a metric and append an "eval" row to the run's record."""
    where, recorded, cfg = locate(cfg, framework, which)
    backend = framework.create(cfg, task)
    try:
        splits = finder.splits(cfg, task.readers, backend.world_size, backend.input_shape)
        plan = BatchPlan(len(splits.train), cfg.batch_size, 1, 0, cfg.seed)
        backend.setup(splits, Schedule.from_config(cfg, plan.steps_per_epoch, 1))
        restored = backend.restore(recorded.path, "--checkpoint")
        scores = backend.evaluate(split)
    finally:
        backend.close()
    for name, value in scores.items():
        print(f"{split} {name} {value:.6f}", flush=True)
    _record(where, recorded.path, split, restored.get("epoch"), scores)
    return scores


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
