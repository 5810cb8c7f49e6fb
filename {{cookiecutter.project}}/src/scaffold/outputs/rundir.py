"""One output directory, one run: a fresh run never writes where another run's outputs are.

A run's outputs are its checkpoints (<model>_epochN.pt|.ckpt), latest.json, the run record
(hparams.json, metrics.jsonl, artifacts.json) and tensorboard/. A new run (no --resume)
into a directory that holds any of them stops before it writes anything, with one line
saying how to continue that run (--resume auto) or where else to go. So retention,
latest.json, artifacts.json and metrics.jsonl only ever describe one run, and a platform
that restarts the same job with --resume auto picks it up again.

The multi-process launchers make the same check before any rank starts (run/preflight.py).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from src.scaffold.errors import ConfigError
from src.scaffold.outputs.checkpoints import MARK, POINTER, read_pointer

RECORD = ("hparams.json", "metrics.jsonl", "artifacts.json", POINTER)
# Either framework's checkpoints: lenet_epoch7.pt, resnet_epoch3.ckpt.
CHECKPOINT = re.compile(rf"[A-Za-z0-9_.-]+{MARK}\d+(_step\d+)?\.(pt|ckpt)")
TENSORBOARD = "tensorboard"
# metrics.jsonl rows that only a finished epoch writes.
EPOCH_ROWS = ("train", "val", "test")
# The output option of the command a person ran: the launch scripts set it to --output.
OUTPUT_FLAG_ENV = "TRAIN_OUTPUT_FLAG"


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


def failed_start(directory: Path, found: list[str]) -> bool:
    """Whether ``found`` are what a start that failed before its first epoch left: a record
    and TensorBoard files, but no checkpoint, no latest.json and no epoch in metrics.jsonl."""
    if POINTER in found or any(CHECKPOINT.fullmatch(name) for name in found):
        return False
    try:
        lines = (directory / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return not any(f'"type": "{kind}"' in line for line in lines for kind in EPOCH_ROWS)


def check_fresh(directory: Path, resume: Any, flag: str | None = None) -> str | None:
    """Raise ConfigError when a run that would start afresh in ``directory`` finds another
    run's outputs there. --resume auto continues that run; --resume PATH continues the run
    whose checkpoint PATH is when PATH is in ``directory``. What a failed start left is
    cleared instead, and the line saying so returned."""
    if resume == "auto":
        return None
    if resume is not None and Path(resume).resolve().parent == directory.resolve():
        return None
    found = outputs_in(directory)
    if not found:
        return None
    if failed_start(directory, found):
        for name in found:
            path = directory / name.rstrip("/")
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        return (
            f"{directory} held a start that stopped before its first epoch "
            f"({', '.join(found)}): cleared, starting afresh"
        )
    raise refusal(f"{directory} holds {describe(directory, found)}", flag)


def output_flag(given: str | None = None) -> str:
    """The output option a line names: the one given, the launch scripts' (OUTPUT_FLAG_ENV),
    else train.py's --train_url."""
    return given or os.environ.get(OUTPUT_FLAG_ENV) or "--train_url"


def check_writable(directory: Path, flag: str | None = None) -> None:
    """Make sure files can be written in ``directory`` (or, while it does not exist, in
    the nearest folder above it, where it will be made): one line naming it and why not,
    before anything is written."""
    flag = output_flag(flag)
    existing = Path(directory).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        probe = existing / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ConfigError(
            f"cannot write to the output directory {directory}: {err.strerror}; give another {flag}"
        ) from err


def refusal(held: str, flag: str | None = None) -> ConfigError:
    """The one line a new run gets where ``held`` says another run is; ``flag`` names the
    output option of the command that was used (the launch scripts say so in OUTPUT_FLAG_ENV)."""
    flag = output_flag(flag)
    return ConfigError(
        f"{held}: continue it with --resume auto, or give another {flag} "
        "(a new run never overwrites another's outputs)"
    )
