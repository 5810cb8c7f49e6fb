"""One output directory, one run: a fresh run never writes where another run's outputs are.

A run's outputs are its checkpoints (<model>_epochN.pt|.ckpt), latest.json, the run record
(hparams.json, metrics.jsonl, artifacts.json) and tensorboard/. A new run (no --resume)
into a directory that holds any of them stops before it writes anything, with one line
saying how to continue that run (--resume auto) or where else to go. So retention,
latest.json, artifacts.json and metrics.jsonl only ever describe one run, and a platform
that restarts the same job with --resume auto picks it up again.

Also: ``python -m src.scaffold.outputs.rundir TRAIN_ARGS...``, run by the multi-process launchers
before they start any rank or write a log: the same options parsed and the same check.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from src.scaffold.errors import ConfigError, TrainError
from src.scaffold.outputs.checkpoints import MARK, POINTER, read_pointer

RECORD = ("hparams.json", "metrics.jsonl", "artifacts.json", POINTER)
# Either framework's checkpoints: lenet_epoch7.pt, resnet_epoch3.ckpt.
CHECKPOINT = re.compile(rf"[A-Za-z0-9_.-]+{MARK}\d+\.(pt|ckpt)")
TENSORBOARD = "tensorboard"


def new_run_id() -> str:
    """A run's name: its UTC start time and four random hex digits (20261124-221045-3fa2)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def run_id_of(directory: Path) -> str | None:
    """The id hparams.json gives the run in ``directory``, if any."""
    try:
        value = json.loads((directory / "hparams.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run_id = value.get("run_id") if isinstance(value, dict) else None
    return run_id if isinstance(run_id, str) else None


def outputs_in(directory: Path) -> list[str]:
    """The names of a run's outputs found in ``directory`` (empty: no run is there)."""
    if not directory.is_dir():
        return []
    found = [name for name in RECORD if (directory / name).exists()]
    found += sorted(p.name for p in directory.iterdir() if CHECKPOINT.fullmatch(p.name))
    board = directory / TENSORBOARD
    if board.is_dir() and any(board.iterdir()):
        found.append(f"{TENSORBOARD}/")
    return found


def describe(directory: Path, found: list[str]) -> str:
    """The run in ``directory`` in a few words: its id and last epoch, or its files."""
    run_id = run_id_of(directory)
    epoch = read_pointer(directory).get("epoch")
    parts = [f"run {run_id}" if run_id else "another run's outputs"]
    if isinstance(epoch, int):
        parts.append(f"after epoch {epoch}")
    shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    return f"{' '.join(parts)} ({shown})"


def check_fresh(directory: Path, resume: Any, flag: str = "--train_url") -> None:
    """Raise ConfigError when a run that would start afresh in ``directory`` finds another
    run's outputs there. --resume auto continues that run; --resume PATH continues the run
    whose checkpoint PATH is when PATH is in ``directory``."""
    if resume == "auto":
        return
    if resume is not None and Path(resume).resolve().parent == directory.resolve():
        return
    found = outputs_in(directory)
    if found:
        raise refusal(f"{directory} holds {describe(directory, found)}", flag)


def refusal(held: str, flag: str = "--train_url") -> ConfigError:
    """The one line a new run gets where ``held`` says another run is."""
    return ConfigError(
        f"{held}: continue it with --resume auto, or give another {flag} "
        "(a new run never overwrites another's outputs)"
    )


def main(argv: list[str] | None = None) -> int:
    """The launchers' check before any rank starts: exit 2 with one line, as train.py would."""
    from src.scaffold.backend import ProjectConfig
    from src.scaffold.config import parse_config
    from src.scaffold.storage.obs import is_url

    try:
        cfg = parse_config(argv, ProjectConfig)
        if not is_url(cfg.train_url):
            check_fresh(Path(cfg.train_url), cfg.resume, "--output")
    except TrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
