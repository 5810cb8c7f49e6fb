"""The launchers for real on CPU: torchrun, the per-rank launcher and msrun start train.py's
ranks; a rank that fails stops the node with one line naming it and its log; signals stop all."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import RenderProject
from tests.template.launchers import (
    SMOKE,
    assert_all_gone,
    env,
    fake_python,
    free_port,
    rank_processes,
    rank_table,
    run,
    this_host,
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "target", "launcher"),
    [
        ("pytorch", "cuda", "torchrun"),
        ("pytorch", "ascend", "ranktable"),
        ("mindspore", "cuda", "msrun"),
    ],
)
def test_two_ranks_train_on_cpu(
    render_project: RenderProject, framework: str, target: str, launcher: str
) -> None:
    """run_8p.sh of a 2-device project; for torchrun, OpenI's multi-card boot file instead:
    `python launch.py ARGS` in an 8-device project on a node that shows 2 GPUs starts 2
    ranks (--nproc auto), with the arguments the platform appended."""
    openi = launcher == "torchrun"
    devices = 8 if openi else 2
    project = render_project(framework=framework, target=target, devices_per_node=devices)
    variables = env(PYTHON=sys.executable, MASTER_PORT=free_port())
    if openi:
        variables["CUDA_VISIBLE_DEVICES"] = "0,1"
        boot = [str(project / "launch.py"), *SMOKE[1:]]
        result = run(Path(sys.executable), *boot, environ=variables, timeout=300, cwd=Path("/"))
    else:
        result = run(project / "scripts" / "run_8p.sh", *SMOKE, environ=variables, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"run_{launcher}.sh: all 2 " in result.stdout
    assert "test (the last checkpoint, " in result.stdout, "rank 0's progress is shown"
    logs = project / "output" / "logs"
    per_rank = {
        "torchrun": list(logs.rglob("stdout.log")),
        "ranktable": list(logs.glob("rank_*/train.log")),
        "msrun": list(logs.glob("worker_*.log")),
    }[launcher]
    assert len(per_rank) == 2
    assert list((project / "output").glob("lenet_epoch1.*")), "rank 0 saved a checkpoint"


@pytest.mark.slow
def test_run_1p_trains_on_cpu(render_project: RenderProject) -> None:
    project = render_project(target="cuda")
    result = run(project / "scripts" / "run_1p.sh", *SMOKE, environ=env(PYTHON=sys.executable))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (project / "output" / "lenet_epoch1.pt").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "launcher"), [("pytorch", "torchrun"), ("mindspore", "msrun")]
)
def test_a_failing_rank_is_one_line_naming_it_and_its_log(
    render_project: RenderProject, framework: str, launcher: str
) -> None:
    project = render_project(framework=framework, target="cuda", devices_per_node=2)
    # A model no file defines: every rank fails at its start, as a broken node's would (a
    # missing GPU is the launcher's own line now, before any rank starts).
    variables = env(PYTHON=sys.executable, MASTER_PORT=free_port())
    args = ("--", "--smoke", "--device_target", "cpu", "--model", "nope")
    result = run(project / "scripts" / "run_8p.sh", *args, environ=variables, timeout=300)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert "other" in errors[0] and "stopped" in errors[0] and "its log: " in errors[0]
    assert "(a configuration error: not restarted)" in errors[0], "exit status 2 never restarts"
    log = Path(errors[0].split("its log: ")[1])
    assert log.is_file() and "nope" in log.read_text()
    assert "Traceback" not in result.stderr
    assert_all_gone(str(project / "train.py"))


# Rank 1 fails at once; the others would run for a minute.
FAILING_RANK = """
print('rank', os.environ['RANK_ID'], flush=True)
if os.environ['RANK_ID'] == '1':
    print('boom', file=sys.stderr)
    sys.exit(1)
time.sleep(60)
"""

# Rank 0 ignores SIGTERM and has a child of its own: both must go when rank 1 fails.
STUBBORN_RANK = """
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if sys.argv[1:] == ['child']:
    time.sleep(60)
if os.environ['RANK_ID'] == '1':
    time.sleep(0.5)
    sys.exit(3)
subprocess.Popen([sys.executable, __file__, 'child'])
time.sleep(60)
"""


@pytest.fixture
def ascend_project(render_project: RenderProject) -> Path:
    """An Ascend project: its run_8p.sh starts one process per rank itself."""
    return render_project(target="ascend")


def test_per_rank_a_failed_rank_stops_the_others_and_the_group_restarts(
    ascend_project: Path, tmp_path: Path
) -> None:
    project = ascend_project
    fake = fake_python(tmp_path / "fake_rank.py", FAILING_RANK)
    started = time.monotonic()
    script = project / "scripts" / "run_8p.sh"
    result = run(script, "--nproc", "4", "--max-restarts", "1", environ=env(PYTHON=str(fake)))
    assert time.monotonic() - started < 20
    assert result.returncode == 1
    restarts = [line for line in result.stderr.splitlines() if "starts the ranks" in line]
    assert restarts == [
        "run_ranktable.sh: rank 1 exited with status 1; attempt 2 of 2 starts the ranks of "
        "node 0 again, resuming from the newest checkpoint"
    ], result.stderr
    logs = project / "output" / "logs"
    assert (
        "error: rank 1 exited with status 1; no restart left (attempt 2 of 2); the other "
        f"ranks were stopped; its log: {logs / 'rank_1' / 'train.log'}" in result.stderr
    )
    assert "    boom" in result.stderr
    # The first attempt's logs, kept.
    assert sorted(p.parent.name for p in logs.glob("attempt_0/rank_*/train.log")) == [
        f"rank_{n}" for n in range(4)
    ]
    assert "boom" in (logs / "attempt_0" / "rank_1" / "train.log").read_text()
    assert_all_gone(str(fake))


# Rank 1 says why it cannot train, once, and exits 2 (train.py's configuration errors).
BAD_CONFIG_RANK = FAILING_RANK.replace(
    "print('boom', file=sys.stderr)", "print('error: no such model', file=sys.stderr)"
).replace("sys.exit(1)", "sys.exit(2)")


def test_per_rank_a_configuration_error_is_not_restarted(
    ascend_project: Path, tmp_path: Path
) -> None:
    fake = fake_python(tmp_path / "bad_config.py", BAD_CONFIG_RANK)
    result = run(
        ascend_project / "scripts" / "run_8p.sh", "--nproc", "2", environ=env(PYTHON=str(fake))
    )
    assert result.returncode == 1
    assert "starts the ranks" not in result.stderr
    assert (
        "error: rank 1 exited with status 2: no such model (a configuration error: not "
        "restarted); the other ranks were stopped" in result.stderr
    )
    assert not (ascend_project / "output" / "logs" / "attempt_0").exists()


def test_per_rank_a_rank_that_ignores_sigterm_is_killed(
    ascend_project: Path, tmp_path: Path
) -> None:
    fake = fake_python(tmp_path / "stubborn_rank.py", STUBBORN_RANK)
    variables = env(PYTHON=str(fake), RANK_STOP_TIMEOUT="1", TRAIN_MAX_RESTARTS="0")
    started = time.monotonic()
    script = ascend_project / "scripts" / "run_8p.sh"
    result = run(script, "--nproc", "2", environ=variables, timeout=30)
    assert time.monotonic() - started < 15
    assert result.returncode == 1 and "rank 1 exited with status 3" in result.stderr
    assert_all_gone(str(fake))


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_per_rank_a_signal_stops_every_rank(
    ascend_project: Path, tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    project = ascend_project
    fake = fake_python(tmp_path / "sleepy_rank.py", "time.sleep(60)\n")
    launcher = subprocess.Popen(
        [str(project / "scripts" / "run_8p.sh"), "--nproc", "3"],
        env=env(PYTHON=str(fake)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a suite started in the background (`cmd &`) inherits SIGINT
        # ignored, and bash cannot trap a signal ignored when it starts.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    printed: list[str] = []  # the launcher's output, read as it comes
    reader = threading.Thread(target=lambda: printed.extend(launcher.stdout), daemon=True)
    reader.start()
    try:
        # Every rank started and its pid recorded (the launcher prints it after): only then
        # has the launcher all three to stop.
        deadline = time.monotonic() + 15
        while sum(", pid " in line for line in printed) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        # A pid is printed when its rank is forked, before it execs the interpreter: on a busy
        # machine the last one may not be running it yet.
        while len(rank_processes(str(fake))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(rank_processes(str(fake))) == 3, printed
        assert sum(", pid " in line for line in printed) == 3, printed
        launcher.send_signal(sig)
        launcher.wait(timeout=20)
        stderr = launcher.stderr.read()
    finally:
        launcher.kill()
    assert launcher.returncode == status
    assert "stopping every rank" in stderr
    assert_all_gone(str(fake))


@pytest.mark.slow
def test_msrun_ctrl_c_stops_every_worker_once_its_epochs_are_saved(
    render_project: RenderProject,
) -> None:
    # msrun starts each worker in a session of its own, out of reach of a signal to its group.
    project = render_project(framework="mindspore", target="cuda", devices_per_node=2)
    latest = project / "output" / "latest.json"
    launcher = subprocess.Popen(
        [str(project / "scripts" / "run_8p.sh"), "--", "--device_target", "cpu"],
        env=env(PYTHON=sys.executable, MASTER_PORT=free_port()),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while not latest.exists() and launcher.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert latest.exists(), "no epoch finished"
        os.killpg(launcher.pid, signal.SIGINT)  # what Ctrl-C sends
        _, stderr = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert launcher.returncode == 130, stderr[-3000:]
    assert "run_msrun.sh: stopped by a signal" in stderr
    # The launcher, not the terminal, stopped the workers: with SIGTERM, as every launcher does.
    logs = {log.name: log.read_text() for log in (project / "output" / "logs").glob("worker_*.log")}
    assert sorted(logs) == ["worker_0.log", "worker_1.log"]
    # msrun SIGKILLs the other workers once one exits: on a loaded machine the second may not
    # have written its own line by then (CI, once). The first to stop says it saved.
    saved = "stopped by SIGTERM: the finished epochs' outputs are saved"
    assert any(saved in log for log in logs.values()), [log[-2000:] for log in logs.values()]
    assert (project / "output" / "lenet_epoch1.ckpt").is_file()
    assert_all_gone(str(project / "output"))


def test_msrun_not_found(render_project: RenderProject, tmp_path: Path) -> None:
    project = render_project(framework="mindspore", target="cuda", devices_per_node=2)
    # An interpreter without MindSpore: no msrun next to it, nor on PATH.
    bare = tmp_path / "bare_python"
    bare.write_text('#!/bin/sh\nexec /usr/bin/python3 "$@"\n')
    bare.chmod(0o755)
    variables = {**env(PYTHON=str(bare)), "PATH": "/usr/bin:/bin"}
    # --output given: nothing asks that Python where train.py would write.
    output = ("--output", str(tmp_path / "out"))
    result = run(project / "scripts" / "run_msrun.sh", *output, environ=variables)
    assert result.returncode == 1
    assert f"error: no msrun found for {bare}, next to it or on PATH" in result.stderr
    dry = run(project / "scripts" / "run_msrun.sh", "--dry-run", *output, environ=variables)
    assert dry.returncode == 0 and "# no msrun found for" in dry.stdout


INTERFACE = (
    "set -euo pipefail; python=$PYTHON project_root=$PWD; . scripts/launch_lib.sh;"
    " master_addr=127.0.0.1; choose_interface;"
    ' echo "$GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME $HCCL_SOCKET_IFNAME $HCCL_IF_IP"'
)


def test_the_interface_is_the_one_that_routes_to_the_master_unless_set(
    render_project: RenderProject,
) -> None:
    project = render_project(devices_per_node=1)

    def chosen(**given: str) -> str:
        variables = env(PYTHON=sys.executable, **given)
        result = subprocess.run(
            ["bash", "-c", INTERFACE], cwd=project, env=variables, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert chosen() == "lo lo lo 127.0.0.1"
    assert chosen(GLOO_SOCKET_IFNAME="eth9", HCCL_IF_IP="10.0.0.5") == "eth9 lo lo 10.0.0.5"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["other node missing", "master does not resolve"])
def test_per_device_pytorch_waits_end_within_the_join_timeout(
    render_project: RenderProject, tmp_path: Path, case: str
) -> None:
    """Two nodes' ranks, this node's alone: rank 0 waits for the other node's, or this
    node's ranks for a rank 0 whose server_id does not resolve. torch would wait 30 minutes,
    retrying the name all along; the launcher's --join-timeout ends it, with one line."""
    project = render_project(target="ascend", devices_per_node=2, nnodes=2)
    # No restart: rank 1, losing rank 0's store, may fail first with status 1 (a fault, not a
    # configuration error), and each attempt would wait out the join timeout again.
    # The name is asked before any rank starts (no import races the clock): 3 s do.
    join = 3 if case == "master does not resolve" else 15
    args = ["--join-timeout", str(join), "--master-port", free_port(), "--max-restarts", "0"]
    if case == "master does not resolve":
        servers = [("10.250.0.8", [0, 1]), (this_host(), [0, 1])]
        data = json.loads(rank_table(tmp_path / "t.json", servers).read_text())
        data["server_list"][0]["server_id"] = "no-such-host.invalid"
        (tmp_path / "t.json").write_text(json.dumps(data))
        args += ["--rank-table", str(tmp_path / "t.json")]
    began = time.monotonic()
    result = run(
        project / "scripts" / "run_8p.sh",
        *args,
        *SMOKE,
        environ=env(PYTHON=sys.executable),
        timeout=120,
    )
    took = time.monotonic() - began
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    if case == "master does not resolve":
        # Asked before any rank starts, as a pod's name resolves once its pod is up.
        assert line.startswith("error: no-such-host.invalid did not resolve within 3 s")
    elif line.startswith("error: rank 0 "):
        # The rank's first error line is in the launcher's own.
        assert line.startswith("error: rank 0 exited with status 2: rank 0 of 4: the ranks did")
        assert "; the other ranks were" in line
        said = "error: rank 0 of 4: the ranks did not all meet at 127.0.0.1:"
        assert said in result.stderr and "within 15 s" in result.stderr
    else:
        # Rank 0's store closes as its wait ends, before its process does: on a loaded
        # machine rank 1, losing the store, can exit first and be the one named (CI, once).
        assert line.startswith("error: rank 1 exited with status 1")
        assert "; the other ranks were" in line
    # The timeout and the ranks' start (torch's import, a few seconds on a loaded machine).
    assert took < join + 25, took
    assert_all_gone(str(project))


# Rank 1's one line, on a disk that takes no more (its log: /dev/full).
DISK_FULL_RANK = """
if os.environ['RANK_ID'] == '1':
    print('error: no space left for lenet_epoch1.pt', file=sys.stderr)
    sys.exit(2)
time.sleep(60)
"""


def test_per_rank_a_rank_whose_log_cannot_be_written_is_named_with_its_reason(
    ascend_project: Path, tmp_path: Path
) -> None:
    fake = fake_python(tmp_path / "disk_full.py", DISK_FULL_RANK)
    log = ascend_project / "output" / "logs" / "rank_1" / "train.log"
    log.parent.mkdir(parents=True)
    log.symlink_to("/dev/full")
    result = run(
        ascend_project / "scripts" / "run_8p.sh", "--nproc", "2", environ=env(PYTHON=str(fake))
    )
    assert result.returncode == 1
    assert (
        "error: rank 1 exited with status 2: no space left for lenet_epoch1.pt (a configuration "
        f"error: not restarted); the other ranks were stopped; its log: {log}" in result.stderr
    ), result.stderr
    assert_all_gone(str(fake))


# A rank's traceback as the launchers quote it, under each awk a node may have.
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 9, in <module>\n'
    "    main()\n"
    "torch.OutOfMemoryError: CUDA out of memory\n"
)


@pytest.mark.parametrize("awk", ["mawk", "gawk", "busybox"])
def test_first_error_reads_a_traceback_under_each_awk(
    render_project: RenderProject, tmp_path: Path, awk: str
) -> None:
    project = render_project(target="cuda")
    found = shutil.which(awk)
    assert found, f"{awk} is not installed"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "awk"
    wrapper.write_text(f'#!/bin/sh\nexec {found} {"awk " if awk == "busybox" else ""}"$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / "rank.log").write_text("starting\n" + TRACEBACK + "Errors ignored\n")
    result = subprocess.run(
        ["bash", "-c", '. scripts/launch_lib.sh; first_error "$1"', "bash", tmp_path / "rank.log"],
        cwd=project,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ": torch.OutOfMemoryError: CUDA out of memory"
