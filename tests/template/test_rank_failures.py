"""A distributed PyTorch run that finished exits 0: no process-group thread is left when the
interpreter finalises. When a rank fails, the launcher names the first (torchrun's Root Cause,
not the ranks it stopped after); a rank killed by SIGABRT after its training finished is
reported as such, with its log."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import RenderProject
from tests.template.launchers import SMOKE, assert_all_gone, env, free_port, rank_pid, run

# torchrun's report when rank 1 aborts at exit and rank 0 is stopped after it: the Failures
# section comes first and names rank 0.
TWO_RANKS = """\
[default0]:2026-11-24 08:50:33,365 test loss 2.2775  accuracy 0.2284
W1124 08:50:33.453000 5340 torch/distributed/elastic/multiprocessing/api.py:1028] Sending \
process 5350 closing signal SIGTERM
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
train.py FAILED
------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-24_08:50:33
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 5350)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 5350
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-24_08:50:33
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 5351)  (SIGABRT)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 5351
======================================================
"""


def _failure(index: int, rank: int, local: int, code: str) -> str:
    return (
        f"[{index}]:\n  time      : 2026-11-24_09:00:00\n  host      : node1\n"
        f"  rank      : {rank} (local_rank: {local})\n  exitcode  : {code} (pid: 10{rank})\n"
        "  error_file: <N/A>\n"
    )


# Node 1 of two, four ranks each: rank 6 failed first; 4, 5 and 7 were stopped.
STOPPED = "".join(_failure(i + 1, rank, rank - 4, "-15") for i, rank in enumerate((4, 5, 7)))
EIGHT_RANKS = (
    f"train.py FAILED\n{'-' * 54}\nFailures:\n{STOPPED}{'-' * 54}\n"
    f"Root Cause (first observed failure):\n{_failure(0, 6, 2, '1')}{'=' * 54}\n"
)


# One CPU run of 8 ranks: rank 3 aborted; rank 0, its allreduce broken, exited 1 in the same
# second and was polled first, so torchrun's Root Cause names rank 0.
RANK_3_ABORTS = (
    f"train.py FAILED\n{'-' * 54}\nFailures:\n{_failure(1, 3, 3, '-6')}{'-' * 54}\n"
    f"Root Cause (first observed failure):\n{_failure(0, 0, 0, '1')}{'=' * 54}\n"
)
# The same, rank 0 stopped by a SIGTERM before torchrun's poll.
RANK_3_ABORTS_0_STOPPED = RANK_3_ABORTS.replace(
    "exitcode  : 1 (pid: 100)", "exitcode  : -15 (pid: 100)"
)
# Two ranks on a full disk: rank 0 said so and exited 2; rank 1, its collective broken,
# exited 1 in the same second and is torchrun's Root Cause.
DISK_FULL = (
    f"train.py FAILED\n{'-' * 54}\nFailures:\n{_failure(1, 0, 0, '2')}{'-' * 54}\n"
    f"Root Cause (first observed failure):\n{_failure(0, 1, 1, '1')}{'=' * 54}\n"
)
# Every failure a stop: torchrun's Root Cause.
ALL_STOPPED = EIGHT_RANKS.replace("exitcode  : 1 ", "exitcode  : -15 ")


@pytest.mark.parametrize(
    ("log", "cause"),
    [
        (TWO_RANKS, "1 1 -6"),
        (EIGHT_RANKS, "6 2 1"),
        (RANK_3_ABORTS, "3 3 -6"),
        (RANK_3_ABORTS_0_STOPPED, "3 3 -6"),
        (DISK_FULL, "0 0 2"),
        (ALL_STOPPED, "6 2 -15"),
        ("torchrun gave up: the rendezvous timed out\n", ""),
    ],
    ids=[
        "rank-1-of-2",
        "rank-6-of-8",
        "rank-3-aborts",
        "rank-3-aborts-0-stopped",
        "rank-0-said-why",
        "all-stopped",
        "no-rank-ran",
    ],
)
def test_root_cause_is_the_first_failure(
    render_project: RenderProject, tmp_path: Path, log: str, cause: str
) -> None:
    project = render_project(target="cuda")
    (tmp_path / "torchrun.log").write_text(log)
    script = '. scripts/launch_lib.sh; root_cause "$1"'
    result = subprocess.run(
        ["bash", "-c", script, "bash", tmp_path / "torchrun.log"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == cause


# A rank as scripts/rank.sh runs it: train.py's ending says why (a full disk) or not, then the
# rank is stopped on its way out, as torchrun stops it once its peer (collective broken) exits 1.
STOPPED_ON_ITS_WAY_OUT = """
import os, signal, sys
sys.path.insert(0, os.getcwd())
from src.scaffold.errors import TrainError
from src.scaffold.run import ending

def train(argv):
    if argv:
        raise TrainError("no space left on the device for ckpt.pt")

ending.main(train, sys.argv[1:])
os.kill(os.getpid(), signal.SIGTERM)
"""


@pytest.mark.parametrize(("says", "recorded"), [(True, 2), (False, 128 + signal.SIGTERM)])
def test_a_rank_that_said_why_is_recorded_as_a_configuration_error_though_stopped_after(
    render_project: RenderProject, tmp_path: Path, says: bool, recorded: int
) -> None:
    """The launcher's first_failure reads the ends scripts/rank.sh records: a rank stopped after
    its one line is still the configuration error, which restarts nothing."""
    project = render_project(target="cuda")
    records = tmp_path / "ranks"
    records.mkdir()
    argv = ["bash", "scripts/rank.sh", sys.executable, "-c", STOPPED_ON_ITS_WAY_OUT]
    argv += ["--say"] if says else []
    variables = env(TRAIN_RANK_DIR=str(records), TRAIN_ATTEMPT="0", RANK="0", LOCAL_RANK="0")
    result = subprocess.run(argv, cwd=project, env=variables, capture_output=True, text=True)
    # rank.sh ends as recorded: status 2, else the same signal.
    assert result.returncode == (2 if says else -signal.SIGTERM), (result.returncode, result.stderr)
    assert (records / "ends").read_text() == f"0 0 0 {recorded}\n"
    assert ("error: no space left on the device" in result.stderr) is says
    # Its peer ended first, its collective broken: the launcher names this rank and its 2.
    (records / "ends").write_text(f"0 1 1 1\n0 0 0 {recorded}\n")
    script = ". scripts/launch_lib.sh; rank_dir=$1; first_failure 0"
    first = subprocess.run(
        ["bash", "-c", script, "bash", records], cwd=project, capture_output=True, text=True
    )
    assert first.stdout.strip() == ("0 0 2" if says else "1 1 1"), first.stderr


# train.py as the launcher starts it; rank 1 then aborts as a rank did at exit (SIGABRT),
# once rank 0 has said it finished, so that the outputs are complete.
ABORT_AFTER_TRAINING = f"""#!{sys.executable}
import glob, os, runpy, sys, time
args = [arg for arg in sys.argv[1:] if arg != "-u"]
if not args or not args[0].endswith("train.py"):
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
sys.argv = args
sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
try:
    runpy.run_path(args[0], run_name="__main__")
except SystemExit as end:
    if end.code or os.environ.get("RANK", os.environ.get("RANK_ID")) != "1":
        raise
# The launchers name the output only when told; else train.py's own ./output.
output = os.path.join(os.path.dirname(os.path.abspath(args[0])), "output")
if "--train_url" in args:
    output = args[args.index("--train_url") + 1]
logs = os.path.join(output, "logs", "**", "*.log")
deadline = time.monotonic() + 60
def rank_0_finished():
    found = glob.glob(logs, recursive=True)
    return any("rank 0: training finished" in open(log).read() for log in found)
while not rank_0_finished() and time.monotonic() < deadline:
    time.sleep(0.1)
os.abort()
"""


@pytest.mark.slow
@pytest.mark.parametrize(("target", "launcher"), [("cuda", "torchrun"), ("ascend", "ranktable")])
def test_a_rank_aborting_after_training_is_named_with_its_log(
    render_project: RenderProject, tmp_path: Path, target: str, launcher: str
) -> None:
    project = render_project(target=target, devices_per_node=2)
    wrapper = tmp_path / "abort_after_training.py"
    wrapper.write_text(ABORT_AFTER_TRAINING)
    wrapper.chmod(0o755)
    # torchrun starts each rank with PYTHON_EXEC; the per-rank launcher with PYTHON.
    python = {"PYTHON_EXEC": str(wrapper)} if launcher == "torchrun" else {"PYTHON": str(wrapper)}
    variables = env(**{"PYTHON": sys.executable, "MASTER_PORT": free_port(), **python})
    result = run(project / "scripts" / "run_8p.sh", *SMOKE, environ=variables, timeout=300)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    prefix = "error: rank 1 exited with SIGABRT after training finished (outputs complete); "
    prefix += "its log: "
    assert errors[0].startswith(prefix), errors[0]
    log = Path(errors[0][len(prefix) :])
    logs = project / "output" / "logs"
    expected = {
        "torchrun": lambda: next(logs.glob("*/attempt_0/1/stderr.log")),
        "ranktable": lambda: logs / "rank_1" / "train.log",
    }[launcher]()
    assert log == expected and "rank 1: training finished" in log.read_text()
    assert list((project / "output").glob("lenet_epoch1.pt")), "rank 0 saved its checkpoint"
    assert_all_gone(str(wrapper))


# train.py as torchrun starts it; the threads left once main() has returned, on stderr.
THREADS_AT_EXIT = f"""#!{sys.executable}
import os, runpy, sys
args = [arg for arg in sys.argv[1:] if arg != "-u"]
sys.argv = args
sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
try:
    runpy.run_path(args[0], run_name="__main__")
finally:
    tasks = os.listdir("/proc/self/task")
    names = [open(f"/proc/self/task/{{task}}/comm").read().strip() for task in tasks]
    print("threads at exit:", *sorted(names), file=sys.stderr, flush=True)
"""


@pytest.mark.slow
def test_no_process_group_thread_is_left_at_exit(
    render_project: RenderProject, tmp_path: Path
) -> None:
    # A gloo thread alive while Python finalises can abort the finished rank (SIGABRT).
    project = render_project(target="cuda", devices_per_node=2)
    wrapper = tmp_path / "threads_at_exit.py"
    wrapper.write_text(THREADS_AT_EXIT)
    wrapper.chmod(0o755)
    variables = env(PYTHON=sys.executable, PYTHON_EXEC=str(wrapper), MASTER_PORT=free_port())
    result = run(project / "scripts" / "run_8p.sh", *SMOKE, environ=variables, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    logs = sorted((project / "output" / "logs").glob("*/attempt_0/*/stderr.log"))
    left = [line for log in logs for line in log.read_text().splitlines() if "at exit" in line]
    assert len(left) == 2, left
    assert not [line for line in left if "gloo" in line], left


# Rank 1 is killed once the first step checkpoint is saved, the run well before its end:
# MindSpore's, one epoch of 20 steps a rank (1294 samples, 2 ranks, batch 32), a checkpoint
# every 5 (some 0.1 s a step here); PyTorch's, 3 epochs of 80 (batch 8), every 10 (its
# per-rank epoch of 20 steps takes 0.2 s).
WORK = {
    "pytorch": ("--epoch_size", "3", "--batch_size", "8", "--checkpoint_every", "10"),
    "mindspore": ("--epoch_size", "1", "--batch_size", "32", "--checkpoint_every", "5"),
}


def _steps(launcher: str) -> tuple[str, ...]:
    return ("--device_target", "cpu", *WORK[PROJECTS[launcher]["framework"]], "--no_tensorboard")


# Each launcher: torchrun, msrun, and the per-rank launcher (a rank table: PyTorch's Ascend
# project, whose ranks meet over gloo on a CPU). MindSpore's custom loop: Model.train resumes
# at an epoch's start only.
PROJECTS = {
    "torchrun": {"framework": "pytorch", "target": "cuda"},
    "msrun": {"framework": "mindspore", "target": "cuda", "ms_train_loop": "custom"},
    "ranktable": {"framework": "pytorch", "target": "ascend"},
}


def _launch(project: Path, output: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(project / "scripts" / "run_8p.sh"), "--output", str(output), *args],
        env=env(PYTHON=sys.executable, MASTER_PORT=free_port()),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_rank_1(project: Path, launch: subprocess.Popen[str], attempt: int, saved: Path) -> None:
    """SIGKILL rank 1 of ``attempt`` once ``saved`` exists and names a step checkpoint."""
    deadline = time.monotonic() + 240
    while launch.poll() is None and time.monotonic() < deadline:
        pid = rank_pid(project, 1, attempt)
        named = saved.read_text() if saved.is_file() else ""
        if pid is not None and (saved.name != "latest.json" or "_step" in named):
            os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.01)
    raise AssertionError(f"rank 1 of attempt {attempt} never came to be killed: {launch.poll()}")


def _digests(text: str) -> set[str]:
    """The parameters each rank reported when it finished."""
    return set(re.findall(r"finished, parameters (\w+)", text))


@pytest.mark.slow
@pytest.mark.parametrize("launcher", PROJECTS)
def test_a_killed_rank_restarts_the_group_which_ends_as_an_unbroken_run(
    render_project: RenderProject, tmp_path: Path, launcher: str
) -> None:
    project = render_project(**PROJECTS[launcher], devices_per_node=2)
    unbroken = subprocess.run(
        [str(project / "scripts" / "run_8p.sh"), "--output", str(tmp_path / "unbroken")]
        + ["--", *_steps(launcher)],
        env=env(PYTHON=sys.executable, MASTER_PORT=free_port()),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert unbroken.returncode == 0, unbroken.stdout[-3000:] + unbroken.stderr[-3000:]
    expected = _digests(unbroken.stdout)
    assert len(expected) == 1, unbroken.stdout[-3000:]
    output = tmp_path / "out"
    launch = _launch(project, output, "--", *_steps(launcher))
    _kill_rank_1(project, launch, 0, output / "latest.json")
    stdout, stderr = launch.communicate(timeout=300)
    assert launch.returncode == 0, stdout[-3000:] + stderr[-3000:]
    restarts = [line for line in stderr.splitlines() if "starts the ranks" in line]
    assert restarts == [
        f"run_{launcher}.sh: rank 1 was killed by SIGKILL; attempt 2 of 3 starts the ranks of "
        "node 0 again, resuming from the newest checkpoint"
    ], stderr[-3000:]
    assert _digests(stdout) == expected, stdout[-3000:]
    assert_all_gone(str(output))


@pytest.mark.slow
@pytest.mark.parametrize("launcher", PROJECTS)
def test_a_rank_killed_with_no_restart_left_is_one_line_naming_the_newest_attempt_log(
    render_project: RenderProject, tmp_path: Path, launcher: str
) -> None:
    project = render_project(**PROJECTS[launcher], devices_per_node=2)
    output = tmp_path / "out"
    launch = _launch(project, output, "--max-restarts", "1", "--", *_steps(launcher))
    started = output / "hparams.json"  # rank 0 has begun: the run is under way
    logs = output / "logs"
    _kill_rank_1(project, launch, 0, started)
    # torchrun makes a directory of its own each time it runs: the first attempt's.
    first = set(logs.glob("*/attempt_0"))
    _kill_rank_1(project, launch, 1, started)
    stdout, stderr = launch.communicate(timeout=300)
    assert launch.returncode == 1, stdout[-3000:] + stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr[-3000:]
    if launcher == "torchrun":
        (log,) = (p / "1" / "stderr.log" for p in set(logs.glob("*/attempt_0")) - first)
        stopped, kept = "torchrun stopped the other ranks of node 0", "attempt_0/torchrun.log"
    elif launcher == "msrun":
        log, kept = logs / "worker_1.log", "attempt_0/worker_1.log"
        stopped = "the other workers of node 0 were stopped"
    else:
        log, kept = logs / "rank_1" / "train.log", "attempt_0/rank_1/train.log"
        stopped = "the other ranks were stopped"
    assert errors[0] == (
        "error: rank 1 was killed by SIGKILL; no restart left (attempt 2 of 2); "
        f"{stopped}; its log: {log}"
    )
    assert log.is_file() and (logs / kept).is_file(), "the first attempt's logs are kept"
    assert_all_gone(str(output))
