"""HCCL rank tables, the model: devices, servers, A3 super pods and the table, with HCCL's
JSON shape (every value a string). The rules a table must keep are in ranktable_rules.py.

Standard library only: generated Ascend projects carry this file as
scripts/ranktable_model.py beside scripts/rank_table.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

STATUS = "completed"


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
class SuperPod:
    """A3 (version 1.2): the servers of one super pod, by server_id."""

    super_pod_id: str
    server_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        servers = [{"server_id": server_id} for server_id in self.server_ids]
        return {"super_pod_id": self.super_pod_id, "server_list": servers}


@dataclass(frozen=True)
class RankTable:
    """A whole rank table; ``to_dict`` gives HCCL's JSON shape (every value a string)."""

    servers: tuple[Server, ...]
    version: str = "1.0"
    super_pods: tuple[SuperPod, ...] = ()

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
            table["super_pod_list"] = [pod.to_dict() for pod in self.super_pods]
        return table

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=4) + "\n"

    def summary(self) -> str:
        servers = ", ".join(f"{s.server_id} ({len(s.devices)})" for s in self.servers)
        pods = ", ".join(p.super_pod_id for p in self.super_pods)
        return (
            f"rank table {self.version}: {len(self.servers)} server(s), "
            f"{self.rank_size} rank(s): {servers}" + (f"; super pod(s) {pods}" if pods else "")
        )
