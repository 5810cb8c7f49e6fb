"""Ctrl-C reaches train.py's handler as SIGINT, not as MindSpore's SIGTERM.

MindSpore's graph runtime, at the start of every graph run, makes SIGINT's action a C
handler that sends the process SIGTERM (``mindspore::DefaultIntHandler``, installed by
``GraphScheduler::Run``): Python's own SIGINT handler never runs, and Ctrl-C would read as
the platform's stop. A signal blocked in every thread is never handled, whatever its
action; one thread takes it with sigwait and hands it to the main thread instead.

msrun's scheduler outlives a stop by a few seconds: a launcher stops every process of the
node at once, and a scheduler gone first leaves a worker inside a step to die in MindSpore's
C++ ("Failed to unregister from the meta server node") before it has said what it saved.
The workers leave the job, the scheduler with them; it goes SCHEDULER_GRACE_S after the
signal if they do not (its main thread waits in C++, where no Python handler runs).
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time

SCHEDULER_GRACE_S = 5.0


def take_sigint() -> None:
    """Block SIGINT here and in every thread started after (so call it before numpy or
    MindSpore start theirs); a daemon thread passes each one to the main thread's handler.
    In msrun's scheduler, a stop signal ends the process SCHEDULER_GRACE_S later instead."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: MindSpore's handler does not apply
        return
    if os.environ.get("MS_ROLE") == "MS_SCHED":
        _leave_after_the_workers()
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def forward() -> None:
        while True:
            signal.sigwait({signal.SIGINT})
            _thread.interrupt_main()  # as a SIGINT: runs the Python handler set for it

    threading.Thread(target=forward, name="sigint", daemon=True).start()


def _leave_after_the_workers() -> None:
    """The stop signals, blocked in every thread, wait for one thread: it lets the workers
    stop and leave the job first, then ends the scheduler (128 + the signal, as a stop)."""
    stops = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)

    def leave() -> None:
        signum = signal.sigwait(stops)
        time.sleep(SCHEDULER_GRACE_S)
        os._exit(128 + signum)

    threading.Thread(target=leave, name="scheduler-stop", daemon=True).start()
