"""Scoring a run's checkpoint again (eval.py), local or obs://, on a split read as the run read
it: a line a metric, and an "eval" row in the run's record."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from src.scaffold.backend.api import Framework
from src.scaffold.backend.schedule import Schedule
from src.scaffold.config import Config
from src.scaffold.data import finder
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.infer.recorded import CHECKPOINT_HELP, CHOICES, Located, locate
from src.scaffold.outputs.record import EVALS, METRICS
from src.scaffold.outputs.rundir import run_id_of
from src.scaffold.run.runner import backend_of
from src.scaffold.task import Task

SPLITS = ("test", "val")
DESCRIPTION = "Score a run's checkpoint again (train.py's options apply)."


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    parser.add_argument("--split", default="test", type=_split, help="test (default) or val")


def _split(value: str) -> str:
    if value not in SPLITS:
        raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(SPLITS)}")
    return value


def evaluate(
    task: Task, cfg: Config, framework: Framework, which: str | None = None, split: str = "test"
) -> dict[str, float]:
    """Score checkpoint ``which`` (best, last or a path) of the run in cfg's train_url."""
    found = locate(cfg.named(), cfg.places(), framework, which)
    cfg = cfg.with_options(**found.changes)
    backend = backend_of(framework, cfg, task)
    try:
        smoke = cfg.smoke_sizes(backend.world_size)
        source = cfg.source(found.where.data)
        splits = finder.splits(
            cfg.data, source, task.readers, backend.input_shape, smoke, backend.spec.ids
        )
        plan = BatchPlan(len(splits.train), cfg.batch_size, 1, 0, cfg.seed)
        backend.setup(splits, Schedule.of(cfg.schedule, cfg.lr, plan.steps_per_epoch, 1))
        restored = backend.restore(found.recorded.path, "--checkpoint")
        scores = backend.evaluate(split)
    finally:
        backend.close()
    kind = found.chosen if found.chosen in (*CHOICES, "newest") else "given"
    epoch = f", epoch {found.recorded.epoch}" if found.recorded.epoch is not None else ""
    name = found.recorded.path.name
    print(f"scoring the {kind} checkpoint {name}{epoch} on the {split} split", flush=True)
    for name, value in scores.items():
        print(f"{split} {name} {value:.6f}", flush=True)
    _record(found, split, restored.get("epoch"), scores)
    found.said()
    return scores


def _record(found: Located, split: str, epoch: Any, scores: dict[str, float]) -> None:
    """The scores as an "eval" row of metrics.jsonl; of eval.jsonl while the run still trains."""
    output = found.run_dir
    if not (output / METRICS).is_file():
        return  # a checkpoint without its run's record
    rows = []
    with (output / METRICS).open(encoding="utf-8") as lines:
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line a live run is writing
    # The step the checkpoint was taken at: the last the run logged in its epoch.
    step = max((r["step"] for r in rows if r.get("epoch", 0) <= (epoch or 0)), default=0)
    row = {"run": run_id_of(output) or "", "type": "eval", "epoch": epoch or 0, "step": step}
    row.update({"time": time.time(), "split": split, "checkpoint": found.recorded.path.name})
    row.update(scores)
    target = output / (EVALS if found.running is not None else METRICS)
    with target.open("a", encoding="utf-8") as lines:
        lines.write(json.dumps(row) + "\n")
    if found.remote is not None:
        found.remote.put(output, [target.name])
