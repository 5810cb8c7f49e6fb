"""Running one container to its end: a deadline, the log as it comes, nothing left behind."""

from __future__ import annotations

import re
import threading
from contextlib import suppress

from generator.engine.sdk import Sdk
from generator.engine.types import ContainerSpec, Lines, RunResult
from generator.errors import ContainerFailed, EngineError, EngineUnavailable

TAIL_LINES = 20
# What the engine says when a container's command does not exist: a shell's 127.
NOT_FOUND = re.compile(r"executable file not found|no such file or directory", re.I)


def run(sdk: Sdk, spec: ContainerSpec, *, timeout_s: float, on_line: Lines) -> RunResult:
    """Run ``spec`` in a fresh container with networking off and wait for it.

    The container is killed on timeout or Ctrl-C and removed in every case:
    nothing is left running. A timeout raises ContainerFailed; a command the image
    lacks is exit code 127 with the engine's message as the log.
    """
    container = sdk.create_container(spec)
    try:
        try:
            sdk.start(container)
        except EngineUnavailable:
            raise
        except EngineError as err:
            if NOT_FOUND.search(str(err)):
                return RunResult(127, [str(err)])
            raise
        return _follow(sdk, container, timeout_s, on_line)
    finally:
        # Runs on success, timeout, a lost engine and KeyboardInterrupt alike.
        with suppress(EngineError):
            sdk.remove_container(container)


def _follow(sdk: Sdk, container: str, timeout_s: float, on_line: Lines) -> RunResult:
    """Stream the log until the container ends; a watchdog kills it at the deadline."""
    log: list[str] = []
    # The log stream blocks until the container ends: killing it ends the stream.
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        with suppress(EngineError):
            sdk.kill(container)

    watchdog = threading.Timer(timeout_s, expire)
    watchdog.start()
    try:
        for raw in sdk.logs(container):
            for line in raw.decode("utf-8", "replace").splitlines():
                log.append(line)
                on_line(line)
        status = sdk.wait(container)
    finally:
        watchdog.cancel()
    if expired.is_set():
        raise ContainerFailed(
            f"timed out after {timeout_s:.0f} s; the container was killed", None, log[-TAIL_LINES:]
        )
    return RunResult(status, log)
