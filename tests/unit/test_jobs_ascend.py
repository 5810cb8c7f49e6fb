"""What Ascend jobs need besides their chip (issue 33): the sp-block ascend-for-volcano accepts on
A3 super pods, a port of each job's own on the host's network, and the host-arch node label.

The rules are written here from their sources, not read from generator.jobs:
- sp-block: Ascend/mind-cluster component/ascend-for-volcano/internal/npu/ascend910/ascend910a3/
  superpod/frame.go (checkSpBlock, checkRequireNPU, CheckTaskNPU); a super pod holds 48 nodes
  (plugin/const.go defaultSuperPodSize) of 16 NPUs (module-a3-16-super-pod) or 8 (-a3-8-).
- host-arch: Ascend/mind-cluster docs/en/scheduling/api/k8s.md (huawei-arm, huawei-x86).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from generator.errors import OptionError
from generator.jobs import manifests
from generator.jobs import spec as jobs
from generator.render.options import Options
from tests import k8s_schema

IMAGE = "registry.example.com/team/demo:ascend-1"
NOWHERE = Path("/nonexistent")
A3 = Options(project="demo", framework="mindspore", target="ascend", chip="910_93")
ASCEND_KINDS = ("ascendjob", "volcano")
Doc = dict[str, Any]


def _docs(record: Options = A3, **asked: Any) -> list[Doc]:
    asked = {"kind": "ascendjob", "image": IMAGE, **asked}
    return manifests.documents(jobs.resolve(record, jobs.JobRequest(**asked), NOWHERE))


def _refused(record: Options = A3, **asked: Any) -> OptionError:
    with pytest.raises(OptionError) as caught:
        _docs(record, **asked)
    assert "\n" not in str(caught.value)  # one line
    return caught.value


def _pods(docs: list[Doc]) -> list[Doc]:
    """The pod specs of the job (the last document)."""
    spec = docs[-1]["spec"]
    if "tasks" in spec:
        return [t["template"]["spec"] for t in spec["tasks"]]
    replicas = spec.get("replicaSpecs") or spec["pytorchReplicaSpecs"]
    return [r["template"]["spec"] for r in replicas.values()]


# --- sp-block -------------------------------------------------------------------------------

# (nnodes, devices per node) -> the sp-block an A3 job gets: a one-pod job's is its NPUs (it
# may hold part of a node); several pods each take a whole node, and the whole job is one
# logical super pod while it fits in one (48 x 16 = 768 NPUs).
ACCEPTED = {(1, 8): "8", (1, 16): "16", (2, 16): "32", (48, 16): "768"}
# Shapes ascend-for-volcano refuses: the option named and what to do.
REFUSED = {
    (2, 8): ("--devices-per-node", "--devices-per-node 16"),
    (64, 8): ("--devices-per-node", "whole node (16 NPUs"),
    (64, 16): ("--nnodes", "--sp-block 512"),
    (49, 16): ("--nnodes", "768"),
}


@pytest.mark.parametrize("kind", ASCEND_KINDS)
@pytest.mark.parametrize(("nnodes", "devices"), ACCEPTED)
def test_an_a3_shape_the_scheduler_accepts_gets_its_sp_block(
    kind: str, nnodes: int, devices: int
) -> None:
    docs = _docs(kind=kind, nnodes=nnodes, devices_per_node=devices)
    assert docs[-1]["metadata"]["annotations"] == {"sp-block": ACCEPTED[nnodes, devices]}
    for doc in docs:
        assert k8s_schema.problems(doc) == []


@pytest.mark.parametrize("kind", ASCEND_KINDS)
@pytest.mark.parametrize(("nnodes", "devices"), REFUSED)
def test_an_a3_shape_the_scheduler_refuses_is_one_line_saying_what_to_do(
    kind: str, nnodes: int, devices: int
) -> None:
    option, words = REFUSED[nnodes, devices]
    error = _refused(kind=kind, nnodes=nnodes, devices_per_node=devices)
    assert str(error).startswith(f"{option}: ") and "ascend-for-volcano" in str(error)
    assert words in str(error)


@pytest.mark.parametrize(
    ("nnodes", "devices", "sp_block"),
    [(64, 16, 512), (64, 16, 16), (64, 16, 256), (2, 16, 16), (1, 8, 8), (1, 16, 16)],
)
def test_a_valid_sp_block_is_taken(nnodes: int, devices: int, sp_block: int) -> None:
    docs = _docs(nnodes=nnodes, devices_per_node=devices, sp_block=sp_block)
    assert docs[-1]["metadata"]["annotations"] == {"sp-block": str(sp_block)}


@pytest.mark.parametrize(
    ("nnodes", "devices", "sp_block"),
    [
        (64, 16, 24),  # not a multiple of a node's 16 NPUs
        (64, 16, 768),  # does not divide the job's 1024 NPUs
        (64, 16, 1024),  # more than a super pod's 48 nodes
        (64, 16, 0),
        (64, 16, -16),
        (2, 16, 48),  # does not divide 32
        (1, 8, 16),  # a one-pod job's is its NPUs
    ],
)
def test_an_sp_block_the_scheduler_refuses_is_one_line(
    nnodes: int, devices: int, sp_block: int
) -> None:
    error = _refused(nnodes=nnodes, devices_per_node=devices, sp_block=sp_block)
    assert str(error).startswith(f"--sp-block: {sp_block} is refused by ascend-for-volcano")


def test_an_a3_8_super_pod_takes_whole_nodes_of_8() -> None:
    # A200T A3 Box8 super-pod servers: the same handler with 8 NPUs a node.
    box8 = {"accelerator_type": "module-a3-8-super-pod"}
    docs = _docs(nnodes=2, devices_per_node=8, **box8)
    assert docs[-1]["metadata"]["annotations"] == {"sp-block": "16"}
    assert "--devices-per-node 8" in str(_refused(nnodes=2, devices_per_node=16, **box8))
    assert str(_refused(nnodes=1, devices_per_node=16, **box8)).startswith("--devices-per-node")


def test_only_super_pod_jobs_carry_an_sp_block() -> None:
    # The A3 handler without super pods, and other chips, never read it.
    assert "annotations" not in _docs(accelerator_type="module-a3-16", nnodes=2)[-1]["metadata"]
    assert "annotations" not in _docs(chip="910b", nnodes=2)[-1]["metadata"]
    for asked in ({"chip": "910b"}, {"accelerator_type": "module-a3-16"}):
        assert str(_refused(sp_block=16, **asked)).startswith("--sp-block: is for Atlas A3")
    cuda = Options(project="demo", framework="pytorch", target="cuda")
    assert str(_refused(cuda, kind="pytorchjob", sp_block=16)).startswith("--sp-block: ")


# --- the port -------------------------------------------------------------------------------

JOB_PORTS = range(20000, 30000)


def _ports(docs: list[Doc]) -> set[int]:
    """Every port the job names: container ports, Volcano's --port=, the launcher's."""
    found: set[int] = set()
    for arg in docs[-1]["spec"].get("plugins", {}).get("pytorch", []):
        if arg.startswith("--port="):
            found.add(int(arg.removeprefix("--port=")))
    for pod in _pods(docs):
        (main,) = pod["containers"]
        found |= {p["containerPort"] for p in main.get("ports", [])}
        if "--master-port" in main["command"]:
            found.add(int(main["command"][main["command"].index("--master-port") + 1]))
    return found


@pytest.mark.parametrize("kind", ASCEND_KINDS)
def test_each_job_on_the_host_network_has_a_port_of_its_own(kind: str) -> None:
    ports = {}
    for name in ("alpha", "beta", "gamma"):
        docs = _docs(kind=kind, name=name, nnodes=2, devices_per_node=16)
        assert all(pod["hostNetwork"] for pod in _pods(docs))
        (ports[name],) = _ports(docs)  # the same in every place
        assert ports[name] in JOB_PORTS
        assert _ports(_docs(kind=kind, name=name, nnodes=2, devices_per_node=16)) == {ports[name]}
    assert len(set(ports.values())) == 3
    # A hash of namespace/name, as documented: the same on every render, anywhere.
    digest = hashlib.sha256(b"/alpha").digest()
    assert ports["alpha"] == 20000 + int.from_bytes(digest[:8], "big") % 10000
    (other,) = _ports(_docs(kind=kind, name="alpha", namespace="team-b"))
    assert other != ports["alpha"]


@pytest.mark.parametrize("kind", ASCEND_KINDS)
def test_port_overrides_the_jobs_own_everywhere(kind: str) -> None:
    assert _ports(_docs(kind=kind, port=31000)) == {31000}
    for bad in (80, 1023, 65536):
        error = _refused(kind=kind, port=bad)
        assert str(error) == f"--port: {bad} is out of range; use a number from 1024 to 65535"


@pytest.mark.parametrize("kind", ["pytorchjob", "volcano"])
def test_cuda_pods_keep_their_own_network_and_port(kind: str) -> None:
    cuda = Options(project="demo", framework="pytorch", target="cuda", nnodes=2)
    docs = _docs(cuda, kind=kind)
    assert _ports(docs) == {23456}
    assert not any(pod.get("hostNetwork") for pod in _pods(docs))
    assert "Ascend" in str(_refused(cuda, kind=kind, port=31000))


# --- host-arch ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "label"),
    [
        (A3, "huawei-arm"),
        (Options(project="demo", target="ascend"), "huawei-arm"),  # 910b, auto
        (Options(project="demo", target="both"), "huawei-arm"),  # the Ascend image's CPU
        (Options(project="demo", target="ascend", arch="aarch64"), "huawei-arm"),
        (Options(project="demo", target="ascend", arch="x86_64"), "huawei-x86"),
        (Options(project="demo", target="both", arch="x86_64", chip="910_93"), "huawei-x86"),
    ],
)
def test_ascend_pods_select_nodes_of_the_images_cpu(record: Options, label: str) -> None:
    for kind in ASCEND_KINDS:
        for pod in _pods(_docs(record, kind=kind, target="ascend" if kind == "volcano" else None)):
            assert pod["nodeSelector"]["host-arch"] == label
            assert "accelerator-type" in pod["nodeSelector"]


@pytest.mark.parametrize("kind", ["pytorchjob", "volcano", "trainjob"])
def test_cuda_pods_have_no_host_arch(kind: str) -> None:
    cuda = Options(project="demo", target="cuda", arch="x86_64")
    docs = _docs(cuda, kind=kind)
    assert "host-arch" not in str(docs)
