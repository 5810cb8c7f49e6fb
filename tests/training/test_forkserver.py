"""The fork server (tests/training/forkserver.py) runs a script as a fresh ``python SCRIPT``
does: the same streams, exit status, argv, directory, environment and import path, for an
ordinary end, sys.exit, an uncaught exception, Ctrl-C and a run past its timeout."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.training import forkserver, runs

SCRIPT = """\
import os, sys, threading, atexit
import torch
atexit.register(lambda: print("atexit ran"))
def after_main():
    threading.main_thread().join()  # the script's end: the interpreter waits for this thread
    print("thread joined", flush=True)
threading.Thread(target=after_main).start()
print("argv", sys.argv, "cwd", os.getcwd(), "var", os.environ.get("SEEN"))
print("path0", sys.path[0], "extra", "/from/pythonpath" in sys.path)
print("to stderr", file=sys.stderr)
what = sys.argv[1]
if what == "exit":
    sys.exit(3)
if what == "message":
    sys.exit("a message")
if what == "raise":
    raise ValueError("boom")
if what == "interrupt":
    raise KeyboardInterrupt
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("forked")
    (root / "src").mkdir()
    (root / "src" / "model.py").write_text("import torch\n")
    (root / "probe.py").write_text(SCRIPT)
    return root


def both(project: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    env = runs.clean_env(SEEN="yes", PYTHONPATH="/from/pythonpath")
    assert forkserver.forkable(project, ("probe.py",), env) == "pytorch"
    forked = runs.run(project, "probe.py", *args, env=env)
    fresh = runs.run(project, "probe.py", *args, env=env | {"TRAIN_TEMPLATE_FORKSERVER": "0"})
    return forked, fresh


@pytest.mark.parametrize("how", ["end", "exit", "message", "raise", "interrupt"])
def test_a_forked_run_ends_as_a_fresh_interpreter_does(project: Path, how: str) -> None:
    forked, fresh = both(project, how)
    assert forked.returncode == fresh.returncode
    assert forked.stdout == fresh.stdout
    assert forked.stderr == fresh.stderr  # a traceback too, frame by frame
    assert f"path0 {project}" in forked.stdout and "extra True" in forked.stdout
    assert forked.stdout.endswith("thread joined\natexit ran\n")


def test_a_start_up_variable_or_the_switch_starts_a_fresh_interpreter(project: Path) -> None:
    env = runs.clean_env()
    assert forkserver.forkable(project, ("probe.py",), env) == "pytorch"
    assert forkserver.forkable(project, ("probe.py",), env | {"OMP_NUM_THREADS": "7"}) is None
    assert forkserver.forkable(project, ("-m", "pytest"), env) is None


def test_a_run_past_its_timeout_is_killed_and_the_next_runs(project: Path) -> None:
    (project / "sleep.py").write_text("import time\ntime.sleep(60)\n")
    began = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        runs.run(project, "sleep.py", timeout=2)
    assert time.monotonic() - began < 20
    assert runs.run(project, "probe.py", "end").returncode == 0
