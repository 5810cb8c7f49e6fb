"""One output directory, one run: a new run (no --resume) where another run's outputs are
stops before it writes, saying how to continue that run or go elsewhere (also run/preflight.py)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from src.scaffold.errors import ConfigError
from src.scaffold.outputs.checkpoints import MARK, POINTER, read_json, read_pointer

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
    value = read_json(directory / "hparams.json")
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


def failed_start(directory: Path, found: list[str]) -> bool:
    """Whether ``found`` is what a start that failed before its first epoch left."""
    if POINTER in found or any(CHECKPOINT.fullmatch(name) for name in found):
        return False
    try:
        lines = (directory / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return not any(f'"type": "{kind}"' in line for line in lines for kind in EPOCH_ROWS)


def check_fresh(
    directory: Path, resume: Any, flag: str | None = None, differs: tuple[str, ...] = ()
) -> str | None:
    """ConfigError where a new run finds another's outputs (``differs``: the options not the
    same, outputs/truth.py's differences); a failed start's are cleared."""
    if resume == "auto":
        return None
    if resume is not None and Path(resume).resolve().parent == directory.resolve():
        return None
    if not (found := outputs_in(directory)):
        return None
    if failed_start(directory, found):
        for name in found:
            path = directory / name.rstrip("/")
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        return (
            f"{directory} held a start that stopped before its first epoch "
            f"({', '.join(found)}): cleared, starting afresh"
        )
    run_id, epoch = run_id_of(directory), read_pointer(directory).get("epoch")
    held = f"run {run_id}" if run_id else "another run's outputs"
    held += f" after epoch {epoch}" if isinstance(epoch, int) else ""
    shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    raise refusal(f"{directory} holds {held} ({shown})", flag, differs)


def output_flag(given: str | None = None) -> str:
    """The output option a line names: given, the launch scripts', else --train_url."""
    return given or os.environ.get(OUTPUT_FLAG_ENV) or "--train_url"


def check_writable(directory: Path, flag: str | None = None) -> None:
    """One line when files cannot be written in ``directory`` (or the folder it goes in)."""
    existing = Path(directory).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        probe = existing / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ConfigError(
            f"cannot write to the output directory {directory}: {err.strerror}; "
            f"give another {output_flag(flag)}"
        ) from err


def refusal(held: str, flag: str | None = None, differs: tuple[str, ...] = ()) -> ConfigError:
    """The one line a new run gets where ``held`` says another run is."""
    other = ""
    if differs:
        more = f" and {len(differs) - 1} more" if len(differs) > 1 else ""
        other = f", not this command's run ({differs[0]}{more})"
    return ConfigError(
        f"{held}{other}: continue it with --resume auto, or give another {output_flag(flag)} "
        "(a new run never overwrites another's outputs; the same command rerun continues its own)"
    )
