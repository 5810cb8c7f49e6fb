"""The pods `gen job render` writes, rehearsed: each pod's command, from the manifest, runs in
its own network namespace (a host) with the environment the operator would give it, on CPU for
one epoch. PyTorchJob (torchrun from PET_*), AscendJob with MindSpore (msrun from MS_*) and a
Volcano job on Ascend (the rank table at /user/serverid/devindex/config/hccl.json, which says
"initializing" until every pod is placed)."""

from __future__ import annotations

import json
import os
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
    return [word.replace("/app/", f"{pod}/") for word in container["command"]]


def pods(project: Path, tmp_path: Path) -> list[Path]:
    """A copy of the project per pod: each container has its own filesystem."""
    return [Path(shutil.copytree(project, tmp_path / f"pod{i}" / "app")) for i in (0, 1)]


@pytest.mark.slow
def test_pytorchjob_pods_train_together(hosts: Hosts, tmp_path: Path) -> None:
    project = render(Options("demo", devices_per_node=1, nnodes=2, platform="generic"), tmp_path)
    master, worker = containers(manifest(project, "pytorchjob"))
    assert (master["name"], worker["name"]) == ("pytorch", "pytorch")
    port = free_port()
    procs = []
    for rank, (container, pod) in enumerate(
        zip((master, worker), pods(project, tmp_path), strict=True)
    ):
        injected = {
            "PET_NNODES": "2",
            "PET_NPROC_PER_NODE": "1",
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": hosts.addresses[0],
            "PET_MASTER_PORT": port,
            "MASTER_ADDR": hosts.addresses[0],
            "MASTER_PORT": port,
            "WORLD_SIZE": "2",
            "RANK": str(rank),
        }
        variables = pod_env(container, pod, hosts.addresses[rank], injected)
        procs.append(
            hosts.start(
                rank, [*command(container, pod), "--", "--epoch_size", "1"], None, **variables
            )
        )
    results = finish(procs, 300)
    assert [code for code, _, _ in results] == [0, 0], [err[-3000:] for _, _, err in results]
    assert (tmp_path / "pod0" / "app" / "output" / "lenet_epoch1.pt").is_file()
    assert not list((tmp_path / "pod1" / "app" / "output").glob("*.pt")), "rank 1 saves nothing"


@pytest.mark.slow
def test_ascendjob_mindspore_pods_train_together(hosts: Hosts, tmp_path: Path) -> None:
    options = Options("demo", "mindspore", "ascend", "generic", devices_per_node=1, nnodes=2)
    project = render(options, tmp_path)
    scheduler, worker = containers(manifest(project, "ascendjob"))
    assert scheduler["name"] == worker["name"] == "ascend"
    port = free_port()
    procs = []
    for node, (container, pod) in enumerate(
        zip((scheduler, worker), pods(project, tmp_path), strict=True)
    ):
        # The scheduler's pod holds devices too (node 0); its MS_SCHED_HOST is its own address.
        injected = {
            "MS_WORKER_NUM": "2",
            "MS_LOCAL_WORKER": "1",
            "MS_NODE_RANK": str(node),
            "MS_SCHED_HOST": hosts.addresses[0],
            "MS_SCHED_PORT": port,
            "MS_ROLE": "MS_SCHED" if node == 0 else "MS_WORKER",
        }
        variables = pod_env(container, pod, hosts.addresses[node], injected)
        args = ["--", "--epoch_size", "1", "--device_target", "cpu"]
        procs.append(hosts.start(node, [*command(container, pod), *args], None, **variables))
    results = finish(procs, 300)
    assert [code for code, _, _ in results] == [0, 0], [
        out[-2000:] + err[-2000:] for _, out, err in results
    ]
    assert (tmp_path / "pod0" / "app" / "output" / "lenet_epoch1.ckpt").is_file()


def _volcano_pods(hosts: Hosts, tmp_path: Path, join_timeout: str) -> tuple[list, Path]:
    project = render(
        Options("demo", target="ascend", devices_per_node=1, nnodes=2, platform="generic"), tmp_path
    )
    docs = manifest(project, "volcano", "--join-timeout", join_timeout)
    config = next(doc for doc in docs if doc["kind"] == "ConfigMap")
    assert json.loads(config["data"]["hccl.json"]) == {"status": "initializing"}
    port = free_port()
    procs = []
    for node, (container, pod) in enumerate(
        zip(containers(docs), pods(project, tmp_path), strict=True)
    ):
        assert container["env"][-1] == {"name": "RANK_TABLE_FILE", "value": TABLE}
        # The table is the ConfigMap's: every pod sees the same file.
        (pod.parent / "hccl.json").write_text(config["data"]["hccl.json"])
        injected = {
            "MASTER_ADDR": hosts.addresses[0],
            "MASTER_PORT": port,
            "WORLD_SIZE": "2",
            "RANK": str(node),
        }
        variables = pod_env(container, pod, hosts.addresses[node], injected)
        procs.append(
            hosts.start(
                node, [*command(container, pod), "--", "--epoch_size", "1"], None, **variables
            )
        )
    return procs, project


@pytest.mark.slow
def test_volcano_ascend_pods_wait_for_the_rank_table(hosts: Hosts, tmp_path: Path) -> None:
    table = ranktable.merge(
        [ranktable.generate(hosts.addresses[n], [0], [f"10.9.{n}.1"]) for n in (0, 1)]
    ).dumps()

    def complete() -> None:  # Ascend Operator, once both pods are placed
        for node in (0, 1):
            (tmp_path / f"pod{node}" / "hccl.json").write_text(table)

    threading.Timer(4.0, complete).start()
    procs, _ = _volcano_pods(hosts, tmp_path, "60")
    results = finish(procs, 300)
    assert [code for code, _, _ in results] == [0, 0], [err[-3000:] for _, _, err in results]
    assert "status initializing" in results[0][2], "the pod said what it waited for"
    assert (tmp_path / "pod0" / "app" / "output" / "lenet_epoch1.pt").is_file()


def test_a_rank_table_that_never_completes_fails_within_the_join_timeout(
    hosts: Hosts, tmp_path: Path
) -> None:
    began = time.monotonic()
    procs, project = _volcano_pods(hosts, tmp_path, "5")
    results = finish(procs, 120)
    assert time.monotonic() - began < 40
    for code, _, stderr in results:
        assert code == 1
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "still says initializing after 5 s" in errors[0], stderr
    assert_all_gone(str(tmp_path / "pod0"))
    assert os.path.isdir(project)
