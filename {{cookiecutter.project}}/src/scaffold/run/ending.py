"""How an entry script's process ends: its exit status, and a run that trained alone leaving
without the interpreter's teardown of the framework (0.5 s and more on a CPU)."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from src.scaffold.backend import guards
from src.scaffold.errors import Stopped, TrainError

DEBUG = "--debug"  # the whole traceback of an error instead of its one line
# The frameworks a project imports: without them, one line says which Python lacks them.
FRAMEWORKS = ("torch", "torch_npu", "mindspore")
# Set when this process trained alone (no process group) and saved everything.
_ALONE: list = []


def trained_alone() -> None:
    _ALONE.append(True)


def leave(code: int) -> NoReturn:
    """Exit with ``code``; after a run that trained alone, without the interpreter's teardown."""
    # Only where train.py is the program: a tool running it (cProfile) writes after it returns.
    program = sys.modules.get("__main__")
    if code != 0 or not _ALONE or getattr(program, "leave", None) is not leave:
        sys.exit(code)
    # The interpreter's exit in its order: threads' exit hooks and joins, then atexit hooks.
    threading._shutdown()
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def said(line: str) -> int:
    """``error: line``, status 2; first, under scripts/rank.sh, the file TRAIN_RANK_SAID: this
    end stays a configuration error's when the launcher stops the rank on its way out."""
    with contextlib.suppress(OSError, KeyError):
        Path(os.environ["TRAIN_RANK_SAID"]).touch()
    print(f"error: {line}", file=sys.stderr)
    return 2


def main(train: Callable[[Sequence[str]], None], argv: Sequence[str]) -> int:
    """Call ``train(argv)``: an error is one line and status 2, a stop 128 + the signal."""
    debug = DEBUG in argv
    argv = [arg for arg in argv if arg != DEBUG]
    try:
        train(argv)
    except TrainError as err:
        if debug:
            raise
        # A worker process's error arrives quoted in a longer message: its own line.
        return said(f"{guards.unquoted(err) or err}")
    except Stopped as err:
        print(f"{err}: the finished epochs' outputs are saved", file=sys.stderr)
        return 128 + err.signum
    except ModuleNotFoundError as err:
        if debug or err.name not in FRAMEWORKS:
            raise
        script = Path(sys.argv[0]).name if sys.argv[0].endswith(".py") else "train.py"
        return said(guards.no_module(err.name, sys.executable, script))
    except Exception as err:
        line = None if debug else guards.one_line(err)
        if line is None:
            raise
        return said(f"{line} (--debug shows the traceback)")
    return 0
