"""Ctrl-C reaches train.py's handler as SIGINT, not as the platform's stop: every MindSpore graph
run makes SIGINT's action a C handler that sends SIGTERM (``DefaultIntHandler``). A signal
blocked in every thread is never handled: one thread sigwaits and hands it to the main thread."""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time

# msrun's scheduler outlives a stop until the workers leave, this long at most: gone first, it
# leaves a worker to die mid-step in C++ ("Failed to unregister from the meta server node")
# before it has said what it saved.
SCHEDULER_GRACE_S = 5.0


def take_sigint() -> None:
    """Block SIGINT here and in threads started after (call it before numpy or MindSpore start
    theirs); a daemon thread hands each to the main thread's handler."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: MindSpore's handler does not apply
        return
    scheduler = os.environ.get("MS_ROLE") == "MS_SCHED"
    stops = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP} if scheduler else {signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)

    def forward() -> None:
        while True:
            signum = signal.sigwait(stops)
            if scheduler:  # the workers leave the job first; then 128 + the signal, a stop
                time.sleep(SCHEDULER_GRACE_S)
                os._exit(128 + signum)
            _thread.interrupt_main()  # as a SIGINT: runs the Python handler set for it

    name = "scheduler-stop" if scheduler else "sigint"
    threading.Thread(target=forward, name=name, daemon=True).start()
