"""A ModelArts job's variables, read by scripts/run_8p.sh (scripts/modelarts.py): where
MA_VJ_NAME is set the job's shape comes from them, options given win, and an environment
the job cannot run with is one line and nothing started."""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path

import pytest

from tests.template.launchers import env, run

JOB = "modelarts-job-5e6f7a8b"
WORKERS = f"{JOB}-worker-0.{JOB},{JOB}-worker-1.{JOB}"
# Node 1 of a 2-node job with 4 devices a node.
NODE_1 = {
    "MA_VJ_NAME": JOB,
    "MA_NUM_HOSTS": "2",
    "VC_WORKER_NUM": "2",
    "VC_TASK_INDEX": "1",
    "MA_NUM_GPUS": "4",
    "VC_WORKER_HOSTS": WORKERS,
    "MA_CURRENT_IP": "10.0.0.2",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PyTorch project for 4 GPUs a node (torchrun), rendered once for this module."""
    from generator.render.options import Options
    from generator.render.project import render

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        patch.delenv("COOKIECUTTER_CONFIG", raising=False)
        options = Options("demo", target="cuda", platform="modelarts", devices_per_node=4)
        return render(options, tmp_path_factory.mktemp("modelarts"))


def dry_run(project: Path, *args: str, **variables: str):
    return run(
        project / "scripts" / "run_8p.sh",
        "--dry-run",
        *args,
        environ=env(PYTHON=sys.executable, **variables),
    )


def torchrun_words(stdout: str) -> list[str]:
    return next(line for line in stdout.splitlines() if "torch.distributed.run" in line).split()


def value(words: list[str], option: str) -> str:
    return words[words.index(option) + 1]


def test_the_job_says_nodes_rank_processes_and_master(project: Path) -> None:
    result = dry_run(project, **NODE_1)
    assert result.returncode == 0, result.stderr
    words = torchrun_words(result.stdout)
    assert value(words, "--nnodes") == "2" and value(words, "--node_rank") == "1"
    assert value(words, "--nproc_per_node") == "4"
    # A dry run shows the master by name; a run resolves it.
    assert value(words, "--master_addr") == f"{JOB}-worker-0.{JOB}"
    assert result.stderr == ""


def test_without_ma_vj_name_the_variables_are_not_read(project: Path) -> None:
    variables = {k: v for k, v in NODE_1.items() if k != "MA_VJ_NAME"}
    words = torchrun_words(dry_run(project, **variables).stdout)
    assert value(words, "--nnodes") == "1" and value(words, "--node_rank") == "0"
    # ... unless the command asks for them.
    words = torchrun_words(dry_run(project, "--cluster", "modelarts", **variables).stdout)
    assert value(words, "--nnodes") == "2" and value(words, "--node_rank") == "1"


def test_options_given_win_and_the_appended_arguments_reach_train_py(project: Path) -> None:
    result = dry_run(
        project,
        "--nproc",
        "2",
        "--master-addr",
        "10.0.0.1",
        "--data_url=/home/ma-user/modelarts/inputs/data_url_0/",
        "--epoch_size=3",
        **NODE_1,
    )
    assert result.returncode == 0, result.stderr
    words = torchrun_words(result.stdout)
    assert value(words, "--nproc_per_node") == "2" and value(words, "--master_addr") == "10.0.0.1"
    train = words[words.index("train.py") :]
    assert train[-2:] == ["--data_url=/home/ma-user/modelarts/inputs/data_url_0/", "--epoch_size=3"]


def test_a_device_count_unlike_the_projects_is_one_line_saying_which_wins(project: Path) -> None:
    result = dry_run(project, **(NODE_1 | {"MA_NUM_GPUS": "8"}))
    assert result.returncode == 0, result.stderr
    assert value(torchrun_words(result.stdout), "--nproc_per_node") == "8"
    assert result.stderr.splitlines() == [
        "note: ModelArts gives this node 8 devices (MA_NUM_GPUS), the project was made for 4:"
        " starting 8 processes per node (--nproc 4 starts 4)"
    ]


BAD = {
    "index-outside": (
        {"VC_TASK_INDEX": "2"},
        (),
        "VC_TASK_INDEX=2 is outside the job's 2 nodes (0 to 1)",
    ),
    "no-gpus": (
        {"MA_NUM_GPUS": ""},
        (),
        "MA_NUM_GPUS is not set: give --nproc, the processes to start on each node",
    ),
    "cpu-only": (
        {"MA_NUM_GPUS": "0"},
        (),
        "MA_NUM_GPUS is 0 (no accelerators): give --nproc",
    ),
    "more-than-the-node-has": (
        {},
        ("--nproc", "8"),
        "--nproc 8 is more than the 4 devices ModelArts gives this node (MA_NUM_GPUS)",
    ),
    "node-counts-disagree": (
        {"VC_WORKER_NUM": "3"},
        (),
        "MA_NUM_HOSTS=2 and VC_WORKER_NUM=3 disagree",
    ),
    "no-hosts": (
        {"VC_WORKER_HOSTS": ""},
        (),
        "VC_WORKER_HOSTS is not set: 2 nodes cannot find node 0",
    ),
    "not-a-number": (
        {"MA_NUM_HOSTS": "two"},
        (),
        "MA_NUM_HOSTS='two' is not a whole number from 1",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_an_environment_the_job_cannot_run_with_is_one_line(project: Path, case: str) -> None:
    variables, args, message = BAD[case]
    result = dry_run(project, *args, **(NODE_1 | variables))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: ModelArts job {JOB}: {message}")


def test_a_master_that_does_not_resolve_fails_within_the_join_timeout(project: Path) -> None:
    variables = NODE_1 | {"VC_WORKER_HOSTS": f"{JOB}-worker-0.invalid,{JOB}-worker-1.invalid"}
    began = time.monotonic()
    result = run(
        project / "scripts" / "run_8p.sh",
        "--join-timeout",
        "2",
        environ=env(PYTHON=sys.executable, **variables),
    )
    assert time.monotonic() - began < 15
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"error: ModelArts job {JOB}: the master {JOB}-worker-0.invalid (first of"
        " VC_WORKER_HOSTS) did not resolve within --join-timeout 2 s: "
    )
    assert not (project / "output").exists(), "nothing started"


def test_every_variable_read_is_in_the_readme_with_its_source(project: Path) -> None:
    table = runpy.run_path(str(project / "scripts" / "modelarts.py"))["VARIABLES"]
    readme = (project / "README.md").read_text()
    done_when = (
        "set the command to `bash /app/scripts/run_8p.sh`; nodes, ranks and the master come from"
    )
    assert done_when in readme
    for name, meaning, source in table:
        assert f"`{name}`" in readme, name
        assert meaning and source
    assert {name for name, _, _ in table} == {
        "MA_VJ_NAME",
        "MA_NUM_HOSTS",
        "VC_WORKER_NUM",
        "VC_TASK_INDEX",
        "MA_NUM_GPUS",
        "VC_WORKER_HOSTS",
        "MA_CURRENT_IP",
    }
