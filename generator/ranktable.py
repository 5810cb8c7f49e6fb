"""HCCL rank tables (version 1.0, server_list format): build, merge, validate.

Standard library only and free of other generator imports: the same file is
copied into generated Ascend projects as scripts/rank_table.py, so launch
scripts on a cluster node can check a table (and build one from
/etc/hccn.conf) with the code `gen ranktable` uses.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

VERSION = "1.0"
STATUS = "completed"
DEVICES_PER_SERVER = (1, 2, 4, 8)
# HCCL links 2- and 4-device jobs only inside one 4-device group (0-3 or 4-7).
DEVICE_GROUPS = (frozenset(range(0, 4)), frozenset(range(4, 8)))


class RankTableError(ValueError):
    """Raised when a rank table or its inputs are invalid; ``problems`` holds one line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(problems[0] + more)
        self.problems = list(problems)


@dataclass(frozen=True)
class Device:
    """One NPU: its index on the server, its NIC address and its global rank."""

    device_id: int
    device_ip: str
    rank_id: int


@dataclass(frozen=True)
class Server:
    """One server (node) and its devices, in rank order."""

    server_id: str
    devices: tuple[Device, ...]


@dataclass(frozen=True)
class RankTable:
    """A whole rank table; ``to_dict`` gives HCCL's JSON shape (every value a string)."""

    servers: tuple[Server, ...]

    @property
    def rank_size(self) -> int:
        return sum(len(server.devices) for server in self.servers)

    def to_dict(self) -> dict[str, object]:
        return {
            "version": VERSION,
            "server_count": str(len(self.servers)),
            "server_list": [
                {
                    "server_id": server.server_id,
                    "device": [
                        {
                            "device_id": str(d.device_id),
                            "device_ip": d.device_ip,
                            "rank_id": str(d.rank_id),
                        }
                        for d in server.devices
                    ],
                    "host_nic_ip": "reserve",
                }
                for server in self.servers
            ],
            "status": STATUS,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=4) + "\n"

    def summary(self) -> str:
        servers = ", ".join(f"{s.server_id} ({len(s.devices)})" for s in self.servers)
        return (
            f"rank table {VERSION}: {len(self.servers)} server(s), "
            f"{self.rank_size} rank(s): {servers}"
        )


def parse_device_ids(spec: str) -> list[int]:
    """``"0-7"``, ``"0,1,2,3"`` or ``"4-5,6,7"`` as a list of device ids."""
    ids: list[int] = []
    for part in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise RankTableError([f"devices: {spec!r} is not a list like 0-7 or 0,1,2,3"])
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise RankTableError([f"devices: range {part.strip()!r} runs backwards"])
        ids.extend(range(first, last + 1))
    return ids


def read_hccn_conf(text: str) -> dict[int, str]:
    """Device IPs from the ``address_N=IP`` lines of /etc/hccn.conf."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"\s*address_(\d+)\s*=\s*(\S+)\s*", line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def generate(server_ip: str, device_ids: Sequence[int], device_ips: Sequence[str]) -> RankTable:
    """A one-server table; device_ips[i] belongs to device_ids[i]. Validated."""
    if len(device_ips) != len(device_ids):
        raise RankTableError(
            [f"device ips: {len(device_ips)} given for {len(device_ids)} device(s)"]
        )
    pairs = enumerate(zip(device_ids, device_ips, strict=True))
    devices = tuple(Device(device_id, ip, rank) for rank, (device_id, ip) in pairs)
    table = RankTable((Server(server_ip, devices),))
    return validate(table.to_dict())


def generate_from_hccn(server_ip: str, device_ids: Sequence[int], hccn_conf: str) -> RankTable:
    """A one-server table with device IPs looked up in the text of /etc/hccn.conf."""
    addresses = read_hccn_conf(hccn_conf)
    missing = [str(d) for d in device_ids if d not in addresses]
    if missing:
        raise RankTableError([f"hccn.conf: no address_N line for device(s) {', '.join(missing)}"])
    return generate(server_ip, device_ids, [addresses[d] for d in device_ids])


def merge(tables: Iterable[RankTable]) -> RankTable:
    """Several tables as one, servers in the given order and ranks renumbered from 0. Validated."""
    servers: list[Server] = []
    rank = 0
    for table in tables:
        for server in table.servers:
            devices = []
            for device in server.devices:
                devices.append(Device(device.device_id, device.device_ip, rank))
                rank += 1
            servers.append(Server(server.server_id, tuple(devices)))
    return validate(RankTable(tuple(servers)).to_dict())


def example(devices_per_node: int, nnodes: int = 1) -> RankTable:
    """A well-formed table with placeholder addresses, for a template to ship.

    Real device IPs come from each node's /etc/hccn.conf (``generate --hccn-conf``).
    """
    servers = []
    for node in range(nnodes):
        server_ip = f"10.0.{node // 250}.{node % 250 + 1}"
        devices = tuple(
            Device(d, f"10.{100 + d}.{node // 250}.{node % 250 + 1}", node * devices_per_node + d)
            for d in range(devices_per_node)
        )
        servers.append(Server(server_ip, devices))
    return validate(RankTable(tuple(servers)).to_dict())


def _string(problems: list[str], where: str, value: object) -> str | None:
    if not isinstance(value, str):
        problems.append(f"{where}: must be a string (HCCL reads strings), got {json.dumps(value)}")
        return None
    return value


def _number(problems: list[str], where: str, value: object) -> int | None:
    text = _string(problems, where, value)
    if text is None:
        return None
    if not re.fullmatch(r"0|[1-9][0-9]*", text):
        problems.append(f"{where}: {text!r} is not a whole number")
        return None
    return int(text)


def _ip(problems: list[str], where: str, value: object) -> str | None:
    text = _string(problems, where, value)
    if text is None:
        return None
    try:
        ipaddress.ip_address(text)
    except ValueError:
        problems.append(f"{where}: {text!r} is not a valid IPv4 or IPv6 address")
        return None
    return text


def _check_devices(problems: list[str], where: str, ids: list[int]) -> None:
    if len(ids) not in DEVICES_PER_SERVER:
        problems.append(f"{where}: {len(ids)} devices; a server uses 1, 2, 4 or 8")
    elif len(ids) in (2, 4) and not any(set(ids) <= group for group in DEVICE_GROUPS):
        problems.append(
            f"{where}: devices {sorted(ids)} cross the 0-3 / 4-7 groups; 2 or 4 devices must sit "
            "inside one of them"
        )


def validate(data: object) -> RankTable:
    """Check a decoded rank table strictly; RankTableError lists every problem, one line each."""
    problems: list[str] = []
    if not isinstance(data, dict):
        raise RankTableError(["the rank table must be a JSON object"])
    if data.get("version") != VERSION:
        problems.append(f"version: must be {VERSION!r}, got {json.dumps(data.get('version'))}")
    if data.get("status") != STATUS:
        problems.append(f"status: must be {STATUS!r}, got {json.dumps(data.get('status'))}")
    server_list = data.get("server_list")
    if not isinstance(server_list, list) or not server_list:
        problems.append("server_list: must be a non-empty list of servers")
        raise RankTableError(problems)
    count = _number(problems, "server_count", data.get("server_count"))
    if count is not None and count != len(server_list):
        problems.append(f"server_count: says {count} but server_list has {len(server_list)}")

    servers: list[Server] = []
    server_ids: set[str] = set()
    device_ips: dict[str, str] = {}
    ranks: dict[int, str] = {}
    for s, server in enumerate(server_list):
        at = f"server_list[{s}]"
        if not isinstance(server, dict):
            problems.append(f"{at}: must be an object")
            continue
        server_id = _string(problems, f"{at}.server_id", server.get("server_id"))
        if server_id is not None:
            if server_id in server_ids:
                problems.append(f"{at}.server_id: {server_id!r} appears twice")
            server_ids.add(server_id)
        device_list = server.get("device")
        if not isinstance(device_list, list) or not device_list:
            problems.append(f"{at}.device: must be a non-empty list of devices")
            continue
        devices: list[Device] = []
        for d, device in enumerate(device_list):
            where = f"{at}.device[{d}]"
            if not isinstance(device, dict):
                problems.append(f"{where}: must be an object")
                continue
            device_id = _number(problems, f"{where}.device_id", device.get("device_id"))
            if device_id is not None and device_id > 7:
                problems.append(f"{where}.device_id: {device_id} is out of range 0-7")
            if device_id is not None and device_id in {x.device_id for x in devices}:
                problems.append(f"{where}.device_id: {device_id} appears twice on this server")
            ip = _ip(problems, f"{where}.device_ip", device.get("device_ip"))
            if ip is not None:
                if ip in device_ips:
                    problems.append(f"{where}.device_ip: {ip} is also used by {device_ips[ip]}")
                device_ips.setdefault(ip, where)
            rank = _number(problems, f"{where}.rank_id", device.get("rank_id"))
            if rank is not None:
                if rank in ranks:
                    problems.append(f"{where}.rank_id: {rank} is also used by {ranks[rank]}")
                ranks.setdefault(rank, where)
            if device_id is not None and ip is not None and rank is not None:
                devices.append(Device(device_id, ip, rank))
        _check_devices(problems, f"{at}.device", [x.device_id for x in devices])
        servers.append(Server(server_id or "", tuple(devices)))
    if ranks and sorted(ranks) != list(range(len(ranks))):
        missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
        problems.append(
            f"rank_id: must run 0..{len(ranks) - 1} without gaps; missing {missing[:8]}"
        )
    if problems:
        raise RankTableError(problems)
    return RankTable(tuple(servers))


def loads(text: str, source: str = "rank table") -> RankTable:
    """Parse and validate JSON text; a JSON error names its line and column."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RankTableError(
            [f"{source}: not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"]
        ) from err
    return validate(data)


def load(path: Path) -> RankTable:
    """Read, parse and validate a rank table file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise RankTableError([f"{path}: cannot read: {err.strerror}"]) from err
    return loads(text, str(path))


def main(argv: Sequence[str] | None = None) -> int:
    """``python rank_table.py check FILE`` / ``generate ...``: the script a cluster node runs."""
    parser = argparse.ArgumentParser(prog="rank_table.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate a rank table and print a summary")
    check.add_argument("file", type=Path)
    gen = commands.add_parser("generate", help="build a one-server table from /etc/hccn.conf")
    gen.add_argument("--server-ip", required=True)
    gen.add_argument("--devices", default="0-7")
    gen.add_argument("--hccn-conf", type=Path, default=Path("/etc/hccn.conf"))
    gen.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            print(load(args.file).summary())
        else:
            table = generate_from_hccn(
                args.server_ip, parse_device_ids(args.devices), args.hccn_conf.read_text()
            )
            args.output.write_text(table.dumps(), encoding="utf-8")
            print(f"wrote {args.output}: {table.summary()}")
    except RankTableError as err:
        for problem in err.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"error: {err.filename}: {err.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
