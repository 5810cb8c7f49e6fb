"""Scoring a run's checkpoint again (eval.py): the checkpoint chosen (best, last or a path),
its recorded model and normalisation, the split read as the run read it, the Task's metrics;
a line saying which checkpoint, one line a metric, and an "eval" row in the run's
metrics.jsonl (eval.jsonl while the run still trains).

The output directory is the run's train_url, local or obs:// (fetched with the storage code
the run used), so a platform run is scored where it left its outputs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from src.scaffold.backend.api import Framework
from src.scaffold.backend.schedule import Schedule
from src.scaffold.config import Config
from src.scaffold.data import finder
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.infer.recorded import Located, locate
from src.scaffold.outputs.record import EVALS, METRICS
from src.scaffold.outputs.rundir import run_id_of
from src.scaffold.run.runner import backend_of
from src.scaffold.task import Task

log = logging.getLogger("eval")
SPLITS = ("test", "val")


DESCRIPTION = "Score a run's checkpoint again (train.py's options apply)."


def options(parser: argparse.ArgumentParser) -> None:
    """eval.py's own arguments, besides train.py's options."""
    parser.add_argument(
        "--checkpoint",
        help="best (default; the newest while the run still trains) or last of the run, or a path",
    )
    parser.add_argument("--split", default="test", type=_split, help="test (default) or val")


def _split(value: str) -> str:
    if value not in SPLITS:
        raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(SPLITS)}")
    return value


def evaluate(
    task: Task, cfg: Config, framework: Framework, which: str | None = None, split: str = "test"
) -> dict[str, float]:
    """Score checkpoint ``which`` of the run in cfg's train_url (or the checkpoint a path
    names) on ``split``; print which, then a line a metric, and append an "eval" row to the
    run's record (to eval.jsonl while the run still trains)."""
    found = locate(cfg.named(), cfg.places(), framework, which)
    for line in found.first():
        print(line, file=sys.stderr, flush=True)
    cfg = cfg.with_options(**found.changes)
    backend = backend_of(framework, cfg, task)
    try:
        smoke = cfg.smoke_sizes(backend.world_size)
        source = cfg.source(found.where.data)
        splits = finder.splits(cfg.data, source, task.readers, backend.input_shape, smoke)
        plan = BatchPlan(len(splits.train), cfg.batch_size, 1, 0, cfg.seed)
        backend.setup(splits, Schedule.of(cfg.schedule, cfg.lr, plan.steps_per_epoch, 1))
        restored = backend.restore(found.recorded.path, "--checkpoint")
        scores = backend.evaluate(split)
    finally:
        backend.close()
    print(found.scored(split), flush=True)
    for name, value in scores.items():
        print(f"{split} {name} {value:.6f}", flush=True)
    _record(found, split, restored.get("epoch"), scores)
    found.said()
    return scores


def _rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a record file; a line being written by a live run is left out."""
    rows = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    return rows


def _record(found: Located, split: str, epoch: Any, scores: dict[str, float]) -> None:
    """The scores as an "eval" row of the run's metrics.jsonl (and its remote copy); while
    the run still trains, of its eval.jsonl, so that its own record stays its own."""
    output = found.run_dir
    if not (output / METRICS).is_file():
        return  # a checkpoint without its run's record
    # The step the checkpoint was taken at: the last the run logged in its epoch.
    rows = _rows(output / METRICS)
    step = max((r["step"] for r in rows if r.get("epoch", 0) <= (epoch or 0)), default=0)
    row = {"run": run_id_of(output) or "", "type": "eval", "epoch": epoch or 0, "step": step}
    row.update({"time": time.time(), "split": split, "checkpoint": found.recorded.path.name})
    row.update(scores)
    target = output / (EVALS if found.running is not None else METRICS)
    with target.open("a", encoding="utf-8") as lines:
        lines.write(json.dumps(row) + "\n")
    if found.remote is not None:
        found.remote.put(output, [target.name])
