"""HCCL rank tables: the rules a table must keep, by chip and by format.

Formats read: version 1.0 and 1.2 (server_list; 1.2, for Atlas A3 super pods only, adds
super_device_id and a super_pod_list), MindCluster's hccl.json (server_list with host_ip
and container_ip) and the older group_list form (ModelArts' jobstart_hccl.json, the
ModelZoo 8p.json). Chips: 910 (Atlas training series: 1, 2, 4 or 8 devices, 2 and 4
inside 0-3 or 4-7), 910b (Atlas A2: 1 to 8, 16 on Box16 servers) and 910_93 (Atlas A3: 1
to 16). Every server of a job has the same device count. A server_id is any name (HCCL's
guide writes "node_0"); a launcher finds a named server by its host_ip, else by --node-rank.

Standard library only: generated Ascend projects carry this file as
scripts/ranktable_rules.py beside scripts/rank_table.py.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from generator.shipped.ranktable.model import (
    STATUS,
    Device,
    RankTable,
    RankTableError,
    Server,
    SuperPod,
)

__all__ = ["Device", "RankTable", "RankTableError", "Server", "SuperPod", "validate"]
VERSIONS = ("1.0", "1.2")
# device_id range and the device counts a server may use, per chip. HCCL reads device_id up
# to 7 on the 910 and up to 15 on the 910B and 910_93 (hcomm topoinfo: "device_id more than 7
# is invalid"; GetMaxDevNum, MAX_DEVICE_NUM_SIXTEEN). Atlas A2 servers hold 8 NPUs, its Box16
# servers 16 in two groups of 8 (MindCluster ascend-for-volcano module910bx16: nodeNPUNumber
# 16); an A3 server 16 devices, 8 NPUs of 2 dies (ascend910a3: NodeNPUNumber16, DieNPUNumber).
CHIPS: dict[str, tuple[int, tuple[int, ...]]] = {
    "910": (8, (1, 2, 4, 8)),
    "910b": (16, tuple(range(1, 17))),
    "910_93": (16, tuple(range(1, 17))),
}
# HCCL's limit on a server_id (hccl rank table guide: "长度小于等于64").
SERVER_ID_MAX = 64
DEFAULT_CHIP = "910b"
# The first-generation 910 links 2- and 4-device jobs only inside one 4-device group.
GROUPS_910 = (frozenset(range(0, 4)), frozenset(range(4, 8)))


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

    def server_id(self, where: str, value: object, ids: set) -> str | None:
        """An address or a name ("node_0"), unique and at most SERVER_ID_MAX long."""
        text = self.string(where, value)
        if text is not None and not 0 < len(text) <= SERVER_ID_MAX:
            self.problems.append(f"{where}: must be 1 to {SERVER_ID_MAX} characters")
            return None
        if text is not None:
            if text in ids:
                self.problems.append(f"{where}: {text!r} appears twice")
            ids.add(text)
        return text

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
        super_id = data.get("super_device_id")
        if super_id is not None and self.number(f"{where}.super_device_id", super_id) is None:
            return None
        return Device(device_id, ip, rank_id, super_id)

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
    server_id = check.server_id(f"{where}.server_id", data.get("server_id"), ids)
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
    pods = _version_1_2(check, data, found) if version == "1.2" else ()
    check.finish(found)
    return RankTable(tuple(found), str(version), pods)


# Version 1.2 is the rank table of Atlas A3 super-pod networking ("针对超节点模式组网，配置为：
# 1.2", CANN HCCL user guide, rank table configuration for Atlas A3, hcclug_000066); A2 and
# the 910 write 1.0 (hcclug_000067), and MindCluster writes 1.2 for A3 super-pod jobs only
# (Ascend/mind-cluster component/ascend-operator/pkg/ranktable/factory.go, useV1dot2).
A3_CHIP = "910_93"
SDID_SOURCE = "npu-smi info -t spod-info -i N -c M shows each device's SDID"


def _version_1_2(check: _Checker, data: dict[str, Any], servers: list[Server]) -> tuple:
    """A 1.2 table's super pods and SDIDs, on the A3 only; one line elsewhere."""
    if check.chip != A3_CHIP:
        check.problems.append(
            f"version: '1.2' is the Atlas A3 super-pod table (chip {A3_CHIP}); a "
            f"{check.chip} table is version '1.0'"
        )
        return ()
    # With version 1.2 HCCL reads each device's super_device_id (hcomm
    # src/framework/common/src/topo/topoinfo_ranktableConcise.cc, GetSingleDevice); in a
    # super pod each must be set (CheckSuperPodInfo: "the configuration may be missing"; CANN
    # error EI0004, hcclug_000042: version "1.2" with no super_device_id fails RanktableCheck).
    missing = [d.rank_id for s in servers for d in s.devices if d.super_device_id is None]
    if missing:
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        check.problems.append(
            f"super_device_id: missing on rank(s) {', '.join(map(str, missing[:8]))}{more}; "
            f"version 1.2 needs it on every device ({SDID_SOURCE})"
        )
    if "super_pod_list" not in data:
        check.problems.append(
            "super_pod_list: a version 1.2 table lists its super pods (super_pod_id and "
            "server_list); A3 servers outside a super pod use version '1.0'"
        )
        return ()
    return _super_pods(check, data, servers)


def _super_pods(check: _Checker, data: dict[str, Any], servers: list[Server]) -> tuple:
    """Version 1.2's super_pod_list, by HCCL's rules (topoinfo_ranktableConcise.cc,
    GetSingleSuperPod and CheckSuperPodInfo): each super_pod_id set and unique, each listed
    server_id one of server_list's, every server in one pod (the pods' servers add up to
    server_count), each super_device_id unique in its pod."""
    listed = data.get("super_pod_list")
    if not isinstance(listed, list) or not listed:
        check.problems.append("super_pod_list: must be a non-empty list of super pods")
        return ()
    known = {server.server_id: server for server in servers}
    pods: list[SuperPod] = []
    placed: dict[str, str] = {}
    for p, item in enumerate(listed):
        where = f"super_pod_list[{p}]"
        entries = item.get("server_list") if isinstance(item, dict) else None
        pod_id = (
            check.string(f"{where}.super_pod_id", item.get("super_pod_id")) if entries else None
        )
        if not isinstance(entries, list) or not entries or not pod_id:
            check.problems.append(f"{where}: needs a super_pod_id and a non-empty server_list")
            continue
        if any(pod.super_pod_id == pod_id for pod in pods):
            check.problems.append(f"{where}.super_pod_id: {pod_id!r} appears twice")
        ids = [e.get("server_id") if isinstance(e, dict) else None for e in entries]
        for s, server_id in enumerate(ids):
            if server_id not in known:
                check.problems.append(
                    f"{where}.server_list[{s}]: {server_id!r} is not in server_list"
                )
            elif server_id in placed:
                other = placed[server_id]
                check.problems.append(
                    f"{where}.server_list[{s}]: {server_id!r} is already in super pod {other!r}"
                )
            placed.setdefault(str(server_id), pod_id)
        pods.append(SuperPod(pod_id, tuple(str(i) for i in ids)))
        devices = [d for i in ids if i in known for d in known[i].devices]
        _super_device_ids(check, where, devices)
    unplaced = [server_id for server_id in known if server_id not in placed]
    if unplaced:
        check.problems.append(f"super_pod_list: servers {unplaced} are in no super pod")
    return tuple(pods)


def _super_device_ids(check: _Checker, where: str, devices: list[Device]) -> None:
    # A device without one is named once for the table, by _version_1_2.
    sdids = [d.super_device_id for d in devices if d.super_device_id is not None]
    for sdid in sorted({i for i in sdids if sdids.count(i) > 1}):
        check.problems.append(f"{where}: super_device_id {sdid} appears twice in this super pod")


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
            server_id = check.string(f"{where}.server_id", instance.get("server_id"))
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
