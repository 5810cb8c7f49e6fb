"""HCCL rank tables: build, merge, convert to version 1.0, check, and find one node's ranks.

Standard library only and free of other generator imports but its siblings
(ranktable_model, ranktable_rules, ranktable_node): the same files are copied into
generated Ascend projects as scripts/rank_table.py and scripts/ranktable_*.py, so
that launch scripts on a cluster node check a table, build one from /etc/hccn.conf
and read their ranks with the code `gen ranktable` uses.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Sequence

from generator.shipped.ranktable.model import Device, RankTable, RankTableError, Server, SuperPod
from generator.shipped.ranktable.node import (
    Node,
    find_node,
    local_indexes,
    master,
    parse_device_ids,
    query_spod_info,
    read_hccn_conf,
    read_spod_info,
    super_ids,
    visible_devices,
)
from generator.shipped.ranktable.rules import A3_CHIP, CHIPS, DEFAULT_CHIP, validate

__all__ = [
    "A3_CHIP",
    "CHIPS",
    "DEFAULT_CHIP",
    "Device",
    "Node",
    "RankTable",
    "RankTableError",
    "Server",
    "SuperPod",
    "a3_ids",
    "find_node",
    "local_indexes",
    "master",
    "read_hccn_conf",
    "read_spod_info",
    "validate",
    "visible_devices",
]


def generate(
    server_ip: str,
    device_ids: Sequence[int],
    device_ips: Sequence[str],
    chip: str = DEFAULT_CHIP,
    super_device_ids: Sequence[str] | None = None,
    super_pod_id: str | None = None,
) -> RankTable:
    """A one-server table; device_ips[i] (and super_device_ids[i]) belongs to device_ids[i].
    Given SDIDs (and the super pod), it is version 1.2, the server alone in that pod (merge
    joins pods of one id), else 1.0. Validated for ``chip``."""
    try:
        ipaddress.ip_address(server_ip)
    except ValueError:
        raise RankTableError(
            [
                f"--server-ip {server_ip!r} is not an IPv4 or IPv6 address: the launchers find "
                "their node's entry by it (use the host's address, as `hostname -I` shows)"
            ]
        ) from None
    sdids = list(super_device_ids) if super_device_ids is not None else [None] * len(device_ids)
    for what, given in (("device ips", device_ips), ("super device ids", sdids)):
        if len(given) != len(device_ids):
            raise RankTableError([f"{what}: {len(given)} given for {len(device_ids)} device(s)"])
    rows = enumerate(zip(device_ids, device_ips, sdids))
    devices = tuple(Device(d, ip, rank, sdid) for rank, (d, ip, sdid) in rows)
    if super_device_ids is None:
        return validate(RankTable((Server(server_ip, devices),)).to_dict(), chip)
    pods = (SuperPod(super_pod_id or "", (server_ip,)),)  # no id: check names the field
    return validate(RankTable((Server(server_ip, devices),), "1.2", pods).to_dict(), chip)


def generate_from_hccn(
    server_ip: str,
    device_ids: Sequence[int],
    hccn_conf: str,
    chip: str = DEFAULT_CHIP,
    super_device_ids: Sequence[str] | None = None,
    super_pod_id: str | None = None,
) -> RankTable:
    """A one-server table with device IPs looked up in the text of /etc/hccn.conf."""
    addresses = read_hccn_conf(hccn_conf)
    missing = [str(d) for d in device_ids if d not in addresses]
    if missing:
        raise RankTableError([f"hccn.conf: no address_N line for device(s) {', '.join(missing)}"])
    ips = [addresses[d] for d in device_ids]
    return generate(server_ip, device_ids, ips, chip, super_device_ids, super_pod_id)


NO_SDIDS = (
    "super_device_id: a 910_93 table is version 1.2 (A3 super pods), which needs each "
    "device's SDID, and there is no npu-smi here: give --spod-info FILE (each device's "
    "`npu-smi info -t spod-info -i N -c M` after its command line, recorded on the node), "
    "or --version 1.0 for A3 servers outside a super pod"
)


def a3_ids(
    device_ids: Sequence[int],
    chip: str,
    version: str | None = None,
    spod_info: str | None = None,
    super_pod_id: str | None = None,
) -> tuple[list[str] | None, str | None]:
    """What ``generate`` needs for ``version`` (default: 1.2 on the 910_93, else 1.0): for
    1.2 the devices' SDIDs and super pod, from ``spod_info`` (recorded npu-smi output), else
    from this node's npu-smi; (None, None) for 1.0. RankTableError says what is missing."""
    version = version or ("1.2" if chip == A3_CHIP else "1.0")
    if version == "1.0":
        return None, None
    if chip != A3_CHIP:
        raise RankTableError(
            [f"--version 1.2 is the Atlas A3 super-pod table (chip {A3_CHIP}), not {chip}'s"]
        )
    text = spod_info if spod_info is not None else query_spod_info(device_ids)
    if text is None:
        raise RankTableError([NO_SDIDS])
    return super_ids(device_ids, read_spod_info(text), super_pod_id)


def merge(tables: Iterable[RankTable], chip: str = DEFAULT_CHIP) -> RankTable:
    """Several tables as one, servers in the given order and ranks renumbered from 0. Each
    server keeps its host and pod addresses and its devices' super_device_id; super pods of
    the same id are one pod (A3: each node's table names the pod it is in)."""
    tables = list(tables)
    versions = sorted({table.version for table in tables})
    if len(versions) > 1:
        raise RankTableError(
            [f"tables of versions {' and '.join(versions)} cannot be merged: convert them first"]
        )
    servers: list[Server] = []
    pods: dict[str, list[str]] = {}
    rank = 0
    for table in tables:
        for server in table.servers:
            devices = []
            for d in server.devices:
                devices.append(Device(d.device_id, d.device_ip, rank, d.super_device_id))
                rank += 1
            servers.append(replace(server, devices=tuple(devices)))
        for pod in table.super_pods:
            pods.setdefault(pod.super_pod_id, []).extend(pod.server_ids)
    super_pods = tuple(SuperPod(pod_id, tuple(ids)) for pod_id, ids in pods.items())
    merged = RankTable(tuple(servers), versions[0] if versions else "1.0", super_pods)
    return validate(merged.to_dict(), chip)


def convert(table: RankTable, version: str | None = None) -> RankTable:
    """The same job in HCCL's server_list form: a group_list or MindCluster table becomes
    version 1.0; a 1.2 table (A3) stays 1.2, its super pods and super_device_ids kept, unless
    ``version`` is "1.0" (A3 servers outside super-pod mode read 1.0 and ignore them).

    Each server is named by its address (MindCluster's host_ip where it has one), in the
    super pods too; its container_ip is kept.
    """
    version = version or table.version
    names = {server.server_id: server.host_ip or server.server_id for server in table.servers}
    servers = tuple(
        Server(
            names[server.server_id],
            tuple(
                Device(
                    d.device_id,
                    d.device_ip,
                    d.rank_id,
                    d.super_device_id if version == "1.2" else None,
                )
                for d in server.devices
            ),
            server.host_ip,
            server.container_ip,
        )
        for server in table.servers
    )
    pods = tuple(
        SuperPod(pod.super_pod_id, tuple(names[i] for i in pod.server_ids))
        for pod in table.super_pods
    )
    return RankTable(servers, version, pods if version == "1.2" else ())


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rank_table.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate a rank table and print a summary")
    check.add_argument("file", type=Path)
    gen = commands.add_parser("generate", help="build a one-server table from /etc/hccn.conf")
    gen.add_argument("--server-ip", required=True)
    gen.add_argument("--devices", help="0-7 (an A3's 16: 0-15), 0,1,2,3 ...")
    gen.add_argument("--hccn-conf", type=Path, default=Path("/etc/hccn.conf"))
    gen.add_argument("--version", choices=["1.0", "1.2"], help="1.2 on the 910_93, else 1.0")
    gen.add_argument("--spod-info", type=Path, help="1.2: each device's npu-smi spod-info")
    gen.add_argument("--super-pod-id", help="1.2: the super pod (default: npu-smi's)")
    gen.add_argument("-o", "--output", type=Path, required=True)
    node = commands.add_parser("node", help="print this node's ranks and devices")
    node.add_argument("file", type=Path)
    node.add_argument("--node-rank", type=int)
    node.add_argument("--nproc", type=int)
    node.add_argument("--address", action="append", default=[], help="this host's (repeat)")
    node.add_argument("--converted", type=Path, help="where a group_list table is rewritten")
    local = commands.add_parser("local", help="build a table for this host's first N devices")
    local.add_argument("--nproc", type=int, required=True)
    local.add_argument("--hccn-conf", type=Path, default=Path("/etc/hccn.conf"))
    local.add_argument("--address", action="append", default=[], help="this host's (repeat)")
    local.add_argument("-o", "--output", type=Path, required=True)
    for command in (check, gen, node, local):
        command.add_argument("--chip", choices=sorted(CHIPS), default=DEFAULT_CHIP)
    return parser


def _print_node(args: argparse.Namespace) -> None:
    """Lines a launcher reads: NOTE text, TABLE path (a group_list table rewritten as 1.0),
    RANK_SIZE n, NODE index address, MASTER address, and RANK r device index: the table's
    (physical) device and the id the process uses."""
    addresses = [a for a in args.address if a]
    table = load(args.file, args.chip)
    found = find_node(table, args.node_rank, addresses, args.nproc)
    if args.converted and '"group_list"' in args.file.read_text(encoding="utf-8"):
        # HCCL numbers a group_list's ranks its own way (server_id order, then device):
        # the ranks are given the table they were numbered from.
        args.converted.parent.mkdir(parents=True, exist_ok=True)
        args.converted.write_text(convert(table).dumps(), encoding="utf-8")
        print(f"TABLE {args.converted}")
    devices = found.server.devices
    indexes = local_indexes([d.device_id for d in devices], visible_devices(os.environ))
    if found.note:
        print(f"NOTE {found.note}")
    print(f"RANK_SIZE {found.rank_size}")
    print(f"NODE {found.index} {found.server.addresses[0]}")
    print(f"MASTER {found.master}")
    for device, index in zip(devices, indexes):
        print(f"RANK {device.rank_id} {device.device_id} {index}")


def local_table(
    addresses: Sequence[str], nproc: int, hccn_conf: str, chip: str = DEFAULT_CHIP
) -> RankTable:
    """A one-server table for this host: its first address that is not loopback, the first
    ``nproc`` devices it holds (0 to nproc-1 where it cannot tell), their addresses from
    the text of /etc/hccn.conf. Version 1.0 on an A3 too: one server's ranks need no super
    pod (A3 typical networking reads 1.0, CANN HCCL user guide hcclug_000066)."""
    server_ip = next((a for a in addresses if a and not a.startswith("127.")), "127.0.0.1")
    held = visible_devices(os.environ) or list(range(nproc))
    if len(held) < nproc:
        raise RankTableError([f"--nproc {nproc}: this host holds devices {held} only"])
    return generate_from_hccn(server_ip, held[:nproc], hccn_conf, chip)


def _write_local(args: argparse.Namespace) -> None:
    try:
        text = args.hccn_conf.read_text(encoding="utf-8")
    except OSError as err:
        raise RankTableError(
            [f"{args.hccn_conf}: {err.strerror} (it lists each device's address_N)"]
        ) from err
    table = local_table(args.address, args.nproc, text, args.chip)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(table.dumps(), encoding="utf-8")
    print(f"wrote {args.output} for this host: {table.summary()}")


def _write_generated(args: argparse.Namespace) -> None:
    ids = parse_device_ids(args.devices or ("0-15" if args.chip == A3_CHIP else "0-7"))
    spod = args.spod_info.read_text(encoding="utf-8") if args.spod_info else None
    sdids, pod = a3_ids(ids, args.chip, args.version, spod, args.super_pod_id)
    text = args.hccn_conf.read_text(encoding="utf-8")
    table = generate_from_hccn(args.server_ip, ids, text, args.chip, sdids, pod)
    args.output.write_text(table.dumps(), encoding="utf-8")
    print(f"wrote {args.output}: {table.summary()}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python rank_table.py check|generate|node ...``: the script a cluster node runs."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "check":
            print(load(args.file, args.chip).summary())
        elif args.command == "node":
            _print_node(args)
        elif args.command == "local":
            _write_local(args)
        else:
            _write_generated(args)
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
