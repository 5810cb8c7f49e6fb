"""A ModelArts job's rank table, as ModelArts gives it: RANK_TABLE_FILE is the directory that
holds jobstart_hccl.json (its group_list form, the hosts' addresses as server_id), read once it
says "completed". This node is found as ModelArts' own launcher finds it (its pod name, then
MA_CURRENT_HOST_IP), not by the container's address (MA_CURRENT_IP), which is not the host's.
"""

from __future__ import annotations

import json
import runpy
import threading
import time
from pathlib import Path

import pytest

from tests.template.launchers import rank_table
from tests.template.test_launch_ranktable import ranks
from tests.template.test_modelarts_env import dry_run

JOB = "modelarts-job-7c8d9e0f"
HOSTS = ("192.168.77.25", "192.168.77.26")  # the table's server_ids: the hosts' addresses
# Node 1 of 2 nodes x 4 NPUs: its container's address is not its host's.
NODE_1 = {
    "MA_VJ_NAME": JOB,
    "MA_NUM_HOSTS": "2",
    "VC_WORKER_NUM": "2",
    "VC_TASK_INDEX": "1",
    "MA_NUM_GPUS": "4",
    "VC_WORKER_HOSTS": f"{JOB}-worker-0.{JOB},{JOB}-worker-1.{JOB}",
    "MA_CURRENT_IP": "172.16.3.7",
    "MA_CURRENT_HOST_IP": HOSTS[1],
}
# Node 1's ranks: (RANK_SIZE, RANK_ID, DEVICE_ID), on NPUs 4-7 of its host.
NODE_1_RANKS = [(8, 4 + i, 4 + i) for i in range(4)]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PyTorch project for 2 nodes x 4 Ascend NPUs, rendered once for this module."""
    from generator.render.options import Options
    from generator.render.project import render

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        patch.delenv("COOKIECUTTER_CONFIG", raising=False)
        options = Options(
            "demo", target="ascend", platform="modelarts", devices_per_node=4, nnodes=2
        )
        return render(options, tmp_path_factory.mktemp("modelarts"))


def jobstart_hccl(status: str = "completed") -> str:
    """ModelArts' jobstart_hccl.json (the group_list form of docker-modelarts-0092's example):
    one instance a pod, named by the pod, on its host's address; node 0 on NPUs 0-3, node 1 on
    NPUs 4-7 of theirs."""
    instances = [
        {
            "pod_name": f"{JOB}-worker-{n}",
            "server_id": host,
            "devices": [
                {"device_id": str(4 * n + d), "device_ip": f"10.{n}.0.{d}"} for d in range(4)
            ],
        }
        for n, host in enumerate(HOSTS)
    ]
    group = {"group_name": "job", "device_count": "8", "instance_count": "2"}
    group["instance_list"] = instances  # type: ignore[assignment]
    return json.dumps({"status": status, "group_count": "1", "group_list": [group]})


def config_dir(tmp_path: Path, status: str = "completed") -> Path:
    """/user/config as ModelArts mounts it: the directory RANK_TABLE_FILE names."""
    directory = tmp_path / "config"
    directory.mkdir()
    (directory / "jobstart_hccl.json").write_text(jobstart_hccl(status))
    return directory


def test_the_hosts_address_finds_the_node_in_the_table_the_directory_holds(
    project: Path, tmp_path: Path
) -> None:
    directory = config_dir(tmp_path)
    result = dry_run(project, **NODE_1, RANK_TABLE_FILE=str(directory))
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == NODE_1_RANKS
    assert result.stdout.startswith("# per-rank: 4 processes on node 1, rank size 8, rank table ")
    # The ranks get a table file (the launcher's conversion of it), never the directory.
    assert f"RANK_TABLE_FILE={directory} " not in result.stdout
    assert result.stderr == ""


def test_the_pod_name_comes_first_then_the_containers_address(
    project: Path, tmp_path: Path
) -> None:
    directory = str(config_dir(tmp_path))
    by_pod = NODE_1 | {"MA_CURRENT_HOST_IP": "", "MA_CURRENT_INSTANCE_NAME": f"{JOB}-worker-1"}
    result = dry_run(project, **by_pod, RANK_TABLE_FILE=directory)
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == NODE_1_RANKS
    # Older (v1) jobs name the pod BATCH_TASK_CURRENT_INSTANCE, which ModelArts' launcher
    # reads first (davincirunsdk common.py, ModelArts.get_current_instance_name).
    older = NODE_1 | {"MA_CURRENT_HOST_IP": "", "BATCH_TASK_CURRENT_INSTANCE": f"{JOB}-worker-1"}
    result = dry_run(
        project, **older, MA_CURRENT_INSTANCE_NAME=f"{JOB}-worker-0", RANK_TABLE_FILE=directory
    )
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == NODE_1_RANKS
    # A table whose servers are the containers (hostNetwork off, listed by pod address).
    by_container = NODE_1 | {"MA_CURRENT_HOST_IP": ""}
    path = rank_table(
        tmp_path / "pods.json", [("172.16.3.6", [0, 1, 2, 3]), ("172.16.3.7", [4, 5, 6, 7])]
    )
    result = dry_run(project, **by_container, RANK_TABLE_FILE=str(path))
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == NODE_1_RANKS


def test_a_table_file_is_read_as_it_is(project: Path, tmp_path: Path) -> None:
    path = rank_table(tmp_path / "hccl.json", [(HOSTS[0], [0, 1, 2, 3]), (HOSTS[1], [4, 5, 6, 7])])
    result = dry_run(project, **NODE_1, RANK_TABLE_FILE=str(path))
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == NODE_1_RANKS
    assert f"RANK_TABLE_FILE={path} " in result.stdout


def test_a_table_the_directory_does_not_hold_yet_is_waited_for(
    project: Path, tmp_path: Path
) -> None:
    directory = tmp_path / "config"
    directory.mkdir()
    table = directory / "jobstart_hccl.json"
    threading.Timer(1.0, lambda: table.write_text(jobstart_hccl("initializing"))).start()
    threading.Timer(2.5, lambda: table.write_text(jobstart_hccl())).start()
    began = time.monotonic()
    result = dry_run(project, **NODE_1, RANK_TABLE_FILE=str(directory))
    assert result.returncode == 0, result.stderr
    assert 2.0 < time.monotonic() - began < 30
    assert f"waiting for {table}: status " in result.stderr
    assert ranks(result.stdout) == NODE_1_RANKS


def test_a_table_never_completed_is_one_line_within_the_join_timeout(
    project: Path, tmp_path: Path
) -> None:
    directory = config_dir(tmp_path, "initializing")
    began = time.monotonic()
    result = dry_run(project, "--join-timeout", "2", **NODE_1, RANK_TABLE_FILE=str(directory))
    assert time.monotonic() - began < 15
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        f"error: ModelArts job {JOB}: the rank table {directory}/jobstart_hccl.json still says"
        " initializing after 2 s: ModelArts did not finish it in time (--join-timeout sets the"
        " wait)"
    )


def test_a_node_the_table_does_not_list_is_one_line(project: Path, tmp_path: Path) -> None:
    directory = config_dir(tmp_path)
    elsewhere = NODE_1 | {"MA_CURRENT_HOST_IP": "192.168.77.99"}
    result = dry_run(project, **elsewhere, RANK_TABLE_FILE=str(directory))
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"error: ModelArts job {JOB}: none of the rank table's servers ({', '.join(HOSTS)}) is"
        " this node (MA_CURRENT_HOST_IP=192.168.77.99; MA_CURRENT_IP=172.16.3.7"
    )
    assert line.endswith("): pass --node-rank N")
    # --node-rank says it instead.
    given = dry_run(project, "--node-rank", "1", **elsewhere, RANK_TABLE_FILE=str(directory))
    assert given.returncode == 0, given.stderr
    assert ranks(given.stdout) == NODE_1_RANKS


def test_the_tables_variables_are_in_the_readme_with_their_source(project: Path) -> None:
    table = runpy.run_path(str(project / "scripts" / "modelarts.py"))["TABLE_VARIABLES"]
    readme = (project / "README.md").read_text()
    assert {name for name, _, _ in table} == {
        "RANK_TABLE_FILE",
        "BATCH_TASK_CURRENT_INSTANCE",
        "MA_CURRENT_INSTANCE_NAME",
        "MA_CURRENT_HOST_IP",
    }
    for name, meaning, source in table:
        assert f"`{name}`" in readme, name
        assert meaning and source
