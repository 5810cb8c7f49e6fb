"""How a finished train.py process exits: a run that trained alone leaves without the
interpreter's teardown of the framework and what it imports (0.5 s and more on a CPU, in
every time to accuracy); ranks of a job, failures and stops exit as usual."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import NoReturn

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
