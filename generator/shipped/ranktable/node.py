"""One node's view of an HCCL rank table, for the launchers: which server is this host, where
the ranks meet, and which device id each process gives its framework.

Standard library only: generated Ascend projects carry this file as
scripts/ranktable_node.py beside scripts/rank_table.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Sequence

from generator.shipped.ranktable.model import RankTable, RankTableError, Server


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


@dataclass(frozen=True)
class Node:
    """This node's entry in a table: its index, its server, the job's size and its master
    (rank 0's server)."""

    index: int
    server: Server
    rank_size: int
    master: str
    note: str = ""  # what the launcher should say about how the entry was chosen


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
        if not hits and len(servers) == 1:
            # A one-server table is for the host it is given to (ModelZoo's 8p.json says
            # 127.0.0.1, a shipped example a placeholder): its ranks run and meet here.
            note = (
                f"the table's one server ({listed}) is not one of this host's addresses "
                f"({', '.join(addresses) or 'none found'}): its ranks run here"
            )
            return _node(table, 0, nproc, "127.0.0.1", note)
        if len(hits) != 1:
            what = "none" if not hits else "several"
            raise RankTableError(
                [
                    f"{what} of the table's servers ({listed}) is this host "
                    f"({', '.join(addresses) or 'no address found'}): pass --node-rank N"
                ]
            )
        index = hits[0]
    return _node(table, index, nproc, master(table))


def _node(table: RankTable, index: int, nproc: int | None, meet: str, note: str = "") -> Node:
    server = table.servers[index]
    if nproc is not None and nproc != len(server.devices):
        raise RankTableError(
            [
                f"server {server.server_id} has {len(server.devices)} device(s) in the table, "
                f"but --nproc is {nproc}"
            ]
        )
    return Node(index, server, table.rank_size, meet, note)


def master(table: RankTable) -> str:
    """The address of the server holding rank 0: torch's ranks meet at rank 0's store.

    An operator lists servers in its own order (Volcano: pods as placed), so rank 0 need
    not be on the first server, nor on the pod the operator calls the master.
    """
    holder = next(s for s in table.servers if any(d.rank_id == 0 for d in s.devices))
    # The store listens in rank 0's container: its address where the table gives one (a
    # ModelArts or MindCluster table whose containers are not on the host's network).
    return holder.container_ip or holder.addresses[0]


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


# --- Atlas A3: each device's SDID and super pod, as this node's npu-smi gives them ------------
# `npu-smi info -t spod-info -i N -c M` prints "SDID : 16777216", "Super Pod Size : 384",
# "Super Pod ID : 0" and "Server Index : 4" (hicann/shmem examples/rma_d2h_demo/README_en.md);
# the SDID is the device's super_device_id (CANN HCCL troubleshooting, "devices have same
# superDeviceId": "回显中的“SDID”即为superDeviceID"), the Super Pod ID what HCCL takes for its
# super pod without a table (CANN env reference, HCCL_LOGIC_SUPERPOD_ID). N is the NPU, M its
# die: an A3 NPU holds two devices (CANN HCCL user guide hcclug_000066), device_id = 2N + M
# (vllm-project/vllm-ascend examples/disaggregated_prefill_v1/gen_ranktable.py:
# device_id = card_id * chips_per_card + chip_id).
DIES_PER_NPU = 2
SPOD_COMMAND = re.compile(r"spod-info\s+-i\s+(\d+)\s+-c\s+(\d+)")
SPOD_VALUE = re.compile(r"\s*(SDID|Super Pod ID)\s*:\s*(\S+)\s*")
SpodInfo = Dict[int, Dict[str, str]]


def spod_command(device_id: int) -> str:
    """The npu-smi command that shows ``device_id``'s SDID and super pod."""
    npu, die = divmod(device_id, DIES_PER_NPU)
    return f"npu-smi info -t spod-info -i {npu} -c {die}"


def read_spod_info(text: str) -> SpodInfo:
    """Each device's "SDID" and "Super Pod ID" from recorded ``spod_command`` outputs, each
    after its command line (``for i in 0 .. 7; for c in 0 1: echo the command; run it``)."""
    found: SpodInfo = {}
    device: int | None = None
    for line in text.splitlines():
        command = SPOD_COMMAND.search(line)
        value = SPOD_VALUE.fullmatch(line)
        if command:
            device = int(command.group(1)) * DIES_PER_NPU + int(command.group(2))
        elif value and device is None:
            raise RankTableError(
                [
                    f"spod-info: {line.strip()!r} comes before any `npu-smi info -t spod-info "
                    "-i N -c M` line: record each device's command line above its output"
                ]
            )
        elif value and device is not None:
            found.setdefault(device, {})[value.group(1)] = value.group(2)
    return found


def query_spod_info(device_ids: Sequence[int]) -> str | None:
    """This node's ``spod_command`` outputs for the devices, each after its command line, as
    ``read_spod_info`` reads them; None where there is no npu-smi."""
    npu_smi = shutil.which("npu-smi") or shutil.which("/usr/local/bin/npu-smi")
    if npu_smi is None:
        return None
    recorded = []
    for device_id in device_ids:
        command = spod_command(device_id)
        try:
            done = subprocess.run(
                [npu_smi, *command.split()[1:]], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise RankTableError([f"{command}: {err}"]) from err
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
            raise RankTableError([f"{command}: exit {done.returncode}: {said[0]}"])
        recorded.append(f"{command}\n{done.stdout}")
    return "\n".join(recorded)


def super_ids(
    device_ids: Sequence[int], spod: SpodInfo, super_pod_id: str | None = None
) -> tuple[list[str], str]:
    """The devices' SDIDs and their super pod's id (``super_pod_id``, else the one npu-smi
    gives them all). RankTableError (one line) when one is missing."""
    missing = [d for d in device_ids if "SDID" not in spod.get(d, {})]
    if missing:
        raise RankTableError(
            [
                f"spod-info: no SDID for device(s) {_ids(missing)} (device {missing[0]}'s: "
                f"`{spod_command(missing[0])}`)"
            ]
        )
    if super_pod_id is None:
        pods = sorted({spod[d]["Super Pod ID"] for d in device_ids if "Super Pod ID" in spod[d]})
        if len(pods) != 1:
            said = f"super pod ids {', '.join(pods)}" if pods else "no Super Pod ID line"
            raise RankTableError([f"spod-info: the devices give {said}: pass --super-pod-id"])
        super_pod_id = pods[0]
    return [spod[d]["SDID"] for d in device_ids], super_pod_id


def read_hccn_conf(text: str) -> dict:
    """Device IPs from the ``address_N=IP`` lines of /etc/hccn.conf."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(r"\s*address_(\d+)\s*=\s*(\S+)\s*", line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found
