"""The pods `gen job render` writes, rehearsed: each pod's command, from the manifest, runs in
its own network namespace (a host) with the environment the operator would give it, on CPU for
one epoch. PyTorchJob (torchrun from PET_*), AscendJob with MindSpore (msrun from MS_*) and a
Volcano job on Ascend (the rank table at /user/serverid/devindex/config/hccl.json, which says
"initializing" until every pod is placed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from generator import ranktable
from generator.options import Options
from generator.project import render
from tests.integration.netns import Hosts, finish
from tests.template.launchers import assert_all_gone, free_port

TABLE = "/user/serverid/devindex/config/hccl.json"


def manifest(project: Path, kind: str, *args: str) -> list[dict]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "generator",
            "job",
            "render",
            "--kind",
            kind,
            "--image",
            "r.example.com/t/demo:1",
            "--join-timeout",
            "60",
            *args,
        ],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def containers(docs: list[dict]) -> list[dict]:
    """Every pod template's container, in replica order (master, scheduler first)."""
    found = []
    for doc in docs:
        spec = doc.get("spec", {})
        groups = (
            spec.get("tasks") or spec.get("replicaSpecs") or spec.get("pytorchReplicaSpecs") or {}
        )
        for group in groups if isinstance(groups, list) else groups.values():
            found.append(group["template"]["spec"]["containers"][0])
    return found


def pod_env(container: dict, pod: Path, host_ip: str, injected: dict[str, str]) -> dict[str, str]:
    """The container's own variables (downward API filled in as the kubelet would), and the
    operator's; the rank table is read from where this test writes it."""
    values = {"status.hostIP": host_ip, "status.podIP": host_ip}
    own = {}
    for item in container.get("env", []):
        ref = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if "value" in item:
            own[item["name"]] = item["value"]
        elif ref in values:
            own[item["name"]] = values[ref]
    if "RANK_TABLE_FILE" in own:
        own["RANK_TABLE_FILE"] = str(pod.parent / "hccl.json")
    return {**own, **injected, "PYTHON": sys.executable}


def command(container: dict, pod: Path) -> list[str]:
    """The pod's command, the image's /app being this pod's copy of the project."""
    # A pod restarted by its operator continues the run its output holds.
    assert container["command"][-3:] == ["--", "--resume", "auto"]
    return [word.replace("/app/", f"{pod}/") for word in container["command"]]


def pods(project: Path, tmp_path: Path) -> list[Path]:
    """A copy of the project per pod: each container has its own filesystem."""
    return [Path(shutil.copytree(project, tmp_path / f"pod{i}" / "app")) for i in (0, 1)]


def start_pods(
    hosts: Hosts, project: Path, tmp_path: Path, docs: list[dict], injected, *args: str
) -> list[subprocess.Popen[str]]:
    """Each pod's command on its host, with what ``injected(node, port)`` says the operator
    gives node; ARGS go to train.py. The manifest's rank table goes beside each pod."""
    port = free_port()
    config = [doc for doc in docs if doc["kind"] == "ConfigMap"]
    procs = []
    for node, (container, pod) in enumerate(
        zip(containers(docs), pods(project, tmp_path), strict=True)
    ):
        if config:  # the ConfigMap's hccl.json: every pod sees the same file
            (pod.parent / "hccl.json").write_text(config[0]["data"]["hccl.json"])
        variables = pod_env(container, pod, hosts.addresses[node], injected(node, port))
        # The manifest's command ends with train.py's arguments (-- --resume auto): ARGS join them.
        procs.append(hosts.start(node, [*command(container, pod), *args], None, **variables))
    return procs


def assert_both_finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    results = finish(procs, 300)
    assert [code for code, _, _ in results] == [0, 0], [
        out[-2000:] + err[-2000:] for _, out, err in results
    ]
    return results


@pytest.mark.slow
def test_pytorchjob_pods_train_together(hosts: Hosts, tmp_path: Path) -> None:
    project = render(Options("demo", devices_per_node=1, nnodes=2, platform="generic"), tmp_path)
    docs = manifest(project, "pytorchjob")
    assert [c["name"] for c in containers(docs)] == ["pytorch", "pytorch"]

    def injected(node: int, port: str) -> dict[str, str]:
        pet = {"NNODES": "2", "NPROC_PER_NODE": "1", "NODE_RANK": str(node)}
        pet |= {"MASTER_ADDR": hosts.addresses[0], "MASTER_PORT": port}
        return {f"PET_{k}": v for k, v in pet.items()} | {"WORLD_SIZE": "2", "RANK": str(node)}

    assert_both_finish(start_pods(hosts, project, tmp_path, docs, injected, "--epoch_size", "1"))
    assert (tmp_path / "pod0" / "app" / "output" / "lenet_epoch1.pt").is_file()
    assert not list((tmp_path / "pod1" / "app" / "output").glob("*.pt")), "rank 1 saves nothing"


@pytest.mark.slow
def test_ascendjob_mindspore_pods_train_together(hosts: Hosts, tmp_path: Path) -> None:
    options = Options("demo", "mindspore", "ascend", "generic", devices_per_node=1, nnodes=2)
    project = render(options, tmp_path)
    docs = manifest(project, "ascendjob")
    assert [c["name"] for c in containers(docs)] == ["ascend", "ascend"]

    def injected(node: int, port: str) -> dict[str, str]:
        # The scheduler's pod holds devices too (node 0); its MS_SCHED_HOST is its own address.
        role = "MS_SCHED" if node == 0 else "MS_WORKER"
        sched = {"MS_SCHED_HOST": hosts.addresses[0], "MS_SCHED_PORT": port, "MS_ROLE": role}
        return {"MS_WORKER_NUM": "2", "MS_LOCAL_WORKER": "1", "MS_NODE_RANK": str(node)} | sched

    args = ("--epoch_size", "1", "--device_target", "cpu")
    assert_both_finish(start_pods(hosts, project, tmp_path, docs, injected, *args))
    assert (tmp_path / "pod0" / "app" / "output" / "lenet_epoch1.ckpt").is_file()


def _volcano_pods(hosts: Hosts, tmp_path: Path, join_timeout: str) -> list:
    options = Options("demo", target="ascend", devices_per_node=1, nnodes=2, platform="generic")
    project = render(options, tmp_path)
    docs = manifest(project, "volcano", "--join-timeout", join_timeout)
    config = next(doc for doc in docs if doc["kind"] == "ConfigMap")
    assert json.loads(config["data"]["hccl.json"]) == {"status": "initializing"}
    assert all(
        c["env"][-1] == {"name": "RANK_TABLE_FILE", "value": TABLE} for c in containers(docs)
    )

    def injected(node: int, port: str) -> dict[str, str]:  # Volcano's pytorch plugin
        master = {"MASTER_ADDR": hosts.addresses[0], "MASTER_PORT": port}
        return master | {"WORLD_SIZE": "2", "RANK": str(node)}

    return start_pods(hosts, project, tmp_path, docs, injected, "--epoch_size", "1")


@pytest.mark.slow
def test_volcano_ascend_pods_wait_for_the_rank_table(hosts: Hosts, tmp_path: Path) -> None:
    table = ranktable.merge(
        [ranktable.generate(hosts.addresses[n], [0], [f"10.9.{n}.1"]) for n in (0, 1)]
    ).dumps()

    def complete() -> None:  # Ascend Operator, once both pods are placed
        for node in (0, 1):
            (tmp_path / f"pod{node}" / "hccl.json").write_text(table)

    threading.Timer(4.0, complete).start()
    results = assert_both_finish(_volcano_pods(hosts, tmp_path, "60"))
    assert "status initializing" in results[0][2], "the pod said what it waited for"
    assert (tmp_path / "pod0" / "app" / "output" / "lenet_epoch1.pt").is_file()


def test_a_rank_table_that_never_completes_fails_within_the_join_timeout(
    hosts: Hosts, tmp_path: Path
) -> None:
    began = time.monotonic()
    results = finish(_volcano_pods(hosts, tmp_path, "5"), 120)
    assert time.monotonic() - began < 40
    for code, _, stderr in results:
        assert code == 1
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "still says initializing after 5 s" in errors[0], stderr
    assert_all_gone(str(tmp_path / "pod0"))
