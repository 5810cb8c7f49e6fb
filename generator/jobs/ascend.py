"""What an Ascend job needs besides its chip: the super-pod block (sp-block) ascend-for-volcano
accepts on A3 super pods, a port of the job's own on the host's network, and the CPU label of
its nodes (host-arch)."""

from __future__ import annotations

import hashlib

from generator.errors import OptionError

# --- sp-block --------------------------------------------------------------------------------
# ascend-for-volcano's super-pod handler serves the nodes of these accelerator types, each node
# holding this many NPUs (Ascend/mind-cluster: component/ascend-for-volcano/internal/npu/
# factory.go, superpod.New). The other handlers never read sp-block, and on other nodes it
# would switch Ascend Operator's rank table to v1.2 (component/ascend-operator/pkg/ranktable/
# factory.go, useV1dot2): those jobs get none.
SUPER_POD_NODE_NPUS = {"module-a3-16-super-pod": 16, "module-a3-8-super-pod": 8}
# The nodes of one super pod: the scheduler's super-pod-size, 48 unless its config says
# otherwise (component/ascend-for-volcano/plugin/const.go, defaultSuperPodSize).
SUPER_POD_NODES = 48
# Where the rules below come from: ValidNPUJob there runs checkSpBlock, then checkRequireNPU
# and CheckTaskNPU; docs/en/scheduling/usage/basic_scheduling/01_affinity_scheduling/
# 03_ascend_ai_processor_based_affinity.md ("Atlas 900 A3 SuperPoD") says the same in words.
SP_BLOCK_SOURCE = (
    "Ascend/mind-cluster: component/ascend-for-volcano/internal/npu/ascend910/ascend910a3/"
    "superpod/frame.go"
)


def sp_block(accelerator_type: str, nnodes: int, devices: int, given: int | None) -> int:
    """The job's sp-block annotation (NPUs per logical super pod; 0: none), as ascend-for-volcano's
    super-pod handler accepts it (SP_BLOCK_SOURCE), or the one line saying why it would not."""
    node = SUPER_POD_NODE_NPUS.get(accelerator_type)
    if node is None:
        if given is not None:
            raise OptionError(
                "--sp-block",
                "is for Atlas A3 super-pod jobs (--chip 910_93 on nodes labelled "
                f"accelerator-type={' or '.join(SUPER_POD_NODE_NPUS)}); leave it out",
            )
        return 0
    if nnodes == 1:
        return _one_pod(accelerator_type, node, devices, given)
    if devices != node:
        # CheckTaskNPU: every pod of a distributed super-pod job requests the whole node.
        raise OptionError(
            "--devices-per-node",
            f"ascend-for-volcano takes a super-pod job of {nnodes} pods only when each holds a "
            f"whole node ({node} NPUs on {accelerator_type}), not {devices}; pass "
            f"--devices-per-node {node}, or --nnodes 1",
        )
    return _distributed(node, nnodes, given)


def _one_pod(accelerator_type: str, node: int, devices: int, given: int | None) -> int:
    """checkRequireNPU, one pod: 1 NPU or an even number up to the node's, and sp-block equal
    to them (checkSpBlock takes an sp-block below a node's NPUs only then)."""
    if devices != 1 and (devices % 2 or devices > node):
        raise OptionError(
            "--devices-per-node",
            f"{devices} is refused by ascend-for-volcano: a one-pod job on {accelerator_type} "
            f"nodes takes 1 NPU or an even number up to {node}",
        )
    if given is not None and given != devices:
        raise OptionError(
            "--sp-block",
            f"{given} is refused by ascend-for-volcano: a one-pod super-pod job's sp-block is "
            f"its NPUs ({devices}); leave --sp-block out",
        )
    return devices


def _distributed(node: int, nnodes: int, given: int | None) -> int:
    """checkSpBlock and checkRequireNPU, several pods: sp-block a multiple of a node's NPUs, at
    most a super pod's nodes, dividing the job's NPUs. By default the whole job is one logical
    super pod, on one HCCS fabric; logical super pods talk to each other over RoCE."""
    total, most = nnodes * node, SUPER_POD_NODES * node
    # The largest valid block: the most nodes, up to a super pod, that divide the job's.
    fits = node * max(k for k in range(1, min(nnodes, SUPER_POD_NODES) + 1) if nnodes % k == 0)
    if given is None:
        if total > most:
            raise OptionError(
                "--nnodes",
                f"{nnodes} nodes x {node} NPUs make sp-block {total}, more than one super pod "
                f"holds ({SUPER_POD_NODES} nodes, {most} NPUs), and ascend-for-volcano refuses "
                f"it; pass --sp-block {fits} (logical super pods of {fits // node} nodes, linked "
                f"over RoCE), or at most {SUPER_POD_NODES} nodes",
            )
        return total
    if given <= 0 or given % node or total % given or given > most:
        raise OptionError(
            "--sp-block",
            f"{given} is refused by ascend-for-volcano: use a multiple of {node} that divides "
            f"the job's {total} NPUs, at most {most} ({SUPER_POD_NODES} nodes of a super pod), "
            f"e.g. {fits}",
        )
    return given


# --- the port --------------------------------------------------------------------------------
# Ascend pods run on the host's network (pod.placement), so two jobs with a pod on one node
# share its ports: each job listens on a port of its own, from a hash of its namespace and name
# into PORTS, below Kubernetes' NodePorts (30000-32767) and Linux's ephemeral ports
# (32768-60999), and HCCL's (60000 and up). Two jobs meet on one port 1 time in 10000: --port.
PORTS = range(20000, 30000)
PORT_RANGE = (1024, 65535)
# What pods off the host's network keep: each pod has its own ports (training-operator's and
# Volcano's pytorch plugin's default).
POD_PORT = 23456


def job_port(name: str, namespace: str | None) -> int:
    """The port of job ``namespace/name``: the same on every render, spread over PORTS."""
    digest = hashlib.sha256(f"{namespace or ''}/{name}".encode()).digest()
    return PORTS.start + int.from_bytes(digest[:8], "big") % len(PORTS)


def port(given: int | None, host_network: bool, name: str, namespace: str | None) -> int:
    """The rendezvous port: --port's, else the job's own on the host's network, else POD_PORT."""
    if given is None:
        return job_port(name, namespace) if host_network else POD_PORT
    if not host_network:
        raise OptionError(
            "--port",
            "is for Ascend jobs, whose pods share their node's network; a cuda pod's ports "
            "are its own",
        )
    low, high = PORT_RANGE
    if not low <= given <= high:
        raise OptionError("--port", f"{given} is out of range; use a number from {low} to {high}")
    return given


# --- host-arch -------------------------------------------------------------------------------
# The node label of the servers' CPU that MindCluster's install guide sets and its examples
# select (Ascend/mind-cluster: docs/en/scheduling/api/k8s.md, Table 4: host-arch, huawei-arm or
# huawei-x86; docs/en/scheduling/api/ascend_job.md: nodeSelector host-arch: huawei-arm).
HOST_ARCH = "host-arch"
HOST_ARCH_LABELS = {"aarch64": "huawei-arm", "x86_64": "huawei-x86"}
