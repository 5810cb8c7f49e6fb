"""A real `mlflow server` on 127.0.0.1 for the tracking tests: file stores in a test folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.training.runs import free_port

# A cold start takes about 4 s on an idle machine; two busy shared cores can triple that.
START_TIMEOUT_S = 90


def _answers(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def _group_alive(process: subprocess.Popen[bytes]) -> bool:
    process.poll()  # reap the leader: a zombie would still count as the group's member
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the server's whole process group: the CLI runs uvicorn as a child."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(process):
            return
        os.killpg(process.pid, sig)
        deadline = time.monotonic() + 15
        while _group_alive(process) and time.monotonic() < deadline:
            time.sleep(0.1)


@contextmanager
def mlflow_server(root: Path) -> Iterator[str]:
    """Run `mlflow server` on a free loopback port with its stores under root; yield its URI.

    The process group is ended on the way out, whether the tests passed or not.
    """
    port = free_port()
    command = [
        str(Path(sys.executable).parent / "mlflow"),
        "server",
        *("--backend-store-uri", str(root / "mlruns")),
        *("--artifacts-destination", str(root / "artifacts")),
        *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
    ]
    # MLflow 3 refuses the file backend unless asked: it is what this test wants (no
    # database, and two server processes where SQLite's job runner starts a dozen).
    env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    log_path = root / "server.log"
    root.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(uri):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"mlflow server did not come up on {uri}:\n{tail}")
            time.sleep(0.2)
        yield uri
    finally:
        _stop(process)
