"""Rank tables: round trips, merging, and one named message for each broken rule."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from generator import ranktable as rt

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
    ("version", lambda t: t.update(version="2.0"), "version: must be '1.0'"),
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
        "server_list[0].device[7].device_id: 8 is out of range 0-7",
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
        "server_list[0].device: 3 devices; a server uses 1, 2, 4 or 8",
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
]


@pytest.mark.parametrize(("name", "edit", "message"), BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_rule_is_named(name: str, edit: Edit, message: str) -> None:
    table = good()
    edit(table)
    with pytest.raises(rt.RankTableError) as err:
        rt.validate(table)
    assert any(message in problem for problem in err.value.problems), err.value.problems


def test_every_broken_table_says_something_different() -> None:
    messages = []
    for _, edit, _ in BROKEN:
        table = good()
        edit(table)
        with pytest.raises(rt.RankTableError) as err:
            rt.validate(table)
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


def gen(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", "ranktable", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
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
        "error: version: must be '1.0', got \"0.9\"",
        "error: status: must be 'completed', got \"x\"",
    ]


def test_standalone_script_checks_like_gen(tmp_path: Path) -> None:
    """The copy generated projects carry runs with nothing but Python."""
    script = tmp_path / "rank_table.py"
    script.write_text(Path(rt.__file__).read_text())
    (tmp_path / "t.json").write_text(rt.example(8).dumps())
    result = subprocess.run(
        [sys.executable, "-I", str(script), "check", "t.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "8 rank(s)" in result.stdout
