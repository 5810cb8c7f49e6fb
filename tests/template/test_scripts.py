"""The generated launch scripts and env.sh: lint, dry runs, real launches on CPU, failure handling.

The launcher tests put a tiny stand-in interpreter in $PYTHON: they test how the
scripts start, watch and stop ranks, not training. The real runs use the
generated train.py with --smoke, which needs no data and takes seconds.
MindSpore projects share run_8p.sh (rank-table mode on Ascend, msrun elsewhere)
and add run_msrun.sh.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from generator import ranktable

RenderProject = Callable[..., Path]  # the conftest fixture: render_project(project, **options)

BIN = Path(sys.executable).parent
# Variables the scripts read: a value from the developer's shell must not leak in.
SCRIPT_VARIABLES = frozenset(
    """PYTHON DATA_DIR OUTPUT_DIR LOG_DIR DEVICE_ID NPROC_PER_NODE NNODES NODE_RANK MASTER_ADDR
    MASTER_PORT LAUNCHER RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE RANK_ID RANK_SIZE
    RANK_TABLE_FILE RANK_STOP_TIMEOUT ASCEND_HOME ASCEND_INSTALL_INFO NCCL_DEBUG
    HCCL_CONNECT_TIMEOUT HCCL_EXEC_TIMEOUT ASCEND_GLOBAL_LOG_LEVEL
    ASCEND_SLOG_PRINT_TO_STDOUT""".split()
)
# A per-rank dry-run line: (RANK, LOCAL_RANK, WORLD_SIZE, RANK_ID, DEVICE_ID, RANK_SIZE).
RANK_LINE = re.compile(
    r"^RANK=(\d+) LOCAL_RANK=(\d+) WORLD_SIZE=(\d+) .*"
    r"RANK_ID=(\d+) DEVICE_ID=(\d+) RANK_SIZE=(\d+) ",
    re.M,
)
# A MindSpore rank-table dry-run line: (RANK_TABLE_FILE, RANK_SIZE, RANK_ID, DEVICE_ID).
MS_RANK_LINE = re.compile(
    r"^RANK_TABLE_FILE=(\S+) RANK_SIZE=(\d+) RANK_ID=(\d+) DEVICE_ID=(\d+) ", re.M
)
# A run_msrun.sh dry-run comment: (rank, RANK_ID, DEVICE_ID, RANK_SIZE).
MSRUN_RANK_LINE = re.compile(
    r"^# rank (\d+): RANK_ID=(\d+) DEVICE_ID=(\d+) RANK_SIZE=(\d+) MS_ROLE=MS_WORKER", re.M
)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARIABLES}
    env.update(extra)
    return env


def _run(
    script: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script), *args],
        env=env or _env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _bash(project: Path, code: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", code],
        cwd=project,
        env=_env(**extra),
        capture_output=True,
        text=True,
        timeout=30,
    )


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def _processes_with(token: str) -> list[int]:
    """Live processes whose command line holds token (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


def _fake_python(path: Path, body: str) -> Path:
    """A stand-in for $PYTHON: this interpreter running body, with train.py's args in sys.argv.

    Anything but train.py (rank_table.py check, python -c, msrun) runs on the real interpreter.
    """
    path.write_text(
        f"#!{sys.executable}\nimport os, signal, subprocess, sys, time\n"
        "if not sys.argv[1:] or not sys.argv[1].endswith('train.py'):\n"
        "    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
        f"{body}"
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def ascend(render_project: RenderProject) -> Path:
    return render_project(target="ascend", devices_per_node=8)


# --- lint -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "target", "devices"),
    [
        ("pytorch", "cuda", 8),
        ("pytorch", "ascend", 8),
        ("pytorch", "both", 2),
        ("pytorch", "ascend", 1),
        ("mindspore", "cuda", 8),
        ("mindspore", "ascend", 8),
        ("mindspore", "both", 2),
        ("mindspore", "ascend", 1),
    ],
)
def test_scripts_pass_shellcheck(
    render_project: RenderProject, framework: str, target: str, devices: int
) -> None:
    project = render_project(framework=framework, target=target, devices_per_node=devices)
    shellcheck = BIN / "shellcheck"
    scripts = [project / "env.sh", *sorted(project.glob("scripts/*.sh"))]
    names = {path.name for path in scripts}
    assert {"run_1p.sh", "run_8p.sh", "launch_lib.sh"} <= names
    assert ("run_msrun.sh" in names) == (framework == "mindspore")
    result = subprocess.run(
        [
            str(shellcheck if shellcheck.exists() else "shellcheck"),
            "--severity=style",
            "--external-sources",
            *map(str, scripts),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_env_sh_carries_only_the_target_sections(render_project: RenderProject) -> None:
    cuda = (render_project("c", target="cuda") / "env.sh").read_text()
    ascend = (render_project("a", target="ascend") / "env.sh").read_text()
    assert "NCCL_DEBUG:=WARN" in cuda and "HCCL" not in cuda
    assert "HCCL_CONNECT_TIMEOUT" in ascend and "NCCL" not in ascend


# --- run_8p.sh dry runs ------------------------------------------------------


def _ranks(stdout: str) -> list[tuple[int, ...]]:
    return [tuple(map(int, m)) for m in RANK_LINE.findall(stdout)]


def test_per_rank_dry_run_prints_every_rank(ascend: Path) -> None:
    result = _run(ascend / "scripts" / "run_8p.sh", "--dry-run")
    assert result.returncode == 0, result.stderr
    ranks = _ranks(result.stdout)
    # (RANK, LOCAL_RANK, WORLD_SIZE, RANK_ID, DEVICE_ID, RANK_SIZE) for each rank.
    assert ranks == [(r, r, 8, r, r, 8) for r in range(8)]
    for rank in range(8):
        assert f"# rank {rank}, log {ascend}/output/logs/rank_{rank}/train.log" in result.stdout
    assert not (ascend / "output").exists(), "a dry run creates nothing"


def test_per_rank_dry_run_on_the_second_node(ascend: Path) -> None:
    result = _run(
        ascend / "scripts" / "run_8p.sh", "--dry-run", "--nnodes", "2", "--node-rank", "1"
    )
    assert result.returncode == 0, result.stderr
    assert _ranks(result.stdout) == [(8 + r, r, 16, 8 + r, r, 16) for r in range(8)]


def test_per_rank_dry_run_whole_text(render_project: RenderProject, tmp_path: Path) -> None:
    project = render_project(target="ascend", devices_per_node=2)
    args = "--dry-run --master-addr 10.0.0.1 --data /data --output /out -- --epoch_size 2"
    result = _run(project / "scripts" / "run_8p.sh", *args.split())
    common = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2"
    train = "python3 train.py --data_url /data --train_url /out --epoch_size 2"
    master = "MASTER_ADDR=10.0.0.1 MASTER_PORT=29500"
    assert result.stdout == (
        "# per-rank: 2 processes on node 0 of 1, world size 2\n"
        f"cd {project}\n"
        ". ./env.sh\n"
        "# rank 0, log /out/logs/rank_0/train.log\n"
        f"RANK=0 LOCAL_RANK=0 {common} RANK_ID=0 DEVICE_ID=0 RANK_SIZE=2 {master} {train}\n"
        "# rank 1, log /out/logs/rank_1/train.log\n"
        f"RANK=1 LOCAL_RANK=1 {common} RANK_ID=1 DEVICE_ID=1 RANK_SIZE=2 {master} {train}\n"
    )


def test_torchrun_dry_run(render_project: RenderProject) -> None:
    project = render_project(target="cuda", devices_per_node=4, nnodes=2)
    result = _run(
        project / "scripts" / "run_8p.sh", "--dry-run", "--node-rank", "1", "--", "--smoke"
    )
    assert result.returncode == 0, result.stderr
    command = shlex.split(result.stdout.splitlines()[-1])
    assert command == [
        *"python3 -m torch.distributed.run --nnodes 2 --nproc_per_node 4 --node_rank 1".split(),
        *"--master_addr 127.0.0.1 --master_port 29500".split(),
        *f"--log_dir {project}/output/logs --redirects 3 --tee 3".split(),
        *f"train.py --data_url {project}/data --train_url {project}/output --smoke".split(),
    ]
    assert "RANK_ID" not in result.stdout


def test_both_picks_a_launcher(render_project: RenderProject) -> None:
    script = render_project(target="both", devices_per_node=2) / "scripts" / "run_8p.sh"
    auto = _run(script, "--dry-run").stdout
    expected = "# per-rank:" if Path("/dev/davinci0").exists() else "# torchrun:"
    assert auto.startswith(expected)
    assert _run(script, "--dry-run", "--launcher", "per-rank").stdout.startswith("# per-rank:")
    assert _run(script, "--dry-run", env=_env(LAUNCHER="torchrun")).stdout.startswith("# torchrun:")


def test_environment_supplies_the_defaults(ascend: Path) -> None:
    env = _env(
        NPROC_PER_NODE="2", NNODES="3", NODE_RANK="2", MASTER_ADDR="node0", MASTER_PORT="2345"
    )
    result = _run(ascend / "scripts" / "run_8p.sh", "--dry-run", env=env)
    assert _ranks(result.stdout) == [(4, 0, 6, 4, 0, 6), (5, 1, 6, 5, 1, 6)]
    assert "MASTER_ADDR=node0 MASTER_PORT=2345" in result.stdout
    # A flag beats the environment.
    flagged = _run(ascend / "scripts" / "run_8p.sh", "--dry-run", "--nproc=1", env=env)
    assert _ranks(flagged.stdout) == [(2, 0, 3, 2, 0, 3)]


# --- bad arguments ------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        ("run_8p.sh", ["--bogus"], "unknown argument: --bogus"),
        ("run_8p.sh", ["--nproc", "x"], "--nproc must be a whole number"),
        ("run_8p.sh", ["--nproc", "08"], "--nproc must be a whole number"),
        ("run_8p.sh", ["--nproc"], "--nproc needs a value"),
        (
            "run_8p.sh",
            ["--nnodes", "2", "--node-rank", "2"],
            "--node-rank 2 is not below --nnodes 2",
        ),
        ("run_8p.sh", ["--master-port", "70000"], "--master-port must be a TCP port"),
        ("run_1p.sh", ["--device-id", "gpu0"], "--device-id must be a whole number"),
        ("run_8p.sh", ["--nproc", "--dry-run"], "--nproc needs a value"),
        ("run_1p.sh", ["--data", ""], "--data needs a value"),
        ("run_1p.sh", ["extra"], "unknown argument: extra"),
    ],
)
def test_bad_arguments_print_usage_and_exit_2(
    ascend: Path, script: str, args: list[str], message: str
) -> None:
    result = _run(ascend / "scripts" / script, "--dry-run", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"error: {message}" in result.stderr
    assert "usage: scripts/" in result.stderr


def test_bad_stop_timeout(ascend: Path) -> None:
    result = _run(ascend / "scripts" / "run_8p.sh", env=_env(RANK_STOP_TIMEOUT="1.5"))
    assert result.returncode == 2
    assert "RANK_STOP_TIMEOUT must be whole seconds, not '1.5'" in result.stderr


def test_bad_launcher(render_project: RenderProject) -> None:
    script = render_project(target="both") / "scripts" / "run_8p.sh"
    result = _run(script, "--launcher", "mpirun", "--dry-run")
    assert result.returncode == 2
    assert "--launcher must be torchrun, per-rank or auto" in result.stderr


def test_help_shows_the_rendered_defaults(render_project: RenderProject) -> None:
    project = render_project(target="ascend", devices_per_node=4, nnodes=2)
    result = _run(project / "scripts" / "run_8p.sh", "--help")
    assert result.returncode == 0
    assert "else 4)" in result.stdout and "else 2)" in result.stdout
    assert _run(project / "scripts" / "run_1p.sh", "-h").stdout.startswith(
        "usage: scripts/run_1p.sh"
    )


# --- run_1p.sh ----------------------------------------------------------------


def test_run_1p_dry_run(ascend: Path, tmp_path: Path) -> None:
    args = "--dry-run --device-id 3 --output out -- --epoch_size 1"
    result = _run(ascend / "scripts" / "run_1p.sh", *args.split(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"cd {ascend}\n"
        ". ./env.sh\n"
        "export DEVICE_ID=3 RANK_ID=0 RANK_SIZE=1\n"
        "unset RANK LOCAL_RANK WORLD_SIZE\n"
        # --output is relative to where the script was called; the default data is in the project.
        f"python3 train.py --data_url {ascend}/data --train_url {tmp_path}/out --epoch_size 1\n"
    )


# Spaces, both quotes, a command substitution, a glob and a leading dash: one word each.
AWKWARD = "my data 'q' \"dq\" $(touch pwned) `touch pwned2` * -x"


def test_awkward_paths_are_single_arguments(ascend: Path, tmp_path: Path) -> None:
    argv_file = tmp_path / "argv.txt"
    fake = _fake_python(
        tmp_path / "fake python",
        f"with open({str(argv_file)!r} + os.environ.get('RANK', ''), 'w') as out:\n"
        "    out.write(repr(sys.argv[1:]))\n",
    )
    data, output = tmp_path / AWKWARD, tmp_path / f"out {AWKWARD}"
    expected = ["train.py", "--data_url", str(data), "--train_url", str(output), "--flag", "a b"]

    fake_env = _env(PYTHON=str(fake))
    run_1p, run_8p = ascend / "scripts" / "run_1p.sh", ascend / "scripts" / "run_8p.sh"
    train_args = ("--", "--flag", "a b")

    one = _run(run_1p, "--data", str(data), f"--output={output}", *train_args, env=fake_env)
    assert one.returncode == 0, one.stderr
    assert ast.literal_eval(argv_file.read_text()) == expected

    paths = ("--data", str(data), "--output", str(output))
    many = _run(run_8p, "--nproc", "1", *paths, *train_args, env=fake_env)
    assert many.returncode == 0, many.stderr
    assert ast.literal_eval(Path(f"{argv_file}0").read_text()) == expected
    assert (output / "logs" / "rank_0" / "train.log").is_file()

    # The dry runs print lines a shell splits back into the same words.
    dry = _run(run_1p, "--dry-run", *paths, *train_args)
    assert shlex.split(dry.stdout.splitlines()[-1]) == ["python3", *expected]
    dry = _run(run_8p, "--dry-run", "--nproc", "1", *paths, *train_args)
    assert shlex.split(dry.stdout.splitlines()[-1])[-len(expected) :] == expected

    assert not list(tmp_path.rglob("pwned*")), "a path was executed"


# --- real launches --------------------------------------------------------------

# The generated train.py's quick mode: random data in MNIST's shapes, one epoch.
SMOKE = ("--", "--smoke", "--device_target", "cpu")


@pytest.mark.slow
def test_per_rank_trains_two_ranks_on_cpu(render_project: RenderProject) -> None:
    project = render_project(target="ascend", devices_per_node=2)
    env = _env(PYTHON=sys.executable, MASTER_PORT=_free_port())
    result = _run(project / "scripts" / "run_8p.sh", *SMOKE, env=env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 2 ranks finished" in result.stdout
    assert "test accuracy" in result.stdout, "local rank 0 is shown on the console"
    for rank in (0, 1):
        assert (project / "output" / "logs" / f"rank_{rank}" / "train.log").is_file()
    assert list((project / "output").glob("*.pt")), "rank 0 saved a checkpoint"


@pytest.mark.slow
def test_torchrun_trains_two_ranks_on_cpu(render_project: RenderProject) -> None:
    project = render_project(target="cuda", devices_per_node=2)
    env = _env(PYTHON=sys.executable, MASTER_PORT=_free_port())
    result = _run(project / "scripts" / "run_8p.sh", *SMOKE, env=env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(list((project / "output" / "logs").rglob("stdout.log"))) == 2


@pytest.mark.slow
def test_run_1p_trains_on_cpu(render_project: RenderProject) -> None:
    project = render_project(target="cuda", devices_per_node=8)
    env = _env(PYTHON=sys.executable)
    result = _run(project / "scripts" / "run_1p.sh", *SMOKE, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert list((project / "output").glob("*.pt"))


# --- failures and signals ----------------------------------------------------------


def _assert_all_gone(token: str) -> None:
    deadline = time.monotonic() + 2
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(token) == [], "a rank was left running"


def test_a_failed_rank_stops_the_others(ascend: Path, tmp_path: Path) -> None:
    fake = _fake_python(
        tmp_path / "fake_rank.py",
        "print('rank', os.environ['RANK'], flush=True)\n"
        "if os.environ['RANK'] == '1':\n"
        "    print('boom', file=sys.stderr)\n"
        "    sys.exit(1)\n"
        "time.sleep(60)\n",
    )
    started = time.monotonic()
    result = _run(
        ascend / "scripts" / "run_8p.sh", "--nproc", "4", env=_env(PYTHON=str(fake)), timeout=30
    )
    assert time.monotonic() - started < 10
    assert result.returncode == 1
    log = ascend / "output" / "logs" / "rank_1" / "train.log"
    assert "error: rank 1 (pid" in result.stderr
    assert str(log) in result.stderr and "    boom" in result.stderr
    _assert_all_gone(str(fake))


def test_a_rank_that_ignores_sigterm_is_killed(ascend: Path, tmp_path: Path) -> None:
    # Rank 0 ignores SIGTERM and has a child of its own: both must go.
    fake = _fake_python(
        tmp_path / "stubborn_rank.py",
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "if sys.argv[1:] == ['child']:\n"
        "    time.sleep(60)\n"
        "if os.environ['RANK'] == '1':\n"
        "    time.sleep(0.5)\n"
        "    sys.exit(3)\n"
        "subprocess.Popen([sys.executable, __file__, 'child'])\n"
        "time.sleep(60)\n",
    )
    env = _env(PYTHON=str(fake), RANK_STOP_TIMEOUT="1")
    started = time.monotonic()
    result = _run(ascend / "scripts" / "run_8p.sh", "--nproc", "2", env=env, timeout=30)
    assert time.monotonic() - started < 10
    assert result.returncode == 1
    assert "rank 1 (pid" in result.stderr and "exited with status 3" in result.stderr
    _assert_all_gone(str(fake))


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_every_rank(
    ascend: Path, tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    fake = _fake_python(tmp_path / "sleepy_rank.py", "time.sleep(60)\n")
    launcher = subprocess.Popen(
        [str(ascend / "scripts" / "run_8p.sh"), "--nproc", "3"],
        env=_env(PYTHON=str(fake)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 15
        while len(_processes_with(str(fake))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_processes_with(str(fake))) == 3
        launcher.send_signal(sig)
        _, stderr = launcher.communicate(timeout=15)
    finally:
        launcher.kill()
    assert launcher.returncode == status
    assert "stopping every rank" in stderr
    _assert_all_gone(str(fake))


# --- MindSpore: run_8p.sh in rank-table mode ---------------------------------------


@pytest.fixture
def ms_ascend(render_project: RenderProject) -> Path:
    return render_project(framework="mindspore", target="ascend", devices_per_node=8)


def _ms_ranks(stdout: str) -> list[tuple[str, int, int, int]]:
    return [
        (f, int(size), int(rank), int(dev)) for f, size, rank, dev in MS_RANK_LINE.findall(stdout)
    ]


def _write_table(path: Path, devices: int, nodes: int = 1) -> Path:
    path.write_text(ranktable.example(devices, nodes).dumps())
    return path


def test_ms_rank_table_dry_run_prints_every_rank(ms_ascend: Path) -> None:
    result = _run(ms_ascend / "scripts" / "run_8p.sh", "--dry-run")
    assert result.returncode == 0, result.stderr
    table = str(ms_ascend / "rank_table_8p.json")
    assert _ms_ranks(result.stdout) == [(table, 8, r, r) for r in range(8)]
    assert result.stdout.startswith(
        "# per-rank (rank table): 8 processes on node 0 of 1, rank size 8\n"
        f"# {table}: rank table 1.0: 1 server(s), 8 rank(s)"
    )
    for rank in range(8):
        rank_dir = ms_ascend / "output" / "logs" / f"rank_{rank}"
        # Each rank runs in its own directory, train.py named by its absolute path.
        assert f"# rank {rank}, log {rank_dir}/train.log\ncd {rank_dir}\n" in result.stdout
    assert f"python3 {ms_ascend}/train.py --data_url {ms_ascend}/data " in result.stdout
    assert not (ms_ascend / "output").exists(), "a dry run creates nothing"


def test_ms_rank_table_dry_run_on_the_second_node(ms_ascend: Path, tmp_path: Path) -> None:
    _write_table(tmp_path / "table16.json", 8, 2)
    # A relative table is read from the caller's directory and passed on absolute.
    result = _run(
        ms_ascend / "scripts" / "run_8p.sh",
        *"--dry-run --nnodes 2 --node-rank 1 --rank-table table16.json".split(),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    table = str(tmp_path / "table16.json")
    assert _ms_ranks(result.stdout) == [(table, 16, 8 + r, r) for r in range(8)]
    # RANK_TABLE_FILE does the same; the flag beats it.
    env = _env(RANK_TABLE_FILE="table16.json", NNODES="2")
    from_env = _run(ms_ascend / "scripts" / "run_8p.sh", "--dry-run", env=env, cwd=tmp_path)
    assert _ms_ranks(from_env.stdout)[0] == (table, 16, 0, 0)


def _duplicate_device_ip(path: Path) -> Path:
    data = ranktable.example(8).to_dict()
    devices = data["server_list"][0]["device"]  # type: ignore[index]
    devices[1]["device_ip"] = devices[0]["device_ip"]
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("table", "args", "message"),
    [
        (
            "duplicate.json",
            [],
            "is invalid, no rank was started:\n"
            "    server_list[0].device[1].device_ip: 10.100.0.1 is also used by "
            "server_list[0].device[0]\n",
        ),
        (
            "table8.json",
            ["--nnodes", "2"],
            "has 8 ranks, but this job has 16 (--nnodes 2 x --nproc 8)",
        ),
        (
            "table8.json",
            ["--nproc", "4"],
            "has 8 ranks, but this job has 4 (--nnodes 1 x --nproc 4)",
        ),
        ("missing.json", [], "not found: pass --rank-table FILE or set RANK_TABLE_FILE"),
    ],
)
def test_ms_a_bad_rank_table_stops_before_any_rank(
    ms_ascend: Path, tmp_path: Path, table: str, args: list[str], message: str
) -> None:
    _duplicate_device_ip(tmp_path / "duplicate.json")
    _write_table(tmp_path / "table8.json", 8)
    started = tmp_path / "started"
    fake = _fake_python(tmp_path / "fake.py", f"open({str(started)!r}, 'a').close()\n")
    result = _run(
        ms_ascend / "scripts" / "run_8p.sh",
        "--rank-table",
        str(tmp_path / table),
        *args,
        env=_env(PYTHON=str(fake)),
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: rank table {tmp_path / table} ")
    assert message in result.stderr
    assert result.stderr.count("error:") == 1, "one message, no usage"
    assert not started.exists() and not (ms_ascend / "output").exists()


def test_ms_ranks_run_in_their_own_directories(
    render_project: RenderProject, tmp_path: Path
) -> None:
    project = render_project(framework="mindspore", target="ascend", devices_per_node=2)
    seen = tmp_path / "seen"
    seen.mkdir()
    fake = _fake_python(
        tmp_path / "fake.py",
        "names = 'RANK_TABLE_FILE RANK_SIZE RANK_ID DEVICE_ID'.split()\n"
        f"with open(os.path.join({str(seen)!r}, os.environ['RANK_ID']), 'w') as out:\n"
        "    out.write(repr((os.getcwd(), sys.argv, [os.environ[n] for n in names])))\n"
        "print('rank', os.environ['RANK_ID'], 'done', flush=True)\n",
    )
    data = tmp_path / "my data"
    result = _run(
        project / "scripts" / "run_8p.sh",
        *("--data", str(data), "--", "--flag", "a b"),
        env=_env(PYTHON=str(fake)),
    )
    assert result.returncode == 0, result.stderr
    assert "all 2 ranks finished" in result.stdout
    assert "rank 0 done" in result.stdout, "local rank 0 is shown on the console"
    table = str(project / "rank_table_8p.json")
    for rank in (0, 1):
        rank_dir = project / "output" / "logs" / f"rank_{rank}"
        cwd, argv, env = ast.literal_eval((seen / str(rank)).read_text())
        assert cwd == str(rank_dir)
        # train.py by its absolute path, since the rank runs elsewhere.
        assert argv[1:] == [
            str(project / "train.py"),
            *("--data_url", str(data), "--train_url", str(project / "output")),
            *("--flag", "a b"),
        ]
        assert env == [table, "2", str(rank), str(rank)]
        assert (rank_dir / "train.log").read_text().startswith(f"rank {rank} done")


def test_ms_a_failed_rank_stops_the_others(ms_ascend: Path, tmp_path: Path) -> None:
    fake = _fake_python(
        tmp_path / "fake_rank.py",
        "if os.environ['RANK_ID'] == '1':\n"
        "    print('boom', file=sys.stderr)\n"
        "    sys.exit(1)\n"
        "time.sleep(60)\n",
    )
    table = _write_table(tmp_path / "table4.json", 4)
    started = time.monotonic()
    result = _run(
        ms_ascend / "scripts" / "run_8p.sh",
        *("--nproc", "4", "--rank-table", str(table)),
        env=_env(PYTHON=str(fake)),
        timeout=30,
    )
    assert time.monotonic() - started < 10
    assert result.returncode == 1
    log = ms_ascend / "output" / "logs" / "rank_1" / "train.log"
    assert "error: rank 1 (pid" in result.stderr and "the other ranks were stopped" in result.stderr
    assert str(log) in result.stderr and "    boom" in result.stderr
    _assert_all_gone(str(fake))


def _core_list(cores: list[int]) -> str:
    """taskset's form of a list of cores: 0-3,8."""
    ranges: list[list[int]] = []
    for core in cores:
        if ranges and core == ranges[-1][1] + 1:
            ranges[-1][1] = core
        else:
            ranges.append([core, core])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def test_ms_bind_cores(render_project: RenderProject) -> None:
    project = render_project(framework="mindspore", target="ascend", devices_per_node=1)
    script = project / "scripts" / "run_8p.sh"
    result = _run(script, "--dry-run", "--bind-cores")
    assert result.returncode == 0, result.stderr
    if shutil.which("taskset"):
        cores = _core_list(sorted(os.sched_getaffinity(0)))
        assert f" DEVICE_ID=0 taskset -c {cores} python3 {project}/train.py " in result.stdout
    else:
        assert "no taskset here; --bind-cores is ignored" in result.stderr
    assert "taskset" not in _run(script, "--dry-run").stdout


def test_ms_both_picks_a_launcher(render_project: RenderProject) -> None:
    script = (
        render_project(framework="mindspore", target="both", devices_per_node=2)
        / "scripts"
        / "run_8p.sh"
    )
    auto = _run(script, "--dry-run").stdout
    expected = "# per-rank (rank table):" if Path("/dev/davinci0").exists() else "# msrun:"
    assert auto.startswith(expected)
    per_rank = _run(script, "--dry-run", "--launcher", "per-rank").stdout
    assert per_rank.startswith("# per-rank (rank table):")
    assert _run(script, "--dry-run", env=_env(LAUNCHER="msrun")).stdout.startswith("# msrun:")
    bad = _run(script, "--launcher", "torchrun", "--dry-run")
    assert bad.returncode == 2
    assert "--launcher must be msrun, per-rank or auto, not 'torchrun'" in bad.stderr


# --- MindSpore: msrun -------------------------------------------------------------


def test_msrun_dry_run(render_project: RenderProject) -> None:
    project = render_project(framework="mindspore", target="cuda", devices_per_node=4, nnodes=2)
    env = _env(PYTHON=sys.executable)
    result = _run(
        project / "scripts" / "run_msrun.sh",
        "--dry-run",
        "--node-rank",
        "1",
        "--",
        "--smoke",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    logs = project / "output" / "logs"
    assert result.stdout.startswith(
        "# msrun: 4 workers on node 1 (ranks 4-7) of 8 in all; scheduler at 127.0.0.1:8118; "
        f"logs under {logs}\n"
    )
    # (rank, RANK_ID, DEVICE_ID, RANK_SIZE): msrun numbers ranks from node-rank x local workers.
    assert [tuple(map(int, m)) for m in MSRUN_RANK_LINE.findall(result.stdout)] == [
        (4 + r, 4 + r, r, 8) for r in range(4)
    ]
    assert f"log {logs}/worker_5.log\n" in result.stdout
    command = shlex.split(result.stdout.splitlines()[-1])
    assert command == [
        f"PATH={logs}/.msrun_python:$PATH",
        sys.executable,
        str(BIN / "msrun"),  # found next to the interpreter
        *"--worker_num 8 --local_worker_num 4 --node_rank 1".split(),
        *f"--master_addr 127.0.0.1 --master_port 8118 --log_dir {logs} --join True".split(),
        *f"train.py --data_url {project}/data --train_url {project}/output --smoke".split(),
    ]
    assert not (project / "output").exists(), "a dry run creates nothing"


def test_run_8p_hands_cuda_jobs_to_msrun(render_project: RenderProject) -> None:
    project = render_project(framework="mindspore", target="cuda", devices_per_node=2)
    env = _env(PYTHON=sys.executable, MASTER_PORT="23456")
    result = _run(project / "scripts" / "run_8p.sh", "--dry-run", "--nnodes", "2", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# msrun: 2 workers on node 0 (ranks 0-1) of 4 in all; ")
    assert "--worker_num 4 --local_worker_num 2 --node_rank 0" in result.stdout
    assert "--master_port 23456 " in result.stdout


def test_msrun_not_found(render_project: RenderProject, tmp_path: Path) -> None:
    project = render_project(framework="mindspore", target="cuda", devices_per_node=2)
    # An interpreter without MindSpore: its scripts directories hold no msrun, nor does PATH.
    empty = tmp_path / "bin"
    empty.mkdir()
    bare = tmp_path / "bare_python"
    bare.write_text(f"#!{sys.executable}\nprint({str(empty)!r})\nprint({str(empty)!r})\n")
    bare.chmod(0o755)
    path = "/usr/bin:/bin"
    assert shutil.which("msrun", path=path) is None
    result = _run(project / "scripts" / "run_msrun.sh", env=_env(PYTHON=str(bare), PATH=path))
    assert result.returncode == 1
    assert f"error: no msrun found for {bare}, next to it or on PATH" in result.stderr
    assert "MindSpore 2.3 or later" in result.stderr
    dry = _run(
        project / "scripts" / "run_msrun.sh", "--dry-run", env=_env(PYTHON=str(bare), PATH=path)
    )
    assert dry.returncode == 0
    assert "# no msrun found for" in dry.stdout and ':"$PATH" msrun --worker_num 2 ' in dry.stdout


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        ("run_msrun.sh", ["--bogus"], "unknown argument: --bogus"),
        ("run_msrun.sh", ["--worker-num", "0"], "--worker-num must be a whole number from 1"),
        ("run_msrun.sh", ["--local-worker-num"], "--local-worker-num needs a value"),
        (
            "run_msrun.sh",
            ["--worker-num", "8", "--local-worker-num", "8", "--node-rank", "1"],
            "--node-rank 1 with --local-worker-num 8 needs ranks up to 15, but --worker-num is 8",
        ),
        ("run_msrun.sh", ["--master-port", "80"], "--master-port must be a TCP port from 1024"),
        ("run_msrun.sh", ["--join", "maybe"], "--join must be true or false, not 'maybe'"),
        ("run_8p.sh", ["--master-addr", "x"], "unknown argument: --master-addr"),
        ("run_8p.sh", ["--rank-table"], "--rank-table needs a value"),
    ],
)
def test_ms_bad_arguments_print_usage_and_exit_2(
    ms_ascend: Path, script: str, args: list[str], message: str
) -> None:
    result = _run(ms_ascend / "scripts" / script, "--dry-run", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"error: {message}" in result.stderr
    assert f"usage: scripts/{script}" in result.stderr


@pytest.mark.slow
def test_msrun_trains_two_workers_on_cpu(render_project: RenderProject) -> None:
    project = render_project(framework="mindspore", target="cuda", devices_per_node=2)
    env = _env(PYTHON=sys.executable, MASTER_PORT=_free_port())
    result = _run(
        project / "scripts" / "run_msrun.sh",
        *("--worker-num", "2", "--local-worker-num", "2"),
        *SMOKE,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 2 workers of this node finished" in result.stdout
    logs = project / "output" / "logs"
    assert (logs / "scheduler.log").is_file()
    assert "test accuracy" in (logs / "worker_0.log").read_text()
    assert (logs / "worker_1.log").is_file()
    # msrun's scheduler and workers all ran train.py with this project's paths.
    _assert_all_gone(str(project / "data"))


# --- env.sh ----------------------------------------------------------------------

STRICT = 'set -euo pipefail; . ./env.sh; echo "sourced flags=$- $(shopt -o pipefail)"; '


def test_env_sh_without_cuda_or_cann(render_project: RenderProject, tmp_path: Path) -> None:
    project = render_project(target="both")
    result = _bash(
        project,
        STRICT + 'echo "$NCCL_DEBUG $HCCL_CONNECT_TIMEOUT $HCCL_EXEC_TIMEOUT"',
        ASCEND_HOME=str(tmp_path / "nothing"),
    )
    assert result.returncode == 0, result.stderr
    flags, values = result.stdout.splitlines()
    assert re.fullmatch(r"sourced flags=\S*e\S*u\S* pipefail\s+on", flags), (
        "the caller's strict mode stays"
    )
    connect, execute = map(int, values.split()[1:])
    assert values.startswith("WARN ")
    assert 120 <= connect <= 7200 and 0 <= execute <= 17340, "inside CANN's documented ranges"
    assert f"no CANN found under ASCEND_HOME={tmp_path}/nothing" in result.stderr
    if not Path("/proc/driver/nvidia/version").exists():
        assert "no NVIDIA driver found" in result.stderr


def test_env_sh_keeps_the_callers_values(render_project: RenderProject) -> None:
    project = render_project(target="both")
    result = _bash(
        project,
        '. ./env.sh 2>/dev/null; echo "$NCCL_DEBUG $HCCL_EXEC_TIMEOUT $-"',
        NCCL_DEBUG="INFO",
        HCCL_EXEC_TIMEOUT="600",
    )
    assert result.returncode == 0
    words = result.stdout.split()
    assert words[:2] == ["INFO", "600"]
    assert "e" not in words[2] and "u" not in words[2], "a lax caller is not made strict"


def _fake_cann(root: Path, package: str, marker: str) -> Path:
    # Like CANN's own: reads an unset variable and ends in a failing command.
    script = root / package / "set_env.sh"
    script.parent.mkdir(parents=True)
    script.write_text(
        f'export CANN_MARKER={marker}\necho "$SURELY_UNSET_VARIABLE" >/dev/null\nfalse\n'
    )
    return root


def test_env_sh_sources_the_toolkit_under_ascend_home(
    render_project: RenderProject, tmp_path: Path
) -> None:
    project = render_project(target="ascend")
    home = _fake_cann(tmp_path / "Ascend", "ascend-toolkit", "toolkit")
    _fake_cann(home, "nnae", "nnae")
    result = _bash(project, STRICT + 'echo "$CANN_MARKER"', ASCEND_HOME=str(home))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == "toolkit"
    assert "no CANN found" not in result.stderr


def test_env_sh_reads_the_install_info(render_project: RenderProject, tmp_path: Path) -> None:
    project = render_project(target="ascend")
    home = _fake_cann(tmp_path / "cann root", "nnae", "nnae")
    info = tmp_path / "ascend_cann_install.info"
    info.write_text(f"Install_Path={home}\n")
    result = _bash(
        project, STRICT + 'echo "$CANN_MARKER|$ASCEND_HOME"', ASCEND_INSTALL_INFO=str(info)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == f"nnae|{home}"


def test_env_sh_refuses_to_run(render_project: RenderProject) -> None:
    project = render_project(target="cuda")
    result = subprocess.run(["bash", str(project / "env.sh")], capture_output=True, text=True)
    assert result.returncode == 2
    assert "source this file" in result.stderr
