"""The per-rank launcher reads ranks and devices from the rank table: this node's entry by
--node-rank or by its address, checked before any rank starts; tables an operator is still
writing are waited for; every table format HCCL and the platforms use is accepted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from generator.shipped.ranktable import tables as ranktable
from tests.conftest import RenderProject
from tests.template.launchers import env, fake_python, rank_table, run, this_host

RANK_LINE = re.compile(
    r"^RANK_TABLE_FILE=(\S+) RANK_SIZE=(\d+) RANK_ID=(\d+) DEVICE_ID=(\d+) ", re.M
)


def ranks(stdout: str) -> list[tuple[int, int, int]]:
    """(RANK_SIZE, RANK_ID, DEVICE_ID) of every rank a dry run prints."""
    return [(int(s), int(r), int(d)) for _, s, r, d in RANK_LINE.findall(stdout)]


table = rank_table


@pytest.fixture
def ms_ascend(render_project: RenderProject) -> Path:
    return render_project(framework="mindspore", target="ascend", devices_per_node=4)


def dry_run(project: Path, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    return run(
        project / "scripts" / "run_8p.sh",
        "--dry-run",
        *args,
        environ=env(PYTHON=sys.executable, **variables),
    )


def test_this_nodes_entry_is_found_by_its_address(ms_ascend: Path, tmp_path: Path) -> None:
    # A 2-server table given in reverse order: this host is the first entry, node "1" elsewhere.
    path = table(tmp_path / "t.json", [(this_host(), [0, 1, 2, 3]), ("10.250.0.9", [0, 1, 2, 3])])
    found = dry_run(ms_ascend, "--rank-table", str(path))
    assert found.returncode == 0, found.stderr
    assert ranks(found.stdout) == [(8, r, r) for r in range(4)]
    # --node-rank picks the entry by its index instead.
    assert ranks(dry_run(ms_ascend, "--rank-table", str(path), "--node-rank", "1").stdout) == [
        (8, 4 + r, r) for r in range(4)
    ]


def test_a_pod_finds_its_entry_by_its_hosts_address(ms_ascend: Path, tmp_path: Path) -> None:
    # In a pod, the table lists the hosts; the operator passes the host's as XDL_IP.
    path = table(tmp_path / "t.json", [("10.250.0.8", [0, 1, 2, 3]), ("10.250.0.9", [0, 1, 2, 3])])
    result = dry_run(ms_ascend, "--rank-table", str(path), XDL_IP="10.250.0.9")
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == [(8, 4 + r, r) for r in range(4)]


@pytest.mark.parametrize(
    ("servers", "args", "message"),
    [
        (
            [("10.250.0.8", [0, 1, 2, 3]), ("10.250.0.9", [0, 1, 2, 3])],
            [],
            "none of the table's servers (10.250.0.8, 10.250.0.9) is this host",
        ),
        (
            [("10.250.0.8", [0, 1])],
            ["--node-rank", "0"],
            "has 2 device(s) in the table, but --nproc is 4",
        ),
        ([("10.250.0.8", [0, 1, 2, 3])], ["--node-rank", "3"], "--node-rank 3: the table numbers"),
    ],
)
def test_a_table_that_does_not_fit_this_node_stops_before_any_rank(
    ms_ascend: Path, tmp_path: Path, servers, args: list[str], message: str
) -> None:
    started = tmp_path / "started"
    fake = fake_python(tmp_path / "fake.py", f"open({str(started)!r}, 'a').close()\n")
    path = table(tmp_path / "t.json", servers)
    result = run(
        ms_ascend / "scripts" / "run_8p.sh",
        "--rank-table",
        str(path),
        *args,
        environ=env(PYTHON=str(fake)),
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: rank table {path}, no rank was started: "), (
        result.stderr
    )
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    assert not started.exists() and not (ms_ascend / "output").exists()


def test_a_broken_table_names_its_first_problem(ms_ascend: Path, tmp_path: Path) -> None:
    data = ranktable.example(4).to_dict()
    data["server_list"][0]["device"][1]["device_ip"] = data["server_list"][0]["device"][0][
        "device_ip"
    ]
    (tmp_path / "t.json").write_text(json.dumps(data))
    result = dry_run(ms_ascend, "--rank-table", str(tmp_path / "t.json"), "--node-rank", "0")
    assert result.returncode == 1
    assert (
        "device[1].device_ip: 10.100.0.1 is also used by server_list[0].device[0]" in result.stderr
    )


def test_every_format_is_accepted(ms_ascend: Path, tmp_path: Path) -> None:
    group_list = {
        "status": "completed",
        "group_count": "1",
        "group_list": [
            {
                "group_name": "job",
                "instance_count": "4",
                "instance_list": [
                    {
                        "rank_id": str(r),
                        "server_id": "10.250.0.8",
                        "devices": [{"device_id": str(r + 4), "device_ip": f"10.9.0.{r}"}],
                    }
                    for r in range(4)
                ],
            }
        ],
    }
    (tmp_path / "g.json").write_text(json.dumps(group_list))
    result = dry_run(ms_ascend, "--rank-table", str(tmp_path / "g.json"), "--node-rank", "0")
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == [(4, r, r + 4) for r in range(4)]


def test_a_version_1_2_table_is_accepted(ms_ascend: Path, tmp_path: Path) -> None:
    data = json.loads(table(tmp_path / "t.json", [("10.250.0.8", [0, 1, 2, 3])]).read_text())
    for device in data["server_list"][0]["device"]:
        device["super_device_id"] = str(37748736 + int(device["device_id"]))
    pods = [{"super_pod_id": "0", "server_list": [{"server_id": "10.250.0.8"}]}]
    data |= {"version": "1.2", "super_pod_list": pods}
    (tmp_path / "a3.json").write_text(json.dumps(data))
    args = ("--rank-table", str(tmp_path / "a3.json"), "--node-rank", "0", "--chip", "910_93")
    result = dry_run(ms_ascend, *args)
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == [(4, r, r) for r in range(4)]


def test_an_a3_super_pod_table_gives_this_node_its_ranks(ms_ascend: Path, tmp_path: Path) -> None:
    """A 1.2 table of two A3 servers named as MindCluster names them (node_N, host_ip): this
    host, the second entry, is found by its host_ip and runs ranks 4-7 on the devices the
    table gives each (listed 3 to 0 here); the ranks are given the 1.2 table itself."""
    nodes = [
        ranktable.generate(
            ip,
            devices,
            [f"10.{n}.0.{d}" for d in devices],
            "910_93",
            [str(37748736 + 65536 * n + d) for d in devices],
            "0",
        )
        for n, (ip, devices) in enumerate(
            [("10.250.0.8", [0, 1, 2, 3]), (this_host(), [3, 2, 1, 0])]
        )
    ]
    data = ranktable.merge(nodes, "910_93").to_dict()
    for n, server in enumerate(data["server_list"]):
        server.update(server_id=f"node_{n}", host_ip=server["server_id"])
        data["super_pod_list"][0]["server_list"][n]["server_id"] = f"node_{n}"
    path = tmp_path / "hccl.json"
    path.write_text(json.dumps(data))
    result = dry_run(ms_ascend, "--rank-table", str(path), "--chip", "910_93")
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == [(8, 4, 3), (8, 5, 2), (8, 6, 1), (8, 7, 0)]
    assert {found[0] for found in RANK_LINE.findall(result.stdout)} == {str(path)}
    # The project's chip (910b) takes no 1.2 table: one line before any rank starts.
    refused = dry_run(ms_ascend, "--rank-table", str(path))
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert refused.stderr.rstrip().endswith(
        "version: '1.2' is the Atlas A3 super-pod table (chip 910_93); a 910b table is version "
        "'1.0'"
    )


def test_the_chip_picks_the_rules(ms_ascend: Path, tmp_path: Path) -> None:
    # Devices 3 and 4 cross the 0-3 / 4-7 groups, which only the first 910 forbids; the
    # project's chip (910b) takes them.
    path = table(tmp_path / "t.json", [("10.250.0.8", [3, 4])])
    args = ("--rank-table", str(path), "--node-rank", "0", "--nproc", "2")
    result = dry_run(ms_ascend, *args)
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == [(2, 0, 3), (2, 1, 4)]
    refused = dry_run(ms_ascend, *args, "--chip", "910")
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "devices [3, 4] cross the 0-3 / 4-7 groups; on a 910 " in refused.stderr


def test_a_table_being_written_is_waited_for(ms_ascend: Path, tmp_path: Path) -> None:
    path = tmp_path / "hccl.json"
    path.write_text('{"status": "initializing"}')
    final = ranktable.example(4).dumps()
    threading.Timer(2.0, lambda: path.write_text(final)).start()
    began = time.monotonic()
    result = dry_run(ms_ascend, "--rank-table", str(path), "--wait-table", "--node-rank", "0")
    assert result.returncode == 0, result.stderr
    assert 1.5 < time.monotonic() - began < 30
    assert "waiting for " in result.stderr and "status initializing" in result.stderr
    assert ranks(result.stdout) == [(4, r, r) for r in range(4)]


def test_a_table_never_completed_fails_within_the_join_timeout(
    ms_ascend: Path, tmp_path: Path
) -> None:
    path = tmp_path / "hccl.json"
    path.write_text('{"status": "initializing"}')
    began = time.monotonic()
    args = ("--rank-table", str(path), "--wait-table", "--join-timeout", "3")
    result = dry_run(ms_ascend, *args)
    assert result.returncode == 1
    assert time.monotonic() - began < 15
    assert result.stderr.splitlines()[-1] == (
        f"error: {path} still says initializing after 3 s: the operator did not place every pod "
        "in time (--join-timeout sets the wait)"
    )


def test_bind_cores(render_project: RenderProject) -> None:
    project = render_project(framework="mindspore", target="ascend", devices_per_node=1)
    result = dry_run(
        project,
        "--bind-cores",
        "--node-rank",
        "0",
        "--rank-table",
        str(project / "rank_table_8p.json"),
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r" ASCEND_DEVICE_ID=0 taskset -c [0-9,-]+ \S+ \S+/train.py\b", result.stdout)
    assert "taskset" not in dry_run(project, "--node-rank", "0").stdout


ASCEND_IDS = re.compile(r"DEVICE_ID=(\d+) ASCEND_DEVICE_ID=(\d+) ")


@pytest.mark.parametrize("framework", ["mindspore", "pytorch"])
@pytest.mark.parametrize(
    ("visible", "ids"),
    [
        (None, [4, 5, 6, 7]),
        ("4,5,6,7", [0, 1, 2, 3]),
        ("Ascend910-4,Ascend910-5,6-7", [0, 1, 2, 3]),
    ],
    ids=["bare metal", "container", "runtime names"],
)
def test_a_table_on_devices_4_to_7_numbers_them_as_this_container_does(
    render_project: RenderProject,
    tmp_path: Path,
    framework: str,
    visible: str | None,
    ids: list[int],
) -> None:
    """The table's device_id is physical; a process's DEVICE_ID is its index among the
    devices its container holds (ASCEND_VISIBLE_DEVICES, the Ascend docker runtime's list
    of physical ids), the same id on bare metal (this host has no /dev/davinciN)."""
    project = render_project(framework=framework, target="ascend", devices_per_node=4)
    path = table(tmp_path / "t.json", [("127.0.0.1", [4, 5, 6, 7])])
    extra = {"ASCEND_VISIBLE_DEVICES": visible} if visible else {}
    launcher = ("--launcher", "ranktable") if framework == "pytorch" else ()
    result = dry_run(project, *launcher, "--rank-table", str(path), "--node-rank", "0", **extra)
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == [(4, r, i) for r, i in enumerate(ids)]
    assert [(int(a), int(b)) for a, b in ASCEND_IDS.findall(result.stdout)] == [(i, i) for i in ids]


def test_a_table_naming_devices_this_container_lacks_is_one_line(
    ms_ascend: Path, tmp_path: Path
) -> None:
    path = table(tmp_path / "t.json", [("127.0.0.1", [4, 5, 6, 7])])
    result = dry_run(
        ms_ascend, "--rank-table", str(path), "--node-rank", "0", ASCEND_VISIBLE_DEVICES="0-3"
    )
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.endswith(
        "the table puts this node's ranks on devices 4,5,6,7, but devices 4,5,6,7 are not here "
        "(this host or container holds 0,1,2,3: ASCEND_VISIBLE_DEVICES or /dev/davinci*); "
        "give the job those devices, or a table for these"
    ), line


@pytest.mark.parametrize("framework", ["mindspore", "pytorch"])
def test_a_one_server_table_runs_on_the_host_it_is_given_to(
    render_project: RenderProject, tmp_path: Path, framework: str
) -> None:
    """ModelZoo's 8p.json says 127.0.0.1, a shipped example a placeholder: either way the
    ranks run and meet here, with a note when the address is not this host's."""
    project = render_project(framework=framework, target="ascend", devices_per_node=4)
    path = table(tmp_path / "t.json", [("10.250.0.8", [0, 1, 2, 3])])
    launcher = ("--launcher", "ranktable") if framework == "pytorch" else ()
    result = dry_run(project, *launcher, "--rank-table", str(path))
    assert result.returncode == 0, result.stderr
    assert ranks(result.stdout) == [(4, r, r) for r in range(4)]
    (note,) = [line for line in result.stderr.splitlines() if "note:" in line]
    assert "note: the table's one server (10.250.0.8) is not one of this host's addresses" in note
    assert note.endswith("): its ranks run here")
    if framework == "pytorch":
        assert result.stdout.count(" MASTER_ADDR=127.0.0.1 ") == 4
    here = table(tmp_path / "here.json", [("127.0.0.1", [0, 1, 2, 3])])
    result = dry_run(project, *launcher, "--rank-table", str(here))
    assert result.returncode == 0 and "note:" not in result.stderr, result.stderr


IPS = ("10.250.0.8", "10.250.0.9")


def test_servers_named_not_addressed_are_found_by_node_rank(
    ms_ascend: Path, tmp_path: Path
) -> None:
    # HCCL's guide writes server_id "node_0"; nothing says which host that is.
    data = json.loads(table(tmp_path / "t.json", [(IP, [0, 1, 2, 3]) for IP in IPS]).read_text())
    for n, server in enumerate(data["server_list"]):
        server["server_id"] = f"node_{n}"
    (tmp_path / "named.json").write_text(json.dumps(data))
    result = dry_run(ms_ascend, "--rank-table", str(tmp_path / "named.json"))
    assert result.returncode == 1
    assert "none of the table's servers (node_0, node_1) is this host" in result.stderr
    assert result.stderr.rstrip().endswith("pass --node-rank N")
    found = dry_run(ms_ascend, "--rank-table", str(tmp_path / "named.json"), "--node-rank", "1")
    assert found.returncode == 0, found.stderr
    assert ranks(found.stdout) == [(8, 4 + r, r) for r in range(4)]


def test_without_a_table_mindspore_makes_one_for_this_host(ms_ascend: Path, tmp_path: Path) -> None:
    hccn = tmp_path / "hccn.conf"
    hccn.write_text(
        "".join(f"address_{d}=192.168.100.{d + 1}\nnetmask_{d}=255.255.255.0\n" for d in range(8))
    )
    result = dry_run(ms_ascend, "--hccn-conf", str(hccn), "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    made = tmp_path / "out" / "logs" / "rank_table.json"
    assert f"wrote {made} for this host: rank table 1.0: 1 server(s), 4 rank(s)" in result.stderr
    parsed = ranktable.load(made)
    assert parsed.servers[0].server_id == this_host()
    assert [d.device_ip for d in parsed.servers[0].devices] == [
        f"192.168.100.{d}" for d in range(1, 5)
    ]
    assert ranks(result.stdout) == [(4, r, r) for r in range(4)]
    assert result.stdout.count(f"RANK_TABLE_FILE={made} ") == 4
    two = dry_run(ms_ascend, "--hccn-conf", str(hccn), "--nnodes", "2")
    assert two.returncode == 1 and "a 2-node job needs the job's rank table" in two.stderr


def test_a_group_list_table_reaches_the_ranks_as_version_1_0(
    ms_ascend: Path, tmp_path: Path
) -> None:
    """HCCL numbers a group_list's ranks its own way: the ranks get the 1.0 table the
    launcher numbered them from, written beside their logs."""
    devices = [{"device_id": str(d), "device_ip": f"192.168.1.{d + 1}"} for d in range(4)]
    instance = {"pod_name": "npu4p", "server_id": "127.0.0.1", "devices": devices}
    group = {
        "group_name": "worker",
        "device_count": "4",
        "instance_count": "1",
        "instance_list": [instance],
    }
    (tmp_path / "4p.json").write_text(
        json.dumps({"status": "completed", "group_count": "1", "group_list": [group]})
    )
    result = dry_run(
        ms_ascend, "--rank-table", str(tmp_path / "4p.json"), "--output", str(tmp_path / "o")
    )
    assert result.returncode == 0, result.stderr
    converted = tmp_path / "o" / "logs" / "rank_table.json"
    assert result.stdout.count(f"RANK_TABLE_FILE={converted} ") == 4
    data = json.loads(converted.read_text())
    assert data["version"] == "1.0" and "group_list" not in data
    assert [d["rank_id"] for d in data["server_list"][0]["device"]] == ["0", "1", "2", "3"]
