"""HCCL rank tables: the model, and the rules a table must keep, by chip and by format.

Formats read: version 1.0 and 1.2 (server_list; 1.2 adds super_device_id and a
super_pod_list for Atlas A3), MindCluster's hccl.json (server_list with
host_ip and container_ip) and the older group_list form (ModelArts'
jobstart_hccl.json, the ModelZoo 8p.json). Chips: 910 (Atlas training series:
1, 2, 4 or 8 devices, 2 and 4 inside 0-3 or 4-7), 910b (Atlas A2: 1 to 8) and
910_93 (Atlas A3: 1 to 16). Every server of a job has the same device count.

Standard library only: generated Ascend projects carry this file as
scripts/ranktable_rules.py beside scripts/rank_table.py.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

STATUS = "completed"
VERSIONS = ("1.0", "1.2")
# device_id range and the device counts a server may use, per chip.
CHIPS: dict[str, tuple[int, tuple[int, ...]]] = {
    "910": (8, (1, 2, 4, 8)),
    "910b": (8, tuple(range(1, 9))),
    "910_93": (16, tuple(range(1, 17))),
}
DEFAULT_CHIP = "910b"
# The first-generation 910 links 2- and 4-device jobs only inside one 4-device group.
GROUPS_910 = (frozenset(range(0, 4)), frozenset(range(4, 8)))


class RankTableError(ValueError):
    """Raised when a rank table or its inputs are invalid; ``problems`` holds one line each."""

    def __init__(self, problems: list[str]) -> None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(problems[0] + more)
        self.problems = list(problems)


@dataclass(frozen=True)
class Device:
    """One NPU: its index on the server, its NIC address, its global rank (and A3's id)."""

    device_id: int
    device_ip: str
    rank_id: int
    super_device_id: str | None = None


@dataclass(frozen=True)
class Server:
    """One server (node) and its devices, in rank order; MindCluster adds host and pod IPs."""

    server_id: str
    devices: tuple[Device, ...]
    host_ip: str | None = None
    container_ip: str | None = None

    @property
    def addresses(self) -> tuple[str, ...]:
        """The addresses a launcher may know this server by."""
        return tuple(a for a in (self.host_ip, self.container_ip, self.server_id) if a)


@dataclass(frozen=True)
class RankTable:
    """A whole rank table; ``to_dict`` gives HCCL's JSON shape (every value a string)."""

    servers: tuple[Server, ...]
    version: str = "1.0"
    super_pods: tuple[Any, ...] = ()

    @property
    def rank_size(self) -> int:
        return sum(len(server.devices) for server in self.servers)

    def to_dict(self) -> dict[str, Any]:
        servers = []
        for server in self.servers:
            devices = []
            for d in server.devices:
                device = {"device_id": str(d.device_id), "device_ip": d.device_ip}
                if d.super_device_id is not None:
                    device["super_device_id"] = d.super_device_id
                devices.append({**device, "rank_id": str(d.rank_id)})
            entry: dict[str, Any] = {"server_id": server.server_id, "device": devices}
            if server.host_ip or server.container_ip:
                extra = {"host_ip": server.host_ip, "container_ip": server.container_ip}
                entry.update({k: v for k, v in extra.items() if v})
            else:
                entry["host_nic_ip"] = "reserve"
            servers.append(entry)
        table = {"version": self.version, "server_count": str(len(self.servers))}
        table.update(server_list=servers, status=STATUS)
        if self.super_pods:
            table["super_pod_list"] = list(self.super_pods)
        return table

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=4) + "\n"

    def summary(self) -> str:
        servers = ", ".join(f"{s.server_id} ({len(s.devices)})" for s in self.servers)
        return (
            f"rank table {self.version}: {len(self.servers)} server(s), "
            f"{self.rank_size} rank(s): {servers}"
        )


class _Checker:
    """Collects every problem of one table, one line each, naming the field."""

    def __init__(self, chip: str) -> None:
        if chip not in CHIPS:
            raise RankTableError([f"chip: {chip!r} is not one of {', '.join(CHIPS)}"])
        self.chip = chip
        self.problems: list[str] = []
        self.ips: dict[str, str] = {}
        self.ranks: dict[int, str] = {}

    def string(self, where: str, value: object) -> str | None:
        if not isinstance(value, str):
            got = json.dumps(value)
            self.problems.append(f"{where}: must be a string (HCCL reads strings), got {got}")
            return None
        return value

    def number(self, where: str, value: object) -> int | None:
        text = self.string(where, value)
        if text is not None and not re.fullmatch(r"0|[1-9][0-9]*", text):
            self.problems.append(f"{where}: {text!r} is not a whole number")
            return None
        return None if text is None else int(text)

    def ip(self, where: str, value: object) -> str | None:
        text = self.string(where, value)
        if text is None:
            return None
        try:
            ipaddress.ip_address(text)
        except ValueError:
            self.problems.append(f"{where}: {text!r} is not a valid IPv4 or IPv6 address")
            return None
        return text

    def device(self, where: str, data: object, seen: list[int], rank: object) -> Device | None:
        if not isinstance(data, dict):
            self.problems.append(f"{where}: must be an object")
            return None
        limit = CHIPS[self.chip][0]
        device_id = self.number(f"{where}.device_id", data.get("device_id"))
        if device_id is not None and device_id >= limit:
            self.problems.append(
                f"{where}.device_id: {device_id} is out of range 0-{limit - 1} (chip {self.chip})"
            )
        if device_id is not None and device_id in seen:
            self.problems.append(f"{where}.device_id: {device_id} appears twice on this server")
        ip = self.ip(f"{where}.device_ip", data.get("device_ip"))
        if ip is not None:
            if ip in self.ips:
                self.problems.append(f"{where}.device_ip: {ip} is also used by {self.ips[ip]}")
            self.ips.setdefault(ip, where)
        rank_id = self.number(f"{where}.rank_id", data.get("rank_id", rank))
        if rank_id is not None:
            if rank_id in self.ranks:
                self.problems.append(
                    f"{where}.rank_id: {rank_id} is also used by {self.ranks[rank_id]}"
                )
            self.ranks.setdefault(rank_id, where)
        if device_id is None or ip is None or rank_id is None:
            return None
        seen.append(device_id)
        return Device(device_id, ip, rank_id, data.get("super_device_id"))

    def counts(self, where: str, ids: list[int]) -> None:
        allowed = CHIPS[self.chip][1]
        if len(ids) not in allowed:
            rule = ", ".join(map(str, allowed)) if self.chip == "910" else f"1 to {allowed[-1]}"
            self.problems.append(f"{where}: {len(ids)} devices; a {self.chip} server uses {rule}")
        elif self.chip == "910" and len(ids) in (2, 4):
            if not any(set(ids) <= group for group in GROUPS_910):
                self.problems.append(
                    f"{where}: devices {sorted(ids)} cross the 0-3 / 4-7 groups; on a 910 "
                    "server 2 or 4 devices must sit inside one of them"
                )

    def finish(self, servers: list[Server]) -> None:
        if self.ranks and sorted(self.ranks) != list(range(len(self.ranks))):
            missing = sorted(set(range(max(self.ranks) + 1)) - set(self.ranks))
            self.problems.append(
                f"rank_id: must run 0..{len(self.ranks) - 1} without gaps; missing {missing[:8]}"
            )
        sizes = sorted({len(s.devices) for s in servers})
        if len(sizes) > 1:
            self.problems.append(
                f"server_list: servers use {' and '.join(map(str, sizes))} devices; every "
                "server of a job must use the same number"
            )
        if self.problems:
            raise RankTableError(self.problems)


def _server(check: _Checker, where: str, data: object, ids: set) -> Server | None:
    if not isinstance(data, dict):
        check.problems.append(f"{where}: must be an object")
        return None
    host_ip = check.ip(f"{where}.host_ip", data["host_ip"]) if "host_ip" in data else None
    container_ip = data.get("container_ip") if isinstance(data.get("container_ip"), str) else None
    # The launcher finds its server by address: server_id is one, unless host_ip says it.
    read = check.string if host_ip else check.ip
    server_id = read(f"{where}.server_id", data.get("server_id"))
    if server_id is not None:
        if server_id in ids:
            check.problems.append(f"{where}.server_id: {server_id!r} appears twice")
        ids.add(server_id)
    listed = data.get("device")
    if not isinstance(listed, list) or not listed:
        check.problems.append(f"{where}.device: must be a non-empty list of devices")
        return None
    seen: list[int] = []
    devices = [
        check.device(f"{where}.device[{d}]", item, seen, None) for d, item in enumerate(listed)
    ]
    check.counts(f"{where}.device", seen)
    found = tuple(d for d in devices if d is not None)
    return Server(server_id or "", found, host_ip, container_ip)


def _server_list(data: dict[str, Any], check: _Checker) -> RankTable:
    version = data.get("version")
    if version not in VERSIONS:
        check.problems.append(
            f"version: must be one of {', '.join(map(repr, VERSIONS))}, got {json.dumps(version)}"
        )
    server_list = data.get("server_list")
    if not isinstance(server_list, list) or not server_list:
        check.problems.append("server_list: must be a non-empty list of servers")
        raise RankTableError(check.problems)
    count = check.number("server_count", data.get("server_count"))
    if count is not None and count != len(server_list):
        check.problems.append(f"server_count: says {count} but server_list has {len(server_list)}")
    ids: set = set()
    servers = [_server(check, f"server_list[{s}]", item, ids) for s, item in enumerate(server_list)]
    found = [s for s in servers if s is not None]
    check.finish(found)
    pods = data.get("super_pod_list") or ()
    return RankTable(tuple(found), str(version), tuple(pods) if isinstance(pods, list) else ())


def _group_list(data: dict[str, Any], check: _Checker) -> RankTable:
    """The group_list form: one instance per process (or per pod), grouped here by server."""
    groups = data.get("group_list")
    if not isinstance(groups, list) or not groups:
        check.problems.append("group_list: must be a non-empty list of groups")
        raise RankTableError(check.problems)
    by_server: dict[str, list[Device]] = {}
    seen: dict[str, list[int]] = {}
    next_rank = 0
    for g, group in enumerate(groups):
        instances = group.get("instance_list") if isinstance(group, dict) else None
        if not isinstance(instances, list) or not instances:
            check.problems.append(f"group_list[{g}].instance_list: must be a non-empty list")
            continue
        for i, instance in enumerate(instances):
            where = f"group_list[{g}].instance_list[{i}]"
            if not isinstance(instance, dict):
                check.problems.append(f"{where}: must be an object")
                continue
            server_id = check.ip(f"{where}.server_id", instance.get("server_id"))
            devices = instance.get("devices")
            if not isinstance(devices, list) or not devices:
                check.problems.append(f"{where}.devices: must be a non-empty list of devices")
                continue
            if server_id is None:
                continue
            for d, item in enumerate(devices):
                # One device per instance carries the instance's rank_id; else count in order.
                rank = instance.get("rank_id") if len(devices) == 1 else None
                rank = rank if rank is not None else str(next_rank)
                device = check.device(
                    f"{where}.devices[{d}]", item, seen.setdefault(server_id, []), rank
                )
                next_rank += 1
                if device is not None:
                    by_server.setdefault(server_id, []).append(device)
    servers = [
        Server(sid, tuple(sorted(d, key=lambda x: x.rank_id))) for sid, d in by_server.items()
    ]
    for server in servers:
        check.counts(f"server {server.server_id}", [d.device_id for d in server.devices])
    check.finish(servers)
    return RankTable(tuple(servers))


def validate(data: object, chip: str = DEFAULT_CHIP) -> RankTable:
    """Check a decoded rank table of any known format strictly, by the rules of ``chip``;
    RankTableError lists every problem, one line each."""
    check = _Checker(chip)
    if not isinstance(data, dict):
        raise RankTableError(["the rank table must be a JSON object"])
    status = data.get("status")
    if status == "initializing":
        raise RankTableError(
            [
                "status: 'initializing': the operator has not finished writing it (wait for "
                "'completed')"
            ]
        )
    if status != STATUS:
        check.problems.append(f"status: must be {STATUS!r}, got {json.dumps(status)}")
    if "group_list" in data and "server_list" not in data:
        return _group_list(data, check)
    return _server_list(data, check)
