"""What each operator gives the pods of a rendered manifest, written from the operators' own
sources (each function names its file), not from the project's scripts/operators.py: the
variables it injects, the host names its Services give, and on Ascend the rank table.

Pods are two hosts (tests/integration/netns.py): pod 0 is the leader (master, scheduler,
node-0-0), pod 1 the worker. A Service's ClusterIP is stood in for by its pod's address,
which is what it routes to (the MindCluster kinds run on the host's network).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator.shipped.ranktable import tables as ranktable

Doc = dict[str, Any]
# Fixed ports are safe: each pod is a host of its own (a network namespace).
TRAINER_PORT = "29500"  # kubeflow/trainer pkg/constants/constants.go ContainerTrainerPort


@dataclass(frozen=True)
class Pod:
    """One pod: its container as rendered, what the operator injects, its DNS name."""

    container: Doc
    injected: dict[str, str]
    dns_name: str = ""


def pods(docs: list[Doc], addresses: tuple[str, str]) -> list[Pod]:
    """The two pods of ``docs`` (a job of 2 nodes) with their operator's environment."""
    job = docs[-1]
    return BUILDERS[job["kind"]](docs, job, addresses)


def _ports(container: Doc) -> dict[str, str]:
    return {p["name"]: str(p["containerPort"]) for p in container.get("ports", [])}


def _trainjob(docs: list[Doc], job: Doc, addresses: tuple[str, str]) -> list[Pod]:
    """kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go: PET_* into the "node"
    container; PET_NODE_RANK is the Job completion index, the master node-0-0's FQDN."""
    name, trainer = job["metadata"]["name"], job["spec"]["trainer"]
    container = {"name": "node", "command": trainer["command"], "env": trainer.get("env", [])}
    found = []
    for index in range(trainer["numNodes"]):
        injected = {
            "PET_NNODES": str(trainer["numNodes"]),
            "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"]),
            "PET_NODE_RANK": str(index),
            "PET_MASTER_ADDR": f"{name}-node-0-0.{name}",
            "PET_MASTER_PORT": TRAINER_PORT,
        }
        found.append(Pod(container, injected, f"{name}-node-0-{index}.{name}"))
    return found


def _pytorchjob(docs: list[Doc], job: Doc, addresses: tuple[str, str]) -> list[Pod]:
    """training-operator v1.9 pkg/controller.v1/pytorch/envvar.go and master.go: the master
    replica's Service name and port, WORLD_SIZE = pods x nprocPerNode, RANK = the pod's."""
    name, spec = job["metadata"]["name"], job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    total = sum(r["replicas"] for r in replicas.values())
    nproc = spec["nprocPerNode"]
    master = replicas["Master"]["template"]["spec"]["containers"][0]
    port = _ports(master)["pytorchjob-port"]
    found = []
    for kind, replica in replicas.items():
        container = replica["template"]["spec"]["containers"][0]
        for index in range(replica["replicas"]):
            rank = index + (1 if kind == "Worker" else 0)
            injected = {
                "PYTHONUNBUFFERED": "1",
                "MASTER_ADDR": f"{name}-master-0",
                "MASTER_PORT": port,
                "WORLD_SIZE": str(total * int(nproc)),
                "RANK": str(rank),
                "PET_MASTER_ADDR": f"{name}-master-0",
                "PET_MASTER_PORT": port,
                "PET_NODE_RANK": str(rank),
                "PET_NPROC_PER_NODE": nproc,
                "PET_NNODES": str(total),
            }
            found.append(Pod(container, injected, f"{name}-{kind.lower()}-{index}"))
    return found


def _volcano(docs: list[Doc], job: Doc, addresses: tuple[str, str]) -> list[Pod]:
    """volcano pkg/controllers/job/plugins/distributed-framework/pytorch/pytorch.go: the
    master task's pod FQDN (svc plugin), --port, WORLD_SIZE = pods, RANK = master 0, worker i+1."""
    name, spec = job["metadata"]["name"], job["spec"]
    port = next(a for a in spec["plugins"]["pytorch"] if a.startswith("--port="))
    total = sum(t["replicas"] for t in spec["tasks"])
    found = []
    for task in spec["tasks"]:
        container = task["template"]["spec"]["containers"][0]
        for index in range(task["replicas"]):
            rank = 0 if task["name"] == "master" else index + 1
            injected = {
                "MASTER_ADDR": f"{name}-master-0.{name}",
                "MASTER_PORT": port.removeprefix("--port="),
                "WORLD_SIZE": str(total),
                "RANK": str(rank),
            }
            found.append(Pod(container, injected, f"{name}-{task['name']}-{index}.{name}"))
    return found


def _ascendjob(docs: list[Doc], job: Doc, addresses: tuple[str, str]) -> list[Pod]:
    """Ascend/mind-cluster component/ascend-operator/pkg/controllers/v1/env.go: the leader
    holds NPUs too, so pod ranks run leader 0, workers 1..; WORLD_SIZE and MS_WORKER_NUM
    count NPUs; LOCAL_RANK lists the pod's; the leader Service's ClusterIP and port."""
    spec, framework = job["spec"], job["metadata"]["labels"]["framework"]
    replicas = spec["replicaSpecs"]
    leader_kind = next(iter(replicas))
    leader = replicas[leader_kind]["template"]["spec"]["containers"][0]
    port = _ports(leader)["ascendjob-port"]
    total_pods = sum(r["replicas"] for r in replicas.values())
    found: list[Pod] = []
    for kind, replica in replicas.items():
        container = replica["template"]["spec"]["containers"][0]
        npus = container["resources"]["limits"]["huawei.com/Ascend910"]
        for _ in range(replica["replicas"]):
            rank = len(found)
            common = {"HostNetwork": "true", "REPLICA_TYPE": kind}
            if framework == "pytorch":
                injected = {
                    "MASTER_ADDR": addresses[0],
                    "MASTER_PORT": port,
                    "WORLD_SIZE": str(npus * total_pods),
                    "RANK": str(rank),
                    "LOCAL_WORLD_SIZE": str(npus),
                    "LOCAL_RANK": ",".join(str(i) for i in range(npus)),
                }
            else:
                injected = {
                    "MS_SCHED_HOST": addresses[0],
                    "MS_SCHED_PORT": port,
                    "MS_WORKER_NUM": str(npus * total_pods),
                    "MS_LOCAL_WORKER": str(npus),
                    "MS_NODE_RANK": str(rank),
                    "MS_SERVER_NUM": "0",
                    "MS_ROLE": "MS_SCHED" if kind == "Scheduler" else "MS_WORKER",
                    "NPU_POD": "true",
                }
            found.append(Pod(container, {**common, **injected}))
    return found


BUILDERS = {
    "TrainJob": _trainjob,
    "PyTorchJob": _pytorchjob,
    "Job": _volcano,
    "AscendJob": _ascendjob,
}


def rank_table(addresses: list[str], devices: int) -> ranktable.RankTable:
    """The hccl.json Ascend Operator writes once every pod is placed: one server per pod in
    the order given (Volcano's is the pods' placement, so rank 0 may be on the worker)."""
    return ranktable.merge(
        [
            ranktable.generate(
                address, list(range(devices)), [f"10.9.{n}.{d + 1}" for d in range(devices)]
            )
            for n, address in enumerate(addresses)
        ]
    )
