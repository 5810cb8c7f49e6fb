"""HCCL rank tables: build, merge, convert to version 1.0, check, and find one node's ranks.

Standard library only and free of other generator imports but its rules: the
same file is copied into generated Ascend projects as scripts/rank_table.py
(beside scripts/ranktable_rules.py), so that launch scripts on a cluster node
check a table, build one from /etc/hccn.conf and read their ranks with the code
`gen ranktable` uses.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from generator.ranktable_rules import (
    CHIPS,
    DEFAULT_CHIP,
    Device,
    RankTable,
    RankTableError,
    Server,
    validate,
)

__all__ = ["RankTable", "RankTableError", "Server", "Device", "validate", "CHIPS", "DEFAULT_CHIP"]


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


def read_hccn_conf(text: str) -> dict:
    """Device IPs from the ``address_N=IP`` lines of /etc/hccn.conf."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(r"\s*address_(\d+)\s*=\s*(\S+)\s*", line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def generate(
    server_ip: str, device_ids: Sequence[int], device_ips: Sequence[str], chip: str = DEFAULT_CHIP
) -> RankTable:
    """A one-server table; device_ips[i] belongs to device_ids[i]. Validated for ``chip``."""
    try:
        ipaddress.ip_address(server_ip)
    except ValueError:
        raise RankTableError(
            [
                f"--server-ip {server_ip!r} is not an IPv4 or IPv6 address: the launchers find "
                "their node's entry by it (use the host's address, as `hostname -I` shows)"
            ]
        ) from None
    if len(device_ips) != len(device_ids):
        raise RankTableError(
            [f"device ips: {len(device_ips)} given for {len(device_ids)} device(s)"]
        )
    pairs = enumerate(zip(device_ids, device_ips))
    devices = tuple(Device(device_id, ip, rank) for rank, (device_id, ip) in pairs)
    return validate(RankTable((Server(server_ip, devices),)).to_dict(), chip)


def generate_from_hccn(
    server_ip: str, device_ids: Sequence[int], hccn_conf: str, chip: str = DEFAULT_CHIP
) -> RankTable:
    """A one-server table with device IPs looked up in the text of /etc/hccn.conf."""
    addresses = read_hccn_conf(hccn_conf)
    missing = [str(d) for d in device_ids if d not in addresses]
    if missing:
        raise RankTableError([f"hccn.conf: no address_N line for device(s) {', '.join(missing)}"])
    return generate(server_ip, device_ids, [addresses[d] for d in device_ids], chip)


def merge(tables: Iterable[RankTable], chip: str = DEFAULT_CHIP) -> RankTable:
    """Several tables as one, servers in the given order and ranks renumbered from 0."""
    servers: list[Server] = []
    rank = 0
    for table in tables:
        for server in table.servers:
            devices = []
            for device in server.devices:
                devices.append(Device(device.device_id, device.device_ip, rank))
                rank += 1
            servers.append(Server(server.server_id, tuple(devices)))
    return validate(RankTable(tuple(servers)).to_dict(), chip)


def convert(table: RankTable) -> RankTable:
    """The same job as a version 1.0 table: what every CANN release and MindSpore read.

    Each server is named by its address (MindCluster's host_ip where it has one);
    A3's super_device_id and super_pod_list are dropped.
    """
    servers = tuple(
        Server(
            server.host_ip or server.server_id,
            tuple(Device(d.device_id, d.device_ip, d.rank_id) for d in server.devices),
        )
        for server in table.servers
    )
    return RankTable(servers)


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


def loads(text: str, source: str = "rank table", chip: str = DEFAULT_CHIP) -> RankTable:
    """Parse and validate JSON text; a JSON error names its line and column."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RankTableError(
            [f"{source}: not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"]
        ) from err
    return validate(data, chip)


def load(path: Path, chip: str = DEFAULT_CHIP) -> RankTable:
    """Read, parse and validate a rank table file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise RankTableError([f"{path}: cannot read: {err.strerror}"]) from err
    return loads(text, str(path), chip)


# --- one node's view, for the launchers -----------------------------------------------------
@dataclass(frozen=True)
class Node:
    """This node's entry in a table: its index, its server, the job's size and its master
    (rank 0's server)."""

    index: int
    server: Server
    rank_size: int
    master: str


def find_node(
    table: RankTable,
    node_rank: int | None = None,
    addresses: Sequence[str] = (),
    nproc: int | None = None,
) -> Node:
    """The server entry of this node: server_list[node_rank], else the one listing one of
    ``addresses``. RankTableError (one line) when none or several fit, or when its device
    count is not ``nproc``."""
    servers = table.servers
    if node_rank is not None:
        if not 0 <= node_rank < len(servers):
            raise RankTableError(
                [f"--node-rank {node_rank}: the table numbers its servers 0-{len(servers) - 1}"]
            )
        index = node_rank
    else:
        hits = [i for i, s in enumerate(servers) if set(s.addresses) & set(addresses)]
        listed = ", ".join(s.addresses[0] for s in servers)
        if len(hits) != 1:
            what = "none" if not hits else "several"
            raise RankTableError(
                [
                    f"{what} of the table's servers ({listed}) is this host "
                    f"({', '.join(addresses) or 'no address found'}): pass --node-rank N"
                ]
            )
        index = hits[0]
    server = servers[index]
    if nproc is not None and nproc != len(server.devices):
        raise RankTableError(
            [
                f"server {server.server_id} has {len(server.devices)} device(s) in the table, "
                f"but --nproc is {nproc}"
            ]
        )
    return Node(index, server, table.rank_size, master(table))


def master(table: RankTable) -> str:
    """The address of the server holding rank 0: torch's ranks meet at rank 0's store.

    An operator lists servers in its own order (Volcano: pods as placed), so rank 0 need
    not be on the first server, nor on the pod the operator calls the master.
    """
    holder = next(s for s in table.servers if any(d.rank_id == 0 for d in s.devices))
    return holder.addresses[0]


# --- device numbering: the table's ids are physical, a process's are local ------------------
# HCCL's device_id is the physical id, the N of the host's /dev/davinciN (CANN HCCL user
# guide, rank table configuration: "device_id: 处理器的物理ID ... ls /dev/davinci*"). A process
# sets its device by logical id, 0 to N-1 over the devices its container holds
# (ASCEND_DEVICE_ID, CANN environment variable reference envref_07_0027: "逻辑ID ...
# N为当前物理机/虚拟机/容器内的设备总数"); on bare metal the two are the same. The Ascend
# docker runtime takes physical ids in ASCEND_VISIBLE_DEVICES and mounts /dev/davinciN under
# its own name (ascend-docker-runtime runtime/main.go), as `docker run --device` does, so
# a container given devices 4-7 sees /dev/davinci4-7 and numbers them 0-3 (MindCluster's
# train_start.sh exports DEVICE_ID=${i}, the local index; its ClusterD records
# device_logical_id as the position among the pod's sorted devices).
VISIBLE_ENV = "ASCEND_VISIBLE_DEVICES"
DAVINCI = re.compile(r"davinci(\d+)")


def visible_devices(env: Mapping[str, str], dev: Path = Path("/dev")) -> list[int] | None:
    """The physical ids of the NPUs this host or container holds, ascending: the Ascend
    docker runtime's ASCEND_VISIBLE_DEVICES (0-3,6 or Ascend910-4 forms), else the
    /dev/davinciN nodes; None where neither says (no NPU here: ids are taken as they are)."""
    listed = env.get(VISIBLE_ENV, "").strip()
    if listed:
        tails = [
            re.sub(r"^[A-Za-z][A-Za-z0-9]*-(?=\d)", "", part.strip()) for part in listed.split(",")
        ]
        try:
            return sorted(set(parse_device_ids(",".join(tails))))
        except RankTableError:
            pass  # "all", names we cannot read: the device nodes say
    found = [int(m.group(1)) for p in dev.glob("davinci*") if (m := DAVINCI.fullmatch(p.name))]
    return sorted(found) or None


def local_indexes(physical: Sequence[int], visible: list[int] | None) -> list[int]:
    """The id each process gives its framework for the table's ``physical`` devices: the
    position among the ``visible`` ones (the same id on bare metal). RankTableError (one
    line) when the table names a device this container does not hold."""
    if visible is None:
        return list(physical)
    missing = [d for d in physical if d not in visible]
    if missing:
        raise RankTableError(
            [
                f"the table puts this node's ranks on devices {_ids(physical)}, but devices "
                f"{_ids(missing)} are not here (this host or container holds {_ids(visible)}: "
                f"{VISIBLE_ENV} or /dev/davinci*); give the job those devices, or a table "
                "for these"
            ]
        )
    return [visible.index(d) for d in physical]


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rank_table.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate a rank table and print a summary")
    check.add_argument("file", type=Path)
    gen = commands.add_parser("generate", help="build a one-server table from /etc/hccn.conf")
    gen.add_argument("--server-ip", required=True)
    gen.add_argument("--devices", default="0-7")
    gen.add_argument("--hccn-conf", type=Path, default=Path("/etc/hccn.conf"))
    gen.add_argument("-o", "--output", type=Path, required=True)
    node = commands.add_parser("node", help="print this node's ranks and devices")
    node.add_argument("file", type=Path)
    node.add_argument("--node-rank", type=int)
    node.add_argument("--nproc", type=int)
    node.add_argument("--address", action="append", default=[], help="this host's (repeat)")
    for command in (check, gen, node):
        command.add_argument("--chip", choices=sorted(CHIPS), default=DEFAULT_CHIP)
    return parser


def _print_node(args: argparse.Namespace) -> None:
    """Lines a launcher reads: RANK_SIZE n, NODE index address, MASTER address, and
    RANK r device index: the table's (physical) device and the id the process uses."""
    addresses = [a for a in args.address if a]
    found = find_node(load(args.file, args.chip), args.node_rank, addresses, args.nproc)
    devices = found.server.devices
    indexes = local_indexes([d.device_id for d in devices], visible_devices(os.environ))
    print(f"RANK_SIZE {found.rank_size}")
    print(f"NODE {found.index} {found.server.addresses[0]}")
    print(f"MASTER {found.master}")
    for device, index in zip(devices, indexes):
        print(f"RANK {device.rank_id} {device.device_id} {index}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python rank_table.py check|generate|node ...``: the script a cluster node runs."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "check":
            print(load(args.file, args.chip).summary())
        elif args.command == "node":
            _print_node(args)
        else:
            ids = parse_device_ids(args.devices)
            table = generate_from_hccn(args.server_ip, ids, args.hccn_conf.read_text(), args.chip)
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
