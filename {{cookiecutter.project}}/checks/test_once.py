"""One process per node runs a step (the data copy), chosen by an O_EXCL lock file; the others
wait for its done marker, fail at once on its failure marker, and take over a dead one's lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from src.scaffold.errors import StorageError
from src.scaffold.storage.once import Once

PROJECT = Path(__file__).resolve().parent.parent
# Runs the step once per "node" (the directory): a slow copy, or a failing one.
STEP = """
import os, sys, time
from pathlib import Path
from src.scaffold.errors import StorageError
from src.scaffold.storage.once import Once
directory, mode = Path(sys.argv[1]), sys.argv[2]
def step():
    with open(directory / "ran", "a") as out:
        out.write(f"{os.getpid()}\\n")
    time.sleep(1)
    if mode == "fail":
        raise StorageError("copying obs://b/d to /cache/data failed: NoSuchKey")
try:
    print("ran" if Once(directory, "data", "obs://b/d").run(step, "copy", 30) else "waited")
except StorageError as err:
    sys.exit(f"error: {err}")
"""


def start(directory: Path, mode: str, count: int) -> list[subprocess.CompletedProcess[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STEP, str(directory), mode],
            cwd=PROJECT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    return [subprocess.CompletedProcess(p.args, p.wait(60), *p.communicate()) for p in procs]


def test_exactly_one_process_runs_the_step(tmp_path: Path) -> None:
    results = start(tmp_path, "ok", 3)
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    assert sorted(r.stdout.strip() for r in results) == ["ran", "waited", "waited"]
    assert len((tmp_path / "ran").read_text().split()) == 1
    assert not (tmp_path / ".data.lock").exists()
    # A later run asking for the same data reuses it.
    assert [r.stdout.strip() for r in start(tmp_path, "ok", 1)] == ["waited"]
    assert len((tmp_path / "ran").read_text().split()) == 1


def test_a_failed_step_fails_every_waiting_process_fast(tmp_path: Path) -> None:
    began = time.monotonic()
    results = start(tmp_path, "fail", 3)
    assert time.monotonic() - began < 20
    assert all(r.returncode == 1 for r in results)
    reasons = sorted(r.stderr.strip() for r in results)
    assert reasons[0] == "error: copying obs://b/d to /cache/data failed: NoSuchKey"
    assert (
        reasons[1:]
        == [
            "error: the node's copier could not finish: copying obs://b/d to /cache/data failed: "
            "NoSuchKey"
        ]
        * 2
    )
    assert len((tmp_path / "ran").read_text().split()) == 1


def test_a_dead_copiers_lock_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    lock = tmp_path / ".data.lock"
    lock.write_text(json.dumps({"host": os.uname().nodename, "pid": int(dead.stdout)}))
    assert [r.stdout.strip() for r in start(tmp_path, "ok", 1)] == ["ran"]


def test_a_waiter_gives_up_at_its_timeout(tmp_path: Path) -> None:
    # A live lock holder (this test process) that never finishes.
    (tmp_path / ".data.lock").write_text(
        json.dumps({"host": os.uname().nodename, "pid": os.getpid()})
    )
    with pytest.raises(
        StorageError, match=r"waited 0.5 s for another process of this node to copy"
    ):
        Once(tmp_path, "data", "k").run(lambda: None, "copy", 0.5)


def test_a_failure_just_before_the_lock_is_taken_is_shared(tmp_path: Path, monkeypatch) -> None:
    """The copier fails and frees its lock after this process looked for a failure and
    before it took the lock: it reports that failure rather than copying again."""
    once = Once(tmp_path, "data", "k")
    take = once._acquire

    def copier_fails_first() -> bool:
        (tmp_path / ".data.failed").write_text(json.dumps({"key": "k", "reason": "NoSuchKey"}))
        return take()

    monkeypatch.setattr(once, "_acquire", copier_fails_first)
    ran = []
    with pytest.raises(StorageError, match="^the node's copier could not finish: NoSuchKey$"):
        once.run(lambda: ran.append(1), "copy", 5)
    assert not ran and not (tmp_path / ".data.lock").exists()


def test_a_process_that_reaches_the_step_late_shares_its_runs_failure(tmp_path: Path) -> None:
    """The failure is from this run if it came after the process started, however long the
    process took to get to the step (a node's processes start together; one may starve)."""
    late = "import time; time.sleep(2.5)\n" + STEP
    process = subprocess.Popen(
        [sys.executable, "-c", late, str(tmp_path), "ok"],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Written while it sleeps: after it started, 2.5 s before it imports the step's module.
    (tmp_path / ".data.failed").write_text(json.dumps({"key": "obs://b/d", "reason": "gone"}))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    assert err.strip() == "error: the node's copier could not finish: gone"
    assert not (tmp_path / "ran").exists()
