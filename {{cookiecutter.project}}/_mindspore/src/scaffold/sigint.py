"""Ctrl-C reaches train.py's handler as SIGINT, not as MindSpore's SIGTERM.

MindSpore's graph runtime, at the start of every graph run, makes SIGINT's action a C
handler that sends the process SIGTERM (``mindspore::DefaultIntHandler``, installed by
``GraphScheduler::Run``): Python's own SIGINT handler never runs, and Ctrl-C would read as
the platform's stop. A signal blocked in every thread is never handled, whatever its
action; one thread takes it with sigwait and hands it to the main thread instead.
"""

from __future__ import annotations

import _thread
import signal
import threading


def take_sigint() -> None:
    """Block SIGINT here and in every thread started after (so call it before numpy or
    MindSpore start theirs); a daemon thread passes each one to the main thread's handler."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: MindSpore's handler does not apply
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def forward() -> None:
        while True:
            signal.sigwait({signal.SIGINT})
            _thread.interrupt_main()  # as a SIGINT: runs the Python handler set for it

    threading.Thread(target=forward, name="sigint", daemon=True).start()
