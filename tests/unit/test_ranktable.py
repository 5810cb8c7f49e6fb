"""Rank tables: round trips, merging, and one named message for each broken rule."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.shipped.ranktable import tables as rt

IPS = [f"192.168.{100 + i % 4}.{101 if i < 4 else 100}" for i in range(8)]
HCCN = "\n".join(f"address_{i}={ip}" for i, ip in enumerate(IPS)) + "\nnetdetect_0=1.1.1.1\n"


def good() -> dict:
    return rt.generate("10.0.0.1", list(range(8)), IPS).to_dict()


def test_generate_has_hccl_shape_with_string_values() -> None:
    table = good()
    assert table["version"] == "1.0" and table["status"] == "completed"
    assert table["server_count"] == "1"
    (server,) = table["server_list"]
    assert server["host_nic_ip"] == "reserve"
    assert server["device"][3] == {"device_id": "3", "device_ip": IPS[3], "rank_id": "3"}
    for device in server["device"]:
        assert all(isinstance(v, str) for v in device.values())


def test_round_trip_generate_check(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(rt.generate_from_hccn("10.0.0.1", rt.parse_device_ids("0-7"), HCCN).dumps())
    assert rt.load(path).to_dict() == good()


def test_merge_renumbers_ranks_in_argument_order() -> None:
    a = rt.generate("10.0.0.1", [0, 1, 2, 3], IPS[:4])
    b = rt.generate("10.0.0.2", [4, 5, 6, 7], ["10.9.0.1", "10.9.0.2", "10.9.0.3", "10.9.0.4"])
    merged = rt.merge([b, a]).to_dict()
    assert merged["server_count"] == "2"
    assert [s["server_id"] for s in merged["server_list"]] == ["10.0.0.2", "10.0.0.1"]
    ranks = [d["rank_id"] for s in merged["server_list"] for d in s["device"]]
    assert ranks == [str(i) for i in range(8)]


@pytest.mark.parametrize("spec", ["0-7", "0,1,2,3", "4-5,6,7", "3"])
def test_parse_device_ids(spec: str) -> None:
    assert (
        rt.parse_device_ids(spec)
        == {"0-7": list(range(8)), "0,1,2,3": [0, 1, 2, 3], "4-5,6,7": [4, 5, 6, 7], "3": [3]}[spec]
    )


@pytest.mark.parametrize("spec", ["", "a-b", "7-0", "0..7"])
def test_parse_device_ids_rejects(spec: str) -> None:
    with pytest.raises(rt.RankTableError, match="devices"):
        rt.parse_device_ids(spec)


def _dev(table: dict, i: int = 0) -> dict:
    return table["server_list"][0]["device"][i]


Edit = Callable[[dict], object]
BROKEN: list[tuple[str, Edit, str]] = [
    ("version", lambda t: t.update(version="2.0"), "version: must be one of '1.0', '1.2'"),
    ("status", lambda t: t.update(status="pending"), "status: must be 'completed'"),
    ("server_count mismatch", lambda t: t.update(server_count="2"), "server_count: says 2"),
    (
        "server_count not a number",
        lambda t: t.update(server_count="one"),
        "server_count: 'one' is not a whole number",
    ),
    ("server_count as int", lambda t: t.update(server_count=1), "server_count: must be a string"),
    ("no servers", lambda t: t.update(server_list=[]), "server_list: must be a non-empty list"),
    (
        "duplicate server",
        lambda t: t.update(
            server_list=t["server_list"] + copy.deepcopy(t["server_list"]), server_count="2"
        ),
        "server_list[1].server_id: '10.0.0.1' appears twice",
    ),
    (
        "device_id out of range",
        lambda t: _dev(t, 7).update(device_id="8"),
        "server_list[0].device[7].device_id: 8 is out of range 0-7 (chip 910)",
    ),
    (
        "device_id duplicate",
        lambda t: _dev(t, 1).update(device_id="0"),
        "server_list[0].device[1].device_id: 0 appears twice",
    ),
    (
        "device_id as int",
        lambda t: _dev(t).update(device_id=0),
        "server_list[0].device[0].device_id: must be a string",
    ),
    (
        "three devices",
        lambda t: t["server_list"][0].update(device=t["server_list"][0]["device"][:3]),
        "server_list[0].device: 3 devices; a 910 server uses 1, 2, 4, 8",
    ),
    (
        "four across groups",
        lambda t: t["server_list"][0].update(device=t["server_list"][0]["device"][2:6]),
        "cross the 0-3 / 4-7 groups",
    ),
    (
        "bad ipv4",
        lambda t: _dev(t, 2).update(device_ip="192.168.1.300"),
        "server_list[0].device[2].device_ip: '192.168.1.300' is not a valid IPv4 or IPv6",
    ),
    ("bad ip text", lambda t: _dev(t, 2).update(device_ip="npu0"), "is not a valid IPv4 or IPv6"),
    (
        "duplicate ip",
        lambda t: _dev(t, 5).update(device_ip=IPS[0]),
        "server_list[0].device[5].device_ip: 192.168.100.101 is also used by "
        "server_list[0].device[0]",
    ),
    (
        "duplicate rank",
        lambda t: _dev(t, 4).update(rank_id="3"),
        "server_list[0].device[4].rank_id: 3 is also used by server_list[0].device[3]",
    ),
    ("rank gap", lambda t: _dev(t, 7).update(rank_id="9"), "rank_id: must run 0..7 without gaps"),
    ("negative rank", lambda t: _dev(t, 0).update(rank_id="-1"), "'-1' is not a whole number"),
    (
        "device not object",
        lambda t: t["server_list"][0]["device"].__setitem__(0, "0"),
        "server_list[0].device[0]: must be an object",
    ),
    (
        "missing device list",
        lambda t: t["server_list"][0].pop("device"),
        "server_list[0].device: must be a non-empty list",
    ),
    (
        "server_id too long",
        lambda t: t["server_list"][0].update(server_id="n" * 65),
        "server_list[0].server_id: must be 1 to 64 characters",
    ),
    (
        "unequal servers",
        lambda t: t.update(
            server_count="2",
            server_list=[
                t["server_list"][0],
                {
                    "server_id": "10.0.0.2",
                    "device": [{"device_id": "0", "device_ip": "10.8.0.1", "rank_id": "8"}],
                },
            ],
        ),
        "servers use 1 and 8 devices; every server of a job must use the same number",
    ),
    (
        "still being written",
        lambda t: t.update(status="initializing"),
        "the operator has not finished writing it",
    ),
]


@pytest.mark.parametrize(("name", "edit", "message"), BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_rule_is_named(name: str, edit: Edit, message: str) -> None:
    table = good()
    edit(table)
    with pytest.raises(rt.RankTableError) as err:
        rt.validate(table, "910")
    assert any(message in problem for problem in err.value.problems), err.value.problems


def test_every_broken_table_says_something_different() -> None:
    messages = []
    for _, edit, _ in BROKEN:
        table = good()
        edit(table)
        with pytest.raises(rt.RankTableError) as err:
            rt.validate(table, "910")
        messages.append(err.value.problems[0])
    assert len(BROKEN) >= 15
    assert len(set(messages)) == len(messages)


def test_ipv6_device_ips_are_accepted() -> None:
    table = rt.generate("10.0.0.1", [0, 1], ["fe80::1", "fe80::2"])
    assert rt.loads(table.dumps()).rank_size == 2


def test_invalid_json_names_the_position() -> None:
    with pytest.raises(rt.RankTableError, match="not valid JSON: .* at line 2 column 1"):
        rt.loads('{"version":\n', "t.json")


def test_hccn_conf_missing_device() -> None:
    with pytest.raises(rt.RankTableError, match="no address_N line for device"):
        rt.generate_from_hccn("10.0.0.1", [0, 1], "address_0=1.2.3.4\n")


def test_example_tables_are_valid_for_every_size() -> None:
    for devices in (1, 2, 4, 8):
        for nodes in (1, 2, 300):
            table = rt.example(devices, nodes)
            assert rt.loads(table.dumps()).rank_size == devices * nodes


def gen(*args: str, cwd: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    """`gen ranktable ARGS`; ``path`` replaces PATH (where npu-smi is looked for)."""
    env = {**os.environ, "PATH": path} if path is not None else None
    return subprocess.run(
        [sys.executable, "-m", "generator", "ranktable", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )


def test_cli_generate_merge_check(tmp_path: Path) -> None:
    (tmp_path / "hccn.conf").write_text(HCCN)
    assert (
        gen(
            "generate",
            "--server-ip",
            "10.0.0.1",
            "--devices",
            "0-3",
            "--hccn-conf",
            "hccn.conf",
            "-o",
            "a.json",
            cwd=tmp_path,
        ).returncode
        == 0
    )
    assert (
        gen(
            "generate",
            "--server-ip",
            "10.0.0.2",
            "--devices",
            "4-7",
            "--device-ips",
            "10.9.0.1,10.9.0.2,10.9.0.3,10.9.0.4",
            "-o",
            "b.json",
            cwd=tmp_path,
        ).returncode
        == 0
    )
    result = gen("merge", "a.json", "b.json", "-o", "all.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    result = gen("check", "all.json", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == (
        "rank table 1.0: 2 server(s), 8 rank(s): 10.0.0.1 (4), 10.0.0.2 (4)"
    )
    assert json.loads((tmp_path / "all.json").read_text())["server_count"] == "2"


def test_cli_refuses_to_overwrite_and_reports_each_problem(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(good_text := rt.RankTable(rt.validate(good()).servers).dumps())
    result = gen(
        "generate",
        "--server-ip",
        "10.0.0.1",
        "--device-ips",
        ",".join(IPS),
        "-o",
        "t.json",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: t.json exists; pass --force to replace it (nothing was written)"
    )
    assert (tmp_path / "t.json").read_text() == good_text
    broken = good()
    broken["version"] = "0.9"
    broken["status"] = "x"
    (tmp_path / "bad.json").write_text(json.dumps(broken))
    result = gen("check", "bad.json", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: status: must be 'completed', got \"x\"",
        "error: version: must be one of '1.0', '1.2', got \"0.9\"",
    ]


def _standalone(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """scripts/rank_table.py ARGS as generated projects carry it, with nothing but Python."""
    from local_extensions import module_source

    script = tmp_path / "rank_table.py"
    script.write_text(module_source("ranktable"))
    for sibling in ("ranktable_model", "ranktable_node", "ranktable_rules"):
        (tmp_path / f"{sibling}.py").write_text(module_source(sibling))
    return subprocess.run(
        [sys.executable, "-S", "-E", str(script), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": "/nonexistent"},
    )


def test_standalone_script_checks_like_gen(tmp_path: Path) -> None:
    """The copy generated projects carry runs with nothing but Python."""
    (tmp_path / "t.json").write_text(rt.example(8).dumps())
    result = _standalone(tmp_path, "check", "t.json")
    assert result.returncode == 0, result.stderr
    assert "8 rank(s)" in result.stdout


def test_standalone_script_generates_an_a3_table(tmp_path: Path) -> None:
    """On an A3 node the shipped script writes 1.2 from hccn.conf and npu-smi's spod-info
    (here recorded), and checks it by the A3's rules."""
    (tmp_path / "hccn.conf").write_text(HCCN16)
    args = ("--chip", "910_93", "--server-ip", "10.0.0.1", "--hccn-conf", "hccn.conf")
    made = _standalone(tmp_path, "generate", *args, "--spod-info", str(SPOD), "-o", "a3.json")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().endswith("10.0.0.1 (16); super pod(s) 0")
    assert _standalone(tmp_path, "check", "--chip", "910_93", "a3.json").returncode == 0
    refused = _standalone(tmp_path, "check", "a3.json")  # its default chip, 910b
    assert refused.stderr.splitlines() == [
        "error: version: '1.2' is the Atlas A3 super-pod table (chip 910_93); a 910b table "
        "is version '1.0'"
    ]
    missing = _standalone(tmp_path, "generate", *args, "-o", "b.json")
    assert missing.stderr.splitlines() == [f"error: {rt.NO_SDIDS}"]


# --- chips, formats, conversion, a node's entry ---------------------------------------------
def _server(ip: str, devices: range, first_rank: int, **extra: str) -> dict:
    rows = [
        {"device_id": str(d), "device_ip": f"10.{d}.{first_rank}.1", "rank_id": str(first_rank + i)}
        for i, d in enumerate(devices)
    ]
    return {"server_id": ip, "device": rows, **extra}


def _table(*servers: dict, version: str = "1.0") -> dict:
    return {
        "version": version,
        "server_count": str(len(servers)),
        "server_list": list(servers),
        "status": "completed",
    }


@pytest.mark.parametrize(
    ("chip", "devices", "problem"),
    [
        ("910", range(3), "3 devices; a 910 server uses 1, 2, 4, 8"),
        ("910b", range(3), None),
        ("910b", range(16), None),  # Atlas 200T A2 Box16
        ("910b", range(15, 17), "device_id: 16 is out of range 0-15 (chip 910b)"),
        ("910", range(7, 9), "device_id: 8 is out of range 0-7 (chip 910)"),
        ("910_93", range(16), None),
        ("910_93", range(17), "17 devices; a 910_93 server uses 1 to 16"),
        ("910b", range(2, 6), None),  # no 0-3 / 4-7 groups after the first 910
    ],
)
def test_rules_by_chip(chip: str, devices: range, problem: str | None) -> None:
    table = _table(_server("10.0.0.1", devices, 0))
    if problem is None:
        assert rt.validate(table, chip).rank_size == len(devices)
        return
    with pytest.raises(rt.RankTableError) as err:
        rt.validate(table, chip)
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_version_1_2_for_atlas_a3_keeps_its_super_pod_ids() -> None:
    server = _server("10.0.0.1", range(16), 0)
    for i, device in enumerate(server["device"]):
        device["super_device_id"] = str(37748736 + i)
    pods = [{"super_pod_id": "0", "server_list": [{"server_id": "10.0.0.1"}]}]
    table = _table(server, version="1.2") | {"super_pod_list": pods}
    parsed = rt.validate(table, "910_93")
    assert parsed.version == "1.2" and parsed.servers[0].devices[3].super_device_id == "37748739"
    assert rt.validate(parsed.to_dict(), "910_93").to_dict() == parsed.to_dict()
    assert rt.convert(parsed).to_dict() == parsed.to_dict()
    plain = rt.convert(parsed, "1.0").to_dict()  # A3 servers outside super-pod mode
    assert plain["version"] == "1.0" and "super_pod_list" not in plain
    assert "super_device_id" not in plain["server_list"][0]["device"][0]


def _a3(pods: list, sdids: list[str | None] | None = None) -> dict:
    servers = [_server(f"node_{n}", range(2), 2 * n, host_ip=f"10.0.0.{n + 1}") for n in range(2)]
    for i, device in enumerate(d for server in servers for d in server["device"]):
        sdid = (sdids or [str(i % 2) for _ in range(4)])[i]
        if sdid is not None:
            device["super_device_id"] = sdid
    return _table(*servers, version="1.2") | {"super_pod_list": pods}


def _pod(pod_id: str, *servers: str) -> dict:
    return {"super_pod_id": pod_id, "server_list": [{"server_id": s} for s in servers]}


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        (_a3([_pod("0", "node_0"), _pod("1", "node_1")]), None),
        (_a3([_pod("0", "node_0")]), "super_pod_list: servers ['node_1'] are in no super pod"),
        (
            _a3([_pod("0", "node_0", "node_1"), _pod("1", "node_1")]),
            "super_pod_list[1].server_list[0]: 'node_1' is already in super pod '0'",
        ),
        (
            _a3([_pod("0", "node_0", "node_9"), _pod("1", "node_1")]),
            "super_pod_list[0].server_list[1]: 'node_9' is not in server_list",
        ),
        (
            _a3([_pod("0", "node_0", "node_1")]),
            "super_pod_list[0]: super_device_id 0 appears twice in this super pod",
        ),
        (
            _a3([_pod("0", "node_0", "node_1")], ["0", "1", "2", None]),
            "super_device_id: missing on rank(s) 3; version 1.2 needs it on every device",
        ),
        (
            _a3([_pod("0", "node_0", "node_1")], ["0", "1", "2", "x3"]),
            "server_list[1].device[1].super_device_id: 'x3' is not a whole number",
        ),
        (_a3([_pod("0", "node_0"), _pod("0", "node_1")]), "super_pod_id: '0' appears twice"),
        (_a3([{"server_list": []}]), "super_pod_list[0]: needs a super_pod_id"),
        (
            {k: v for k, v in _a3([]).items() if k != "super_pod_list"},
            "super_pod_list: a version 1.2 table lists its super pods",
        ),
    ],
    ids=[
        "good",
        "unplaced",
        "twice",
        "unknown",
        "sdid twice",
        "no sdid",
        "sdid",
        "id",
        "empty",
        "no pods",
    ],
)
def test_super_pods_follow_hccls_rules(table: dict, problem: str | None) -> None:
    if problem is None:
        assert [p.server_ids for p in rt.validate(table, "910_93").super_pods] == [
            ("node_0",),
            ("node_1",),
        ]
        return
    with pytest.raises(rt.RankTableError) as err:
        rt.validate(table, "910_93")
    assert any(problem in p for p in err.value.problems), err.value.problems


A3_DATA = Path(__file__).resolve().parents[1] / "data" / "ranktables"


def test_a3_tables_round_trip_through_merge_and_convert() -> None:
    """Two A3 nodes' own 1.2 tables (named servers, host_ip, container_ip, SDIDs, one super
    pod each node names), merged and converted, byte for byte as written by hand."""
    nodes = [rt.load(A3_DATA / f"a3_node{n}.json", "910_93") for n in (0, 1)]
    merged = rt.merge(nodes, "910_93")
    assert merged.dumps() == (A3_DATA / "a3_merged.json").read_text()
    converted = rt.convert(merged)
    assert converted.dumps() == (A3_DATA / "a3_converted.json").read_text()
    assert rt.validate(json.loads(converted.dumps()), "910_93") == converted
    # Merging what was converted gives the same table again.
    assert rt.merge([converted], "910_93") == converted


def test_tables_of_two_versions_are_not_merged() -> None:
    a3 = rt.load(A3_DATA / "a3_node0.json", "910_93")
    with pytest.raises(rt.RankTableError, match=r"versions 1\.0 and 1\.2 cannot be merged"):
        rt.merge([rt.convert(a3, "1.0"), a3], "910_93")


def test_mindcluster_tables_are_found_by_host_ip() -> None:
    # Ascend Operator's hccl.json: server_id may be any unique name; host_ip is the address.
    table = _table(
        _server("node-a-uid", range(2), 0, host_ip="192.168.0.7", container_ip="172.16.0.3")
    )
    parsed = rt.validate(table)
    assert rt.find_node(parsed, addresses=["192.168.0.7"]).index == 0
    assert rt.find_node(parsed, addresses=["172.16.0.3"]).index == 0
    assert rt.convert(parsed).servers[0].server_id == "192.168.0.7"


def test_group_list_tables_number_their_ranks() -> None:
    # ModelArts' jobstart_hccl.json and the ModelZoo 8p.json: an instance per process.
    group = {
        "group_name": "",
        "instance_count": "4",
        "instance_list": [
            {
                "rank_id": str(r),
                "server_id": "10.0.0.1" if r < 2 else "10.0.0.2",
                "devices": [{"device_id": str(r % 2), "device_ip": f"10.9.0.{r}"}],
            }
            for r in range(4)
        ],
    }
    parsed = rt.validate({"status": "completed", "group_count": "1", "group_list": [group]})
    assert [s.server_id for s in parsed.servers] == ["10.0.0.1", "10.0.0.2"]
    assert [(d.rank_id, d.device_id) for d in parsed.servers[1].devices] == [(2, 0), (3, 1)]
    converted = rt.convert(parsed).to_dict()  # `gen ranktable convert`: the 1.0 server_list
    assert (converted["version"], converted["server_count"]) == ("1.0", "2")
    assert [d["rank_id"] for d in converted["server_list"][1]["device"]] == ["2", "3"]
    # One instance per pod holding all its devices (no rank_id): ranks in order.
    pod = {
        "instance_list": [
            {
                "server_id": "10.0.0.3",
                "devices": group["instance_list"][0]["devices"]
                + group["instance_list"][1]["devices"],
            }
        ]
    }
    assert rt.validate({"status": "completed", "group_list": [pod]}).rank_size == 2


def test_find_node_by_rank_or_address_and_its_device_count() -> None:
    table = rt.merge(
        [rt.generate("10.0.0.2", [4, 5], IPS[:2]), rt.generate("10.0.0.1", [0, 1], IPS[2:4])]
    )
    assert rt.find_node(table, node_rank=1).server.server_id == "10.0.0.1"
    found = rt.find_node(table, addresses=["127.0.0.1", "10.0.0.2"], nproc=2)
    assert (found.index, found.rank_size, found.master) == (0, 4, "10.0.0.2")
    assert [d.device_id for d in found.server.devices] == [4, 5]
    with pytest.raises(rt.RankTableError, match="none of the table's servers .* is this host"):
        rt.find_node(table, addresses=["10.0.0.9"])
    with pytest.raises(rt.RankTableError, match="has 2 device.* but --nproc is 8"):
        rt.find_node(table, node_rank=0, nproc=8)


@pytest.mark.parametrize("server_ip", ["999.1.1.1", "", "node0"])
def test_generate_refuses_a_server_ip_that_is_not_an_address(
    tmp_path: Path, server_ip: str
) -> None:
    result = gen(
        "generate",
        "--server-ip",
        server_ip,
        "--device-ips",
        IPS[0],
        "--devices",
        "0",
        "-o",
        "t.json",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"error: --server-ip {server_ip!r} is not an IPv4 or IPv6 address"
    )
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "t.json").exists()


def test_cli_chip_defaults_to_the_projects_answer_and_convert_keeps_the_version(
    tmp_path: Path,
) -> None:
    (tmp_path / "t.json").write_text(json.dumps(_table(_server("10.0.0.1", range(3), 0))))
    assert gen("check", "t.json", cwd=tmp_path).returncode == 0  # 910b: 3 devices are fine
    record = {**Options("p", target="ascend").as_context(), "chip": "910"}
    (tmp_path / ".train-template.json").write_text(json.dumps(record))
    refused = gen("check", "t.json", cwd=tmp_path)
    assert refused.returncode == 1 and "a 910 server uses 1, 2, 4, 8" in refused.stderr
    assert gen("check", "t.json", "--chip", "910b", cwd=tmp_path).returncode == 0
    (tmp_path / ".train-template.json").unlink()
    (tmp_path / "hccl.json").write_text((A3_DATA / "a3_node0.json").read_text())
    a3 = ("--chip", "910_93")
    result = gen("convert", "hccl.json", *a3, "-o", "out.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    converted = json.loads((tmp_path / "out.json").read_text())
    assert converted["version"] == "1.2"
    assert converted["server_list"][0]["server_id"] == "172.16.0.100"
    assert converted["super_pod_list"][0]["server_list"] == [{"server_id": "172.16.0.100"}]
    result = gen("convert", "hccl.json", *a3, "--version", "1.0", "-o", "v1.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "v1.json").read_text())["version"] == "1.0"


def test_the_device_nodes_say_which_devices_a_container_holds(tmp_path: Path) -> None:
    # As `docker run --device=/dev/davinci4 ...` leaves them: the host's names, not 0-N.
    for name in ("davinci6", "davinci4", "davinci_manager", "davinci5", "devmm_svm"):
        (tmp_path / name).touch()
    assert rt.visible_devices({}, tmp_path) == [4, 5, 6]
    assert rt.local_indexes([5, 6], [4, 5, 6]) == [1, 2]
    # A list the runtime did not write as numbers: the nodes still say.
    assert rt.visible_devices({"ASCEND_VISIBLE_DEVICES": "all"}, tmp_path) == [4, 5, 6]
    assert rt.visible_devices({"ASCEND_VISIBLE_DEVICES": "7,3-4"}, tmp_path) == [3, 4, 7]
    # No NPU here at all: the table's ids are used as they are (bare metal's numbering).
    assert rt.visible_devices({}, tmp_path / "empty") is None
    assert rt.local_indexes([4, 5], None) == [4, 5]


# --- Atlas A3: generate writes version 1.2, check keeps it to the A3 ------------------------
SPOD = A3_DATA / "a3_spod_info.txt"
HCCN16 = "".join(f"address_{d}=192.168.{100 + d % 2}.{d // 2 + 1}\n" for d in range(16))
NO_NPU_SMI = "/nonexistent"  # a PATH without npu-smi
A3 = ("--chip", "910_93")


def _a3_node(tmp_path: Path, name: str, *args: str, path: str = NO_NPU_SMI) -> dict:
    """`gen ranktable generate --chip 910_93 ARGS` with a 16-device hccn.conf, as JSON."""
    (tmp_path / "hccn.conf").write_text(HCCN16)
    made = gen(
        "generate", *A3, "--hccn-conf", "hccn.conf", *args, "-o", name, cwd=tmp_path, path=path
    )
    assert made.returncode == 0, made.stderr
    return json.loads((tmp_path / name).read_text())


def _fake_npu_smi(tmp_path: Path, pod: str) -> str:
    """A directory holding an npu-smi whose spod-info gives device 2N+M the SDID 1000+2N+M."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "npu-smi"
    # npu-smi info -t spod-info -i N -c M
    script.write_text(
        "#!/bin/sh\n"
        'echo "SDID                           : $((1000 + $5 * 2 + $7))"\n'
        f'echo "Super Pod ID                   : {pod}"\n'
    )
    script.chmod(0o755)
    return str(bin_dir)


def test_generate_on_an_a3_writes_version_1_2_that_check_accepts(tmp_path: Path) -> None:
    data = _a3_node(tmp_path, "a3.json", "--server-ip", "10.0.0.1", "--spod-info", str(SPOD))
    assert (data["version"], data["server_count"]) == ("1.2", "1")
    assert data["super_pod_list"] == [
        {"super_pod_id": "0", "server_list": [{"server_id": "10.0.0.1"}]}
    ]
    devices = data["server_list"][0]["device"]
    assert [d["device_id"] for d in devices] == [str(d) for d in range(16)]  # an A3's 16
    assert [d["super_device_id"] for d in devices] == [str(16777216 + 65536 * d) for d in range(16)]
    assert devices[3]["device_ip"] == "192.168.101.2" and devices[3]["rank_id"] == "3"
    checked = gen("check", *A3, "a3.json", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == (
        "rank table 1.2: 1 server(s), 16 rank(s): 10.0.0.1 (16); super pod(s) 0"
    )


def test_generate_on_an_a3_node_asks_its_npu_smi(tmp_path: Path) -> None:
    """Without --spod-info, the node's own npu-smi gives the SDIDs and the super pod;
    --super-pod-id puts the server in another (a logical one), and merged nodes of one
    super pod id are one pod."""
    npu_smi = _fake_npu_smi(tmp_path, "7")
    ips = ",".join(f"10.9.0.{d}" for d in range(4))
    args = ("--server-ip", "10.0.0.2", "--devices", "0-3", "--device-ips", ips)
    data = _a3_node(tmp_path, "b.json", *args, path=npu_smi)
    assert [d["super_device_id"] for d in data["server_list"][0]["device"]] == [
        "1000",
        "1001",
        "1002",
        "1003",
    ]
    assert data["super_pod_list"][0]["super_pod_id"] == "7"
    _a3_node(tmp_path, "b0.json", *args, "--super-pod-id", "0", path=npu_smi)
    here = ("--server-ip", "10.0.0.1", "--devices", "0-3")
    _a3_node(tmp_path, "a0.json", *here, "--spod-info", str(SPOD))
    merged = gen("merge", *A3, "a0.json", "b0.json", "-o", "ab.json", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    pods = json.loads((tmp_path / "ab.json").read_text())["super_pod_list"]
    assert pods == [
        {"super_pod_id": "0", "server_list": [{"server_id": "10.0.0.1"}, {"server_id": "10.0.0.2"}]}
    ]


def test_generate_on_an_a3_says_in_one_line_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "hccn.conf").write_text(HCCN16)
    args = ("generate", *A3, "--server-ip", "10.0.0.1", "--hccn-conf", "hccn.conf")
    refused = gen(*args, "-o", "t.json", cwd=tmp_path, path=NO_NPU_SMI)
    assert refused.returncode == 1 and not (tmp_path / "t.json").exists()
    assert refused.stderr.splitlines() == [f"error: {rt.NO_SDIDS}"]
    assert "--spod-info FILE" in rt.NO_SDIDS and "--version 1.0" in rt.NO_SDIDS
    # A3 servers outside a super pod: version 1.0, no SDIDs needed.
    plain = gen(*args, "--version", "1.0", "-o", "t.json", cwd=tmp_path, path=NO_NPU_SMI)
    assert plain.returncode == 0, plain.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["version"] == "1.0" and "super_pod_list" not in data
    assert "super_device_id" not in data["server_list"][0]["device"][0]
    off_a3 = gen(
        *args[:1], "--chip", "910b", *args[3:], "--version", "1.2", "-o", "u.json", cwd=tmp_path
    )
    assert off_a3.stderr.splitlines() == [
        "error: --version 1.2 is the Atlas A3 super-pod table (chip 910_93), not 910b's"
    ]


def _check_one_line(tmp_path: Path, data: dict, chip: str) -> str:
    (tmp_path / "t.json").write_text(json.dumps(data))
    result = gen("check", "--chip", chip, "t.json", cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    return line


def test_check_refuses_a_1_2_table_without_super_device_ids_in_one_line(tmp_path: Path) -> None:
    data = _a3_node(tmp_path, "a3.json", "--server-ip", "10.0.0.1", "--spod-info", str(SPOD))
    for device in data["server_list"][0]["device"]:
        del device["super_device_id"]
    assert _check_one_line(tmp_path, data, "910_93") == (
        "error: super_device_id: missing on rank(s) 0, 1, 2, 3, 4, 5, 6, 7 and 8 more; version "
        "1.2 needs it on every device (npu-smi info -t spod-info -i N -c M shows each "
        "device's SDID)"
    )


def test_check_refuses_a_server_in_no_super_pod_in_one_line(tmp_path: Path) -> None:
    data = json.loads((A3_DATA / "a3_merged.json").read_text())
    data["super_pod_list"][0]["server_list"].pop()
    assert _check_one_line(tmp_path, data, "910_93") == (
        "error: super_pod_list: servers ['node_1'] are in no super pod"
    )


def test_a_1_2_table_is_refused_off_the_a3_in_one_line(tmp_path: Path) -> None:
    data = json.loads((A3_DATA / "a3_merged.json").read_text())
    assert rt.validate(data, "910_93").version == "1.2"
    assert _check_one_line(tmp_path, data, "910b") == (
        "error: version: '1.2' is the Atlas A3 super-pod table (chip 910_93); a 910b table is "
        "version '1.0'"
    )


@pytest.mark.parametrize("chip", ["910", "910b", "910_93"])
def test_version_1_0_tables_keep_working_on_every_chip(tmp_path: Path, chip: str) -> None:
    (tmp_path / "t.json").write_text(rt.example(8, 2).dumps())
    result = gen("check", "--chip", chip, "t.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("rank table 1.0: 2 server(s), 16 rank(s)")


def test_recorded_spod_info_is_read_by_its_command_lines() -> None:
    spod = rt.read_spod_info(SPOD.read_text())
    assert sorted(spod) == list(range(16))
    assert spod[3] == {"SDID": str(16777216 + 3 * 65536), "Super Pod ID": "0"}
    with pytest.raises(rt.RankTableError, match=r"'SDID : 5' comes before any `npu-smi info"):
        rt.read_spod_info("SDID : 5\n")
    with pytest.raises(
        rt.RankTableError,
        match=r"no SDID for device\(s\) 16 \(device 16's: `npu-smi info -t spod-info -i 8 -c 0`",
    ):
        rt.a3_ids([15, 16], "910_93", spod_info=SPOD.read_text())
    two = SPOD.read_text().replace("Super Pod ID                   : 0", "Super Pod ID : 1", 1)
    with pytest.raises(rt.RankTableError, match="super pod ids 0, 1: pass --super-pod-id"):
        rt.a3_ids([0, 1], "910_93", spod_info=two)
    assert rt.a3_ids([0, 1], "910_93", spod_info=two, super_pod_id="s0")[1] == "s0"


def test_the_ranks_meet_at_rank_0s_container_where_the_table_gives_it() -> None:
    """A ModelArts or MindCluster table names each server by its host and may give the
    container's own address: rank 0's store listens in its container, so torch's ranks meet
    there; a table of host addresses only meets at rank 0's host."""
    from generator.shipped.ranktable import node

    both = _server("10.0.0.2", range(2), 0, host_ip="10.0.0.2", container_ip="172.16.3.7")
    other = _server("10.0.0.1", range(2), 2)
    table = rt.loads(json.dumps(_table(other, both)))
    assert node.master(table) == "172.16.3.7"
    assert node.master(rt.loads(json.dumps(_table(_server("10.0.0.2", range(2), 0))))) == "10.0.0.2"
