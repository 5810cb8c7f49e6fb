"""How an entry script's process ends: its exit status (main: a mistake is one line and
status 2, a stop 128 + the signal), and, for a run that trained alone, leaving without the
interpreter's teardown of the framework and what it imports (0.5 s and more on a CPU, in
every time to accuracy); ranks of a job, failures and stops exit as usual."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from src.scaffold.backend import guards
from src.scaffold.errors import Stopped, TrainError

# The flag that shows the whole traceback of an error instead of its one line.
DEBUG = "--debug"
# The frameworks a project imports: without them, one line says which Python lacks them.
FRAMEWORKS = ("torch", "torch_npu", "mindspore")
# Set when this process trained alone (no process group) and saved everything.
_ALONE: list = []


def trained_alone() -> None:
    _ALONE.append(True)


def leave(code: int) -> NoReturn:
    """Exit with ``code``: after a run that trained alone, without the teardown, but with what
    a normal exit does first (the other threads finished, the exit hooks run: TensorBoard,
    MLflow, loader processes; the streams flushed)."""
    # Only where train.py is the program: a tool running it inside its own (python -m
    # cProfile, a debugger) writes what it gathered after the script returns.
    program = sys.modules.get("__main__")
    if code != 0 or not _ALONE or getattr(program, "leave", None) is not leave:
        sys.exit(code)
    # What the interpreter's exit does first, in its order: the threads' exit hooks (such as
    # concurrent.futures' pools) and the other threads joined; then the atexit hooks.
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    else:
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(train: Callable[[Sequence[str]], None], argv: Sequence[str]) -> int:
    """Call ``train(argv)``: a mistake in the input, or an error raised in your files, is one
    line on stderr and exit status 2 (--debug: the whole traceback instead); a stop signal
    exits 128 + its number once the outputs are saved."""
    debug = DEBUG in argv
    argv = [arg for arg in argv if arg != DEBUG]
    try:
        train(argv)
    except TrainError as err:
        if debug:
            raise
        # A worker process's error arrives quoted in a longer message: its own line.
        print(f"error: {guards.unquoted(err) or err}", file=sys.stderr)
        return 2
    except Stopped as err:
        print(f"{err}: the finished epochs' outputs are saved", file=sys.stderr)
        return 128 + err.signum
    except ModuleNotFoundError as err:
        if debug or err.name not in FRAMEWORKS:
            raise
        script = Path(sys.argv[0]).name if sys.argv[0].endswith(".py") else "train.py"
        print(f"error: {guards.no_module(err.name, sys.executable, script)}", file=sys.stderr)
        return 2
    except Exception as err:
        line = None if debug else guards.one_line(err)
        if line is None:
            raise
        print(f"error: {line} (--debug shows the traceback)", file=sys.stderr)
        return 2
    return 0
