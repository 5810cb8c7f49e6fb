"""The pods `gen job render` writes, rehearsed for every kind x framework x target that fits:
each pod's command, from the manifest, runs in its own network namespace (a host) with the
environment its operator would inject (tests/integration/operators.py, from the operators'
sources), on CPU for one epoch. On Ascend, the rank table Ascend Operator writes is put where
the manifest mounts it, after the pods have started waiting for it.

Every process says where it stands ("rank R of W on device D") and, at the end, a hash of
its weights: each run is checked against the rank table (or the operator's numbering) and
for every rank ending with the same weights.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from generator.render.options import Options
from generator.render.project import render
from tests.integration import operators
from tests.integration.netns import Hosts, finish
from tests.template.launchers import assert_all_gone

TABLE = "/user/serverid/devindex/config/hccl.json"
# A rank's last line (torchrun's tee puts "[default0]:" before it).
PLACED = re.compile(
    r"rank (\d+) of (\d+) on (?:device (\d+) \()?([^):]*)\)?: finished, parameters (\w+)$"
)


def manifest(project: Path, kind: str, *args: str) -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-m", "generator", "job", "render", "--kind", kind]
        + ["--image", "r.example.com/t/demo:1", "--join-timeout", "60", *args],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def pod_env(pod: operators.Pod, app: Path, host_ip: str, devices: int) -> dict[str, str]:
    """The container's own variables with the downward API filled in as the kubelet would (the
    device plugin's annotation lists the pod's NPUs), then the operator's."""
    values = {
        "status.hostIP": host_ip,
        "status.podIP": host_ip,
        "metadata.annotations['huawei.com/Ascend910']": ",".join(map(str, range(devices))),
    }
    own = {}
    for item in pod.container.get("env", []):
        ref = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        own[item["name"]] = item["value"] if "value" in item else values[ref]
    if "RANK_TABLE_FILE" in own:  # the ConfigMap's mount, beside this pod
        own["RANK_TABLE_FILE"] = str(app.parent / "hccl.json")
    return {**own, **pod.injected, "PYTHON": sys.executable}


def command(container: dict, app: Path, dry_run: bool) -> list[str]:
    """The pod's command, the image's /app being this pod's copy of the project."""
    words = [word.replace("/app/", f"{app}/") for word in container["command"]]
    # The output claim: one volume every pod mounts (ReadWriteMany), beside the pods.
    words = [str(app.parent.parent / "claim") if word == "/output" else word for word in words]
    # No --resume: a pod restarted by its operator continues the run its output holds.
    assert "--resume" not in words
    return [*words, "--dry-run"] if dry_run else words


def start_pods(
    hosts: Hosts,
    project: Path,
    tmp_path: Path,
    docs: list[dict],
    *train_args: str,
    dry_run: bool = False,
) -> list[subprocess.Popen[str]]:
    """Each pod's command on its host, with its operator's environment; TRAIN_ARGS go to
    train.py. The manifest's ConfigMap (the rank table, "initializing") goes beside each pod."""
    pods = operators.pods(docs, hosts.addresses)
    names = tuple(pod.dns_name for pod in pods)
    if all(names):
        hosts.name(names)  # type: ignore[arg-type]
    config = [doc for doc in docs if doc["kind"] == "ConfigMap"]
    procs = []
    for node, pod in enumerate(pods):
        app = tmp_path / f"pod{node}" / "app"
        if not app.exists():  # a restarted pod finds its output (its claim) as it was left
            shutil.copytree(project, app)
        if config:
            (app.parent / "hccl.json").write_text(config[0]["data"]["hccl.json"])
        devices = _devices(pod.container)
        variables = pod_env(pod, app, hosts.addresses[node], devices)
        words = [
            *command(pod.container, app, dry_run),
            *(["--", *train_args] if train_args else []),
        ]
        procs.append(hosts.start(node, words, None, **variables))
    return procs


def _devices(container: dict) -> int:
    limits = container.get("resources", {}).get("limits", {})
    return int(next(iter(limits.values()), 1)) if limits else 1


def write_table_later(tmp_path: Path, table: str, after: float = 4.0) -> None:
    """Ascend Operator, once every pod is placed: the completed table in every pod's mount."""

    def complete() -> None:
        for node in (0, 1):
            (tmp_path / f"pod{node}" / "hccl.json").write_text(table)

    threading.Timer(after, complete).start()


def assert_all_finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    results = finish(procs, 300)
    assert [code for code, _, _ in results] == [0] * len(procs), [
        out[-2000:] + err[-2000:] for _, out, err in results
    ]
    return results


def placements(tmp_path: Path, results: list[tuple[int, str, str]]) -> dict[int, tuple]:
    """Every rank's last line, from the pods' output and every log under their outputs:
    rank -> (world size, device id or None, pod, weights)."""
    found: dict[int, tuple] = {}
    for node, (_, stdout, _) in enumerate(results):
        logs = (tmp_path / f"pod{node}" / "app" / "output").rglob("*.log")
        for text in [stdout, *(p.read_text(errors="replace") for p in logs)]:
            for line in text.splitlines():
                hit = PLACED.search(line.strip())
                if hit:
                    rank, world, device, _, weights = hit.groups()
                    entry = (int(world), None if device is None else int(device), node, weights)
                    assert found.setdefault(int(rank), entry) == entry, (rank, entry)
    return found


def assert_trained_as_one(found: dict[int, tuple], world: int) -> None:
    """Ranks 0..world-1 each said their place, and all hold the same weights."""
    assert sorted(found) == list(range(world)), found
    assert {entry[0] for entry in found.values()} == {world}
    assert len({entry[3] for entry in found.values()}) == 1, found


# kind, framework, target: every combination gen job render fits.
REHEARSED = [
    ("trainjob", "pytorch", "cuda"),
    ("pytorchjob", "pytorch", "cuda"),
    ("volcano", "pytorch", "cuda"),
    ("volcano", "mindspore", "cuda"),
    ("ascendjob", "mindspore", "ascend"),
]


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (/proc's parent links)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def kill_pods(procs: list[subprocess.Popen[str]], output: Path, step: int) -> None:
    """A node fault: every process of every pod SIGKILLed, once rank 0's output holds a
    checkpoint at ``step`` or later."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and all(p.poll() is None for p in procs):
        pointer = output / "latest.json"
        latest = json.loads(pointer.read_text()).get("latest", "") if pointer.exists() else ""
        if (hit := re.search(r"_step(\d+)", latest)) and int(hit[1]) >= step:
            for proc in procs:
                for pid in _descendants(proc.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            finish(procs, 60)
            return
        time.sleep(0.01)
    ended = [
        (p.poll(), p.stderr.read()[-1500:] if p.poll() is not None and p.stderr else "")
        for p in procs
    ]
    raise AssertionError(f"no step checkpoint in {output}: {ended}")


# A node fault: every pod SIGKILLed once the output claim holds a step checkpoint. The same
# pods' same command, restarted by the operator, continues the run. One epoch of 20 steps
# (1294 samples, 2 ranks of 32), a checkpoint every 5: the kill at step 5 or a few after,
# some 15 steps before the end (over the namespaces' link, 0.1 s or more a step, polled
# every 10 ms). MindSpore's custom loop: its checkpoints inside an epoch resume
# (Model.train's do not).
STEPS = ["--epoch_size", "1", "--checkpoint_every", "5"]
WORK = {"pytorch": STEPS, "mindspore": [*STEPS, "--device_target", "cpu"]}
# What two pods of one device each reach unbroken, by framework (two nodes sum their gradients
# in another order than one node of two devices): made once, by the first kind that needs it.
UNBROKEN: dict[str, set[str]] = {}


def _digests(results: list[tuple[int, str, str]], claim: Path) -> tuple[str, dict[int, tuple]]:
    """What the pods printed and logged on the claim, and each rank's place and weights."""
    logs = "".join(p.read_text(errors="replace") for p in sorted(claim.rglob("*.log")))
    printed = "".join(out + err for _, out, err in results) + logs
    assert [code for code, _, _ in results] == [0, 0], printed[-4000:]
    ranks: dict[int, tuple] = {}
    for line in printed.splitlines():
        if hit := PLACED.search(line.strip()):
            ranks.setdefault(int(hit[1]), (int(hit[2]), hit[5]))
    assert sorted(ranks) == [0, 1] and {world for world, _ in ranks.values()} == {2}, printed[
        -4000:
    ]
    return printed, ranks


def _pods(hosts: Hosts, project: Path, place: Path, docs: list[dict], framework: str) -> tuple:
    """The pods' command, from its start or its restart, to its end: what was printed, and
    each rank's world size and weights."""
    procs = start_pods(hosts, project, place, docs, *WORK[framework])
    return _digests(finish(procs, 300), place / "claim")


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "framework", "target"), REHEARSED, ids=map(" ".join, REHEARSED))
def test_pods_train_together_and_killed_restart_to_the_weights_of_unbroken_pods(
    hosts: Hosts, tmp_path: Path, kind: str, framework: str, target: str
) -> None:
    """Each kind's pods train together with their operator's environment, two ranks to the
    same weights; all SIGKILLed (a node fault) after a step checkpoint on the output claim,
    the same pods' same command, restarted, ends with the weights of unbroken pods."""
    options = Options(
        "demo", framework, target, "generic", nnodes=2, devices_per_node=1, ms_train_loop="custom"
    )
    project = render(options, tmp_path)
    docs = manifest(project, kind, "--output-pvc", "claim")
    kill_pods(start_pods(hosts, project, tmp_path, docs, *WORK[framework]), tmp_path / "claim", 5)
    printed, restarted = _pods(hosts, project, tmp_path, docs, framework)
    suffix = ".pt" if framework == "pytorch" else ".ckpt"
    assert (tmp_path / "claim" / f"lenet_epoch1{suffix}").is_file()
    assert "continuing it (a restart)" in printed and "resumed from" in printed
    if framework not in UNBROKEN:
        _, unbroken = _pods(hosts, project, tmp_path / "unbroken", docs, framework)
        UNBROKEN[framework] = {weights for _, weights in unbroken.values()}
    assert len(UNBROKEN[framework]) == 1, UNBROKEN
    assert {weights for _, weights in restarted.values()} == UNBROKEN[framework], restarted


def _expected(table, found: dict[int, tuple], pod_of_server: list[int]) -> None:
    """Each process is the table's: its rank on its server's pod, on the device listed."""
    for index, server in enumerate(table.servers):
        for device in server.devices:
            world, device_id, pod, _ = found[device.rank_id]
            assert (world, device_id, pod) == (
                table.rank_size,
                device.device_id,
                pod_of_server[index],
            )


@pytest.mark.slow
def test_pytorch_ascendjob_pods_start_one_process_per_npu(hosts: Hosts, tmp_path: Path) -> None:
    """AscendJob's pod-wide WORLD_SIZE, RANK and LOCAL_RANK="0,1" become one placement per
    process: ranks numbered pod by pod, as MindCluster numbers them (its hccl.json)."""
    options = Options("demo", "pytorch", "ascend", "generic", devices_per_node=2, nnodes=2)
    project = render(options, tmp_path)
    docs = manifest(project, "ascendjob")
    assert operators.pods(docs, hosts.addresses)[1].injected["LOCAL_RANK"] == "0,1"
    results = assert_all_finish(start_pods(hosts, project, tmp_path, docs, "--epoch_size", "1"))
    found = placements(tmp_path, results)
    assert_trained_as_one(found, 4)
    _expected(operators.rank_table(list(hosts.addresses), 2), found, [0, 1])


@pytest.mark.slow
def test_a_volcano_table_with_rank_0_on_the_worker_trains_from_the_tables_master(
    hosts: Hosts, tmp_path: Path
) -> None:
    """Ascend Operator lists the pods as placed: here the worker first, so rank 0 is on the
    worker pod, not on the pod Volcano's MASTER_ADDR names. The ranks meet at rank 0's."""
    options = Options("demo", "pytorch", "ascend", "generic", devices_per_node=2, nnodes=2)
    project = render(options, tmp_path)
    docs = manifest(project, "volcano")
    config = next(doc for doc in docs if doc["kind"] == "ConfigMap")
    assert json.loads(config["data"]["hccl.json"]) == {"status": "initializing"}
    table = operators.rank_table([hosts.addresses[1], hosts.addresses[0]], 2)
    write_table_later(tmp_path, table.dumps())
    results = assert_all_finish(start_pods(hosts, project, tmp_path, docs, "--epoch_size", "1"))
    assert "status initializing" in results[0][2], "the pod said what it waited for"
    found = placements(tmp_path, results)
    assert_trained_as_one(found, 4)
    _expected(table, found, [1, 0])
    assert found[0][2] == 1, "rank 0 ran on the worker pod"
    assert (tmp_path / "pod1" / "app" / "output" / "lenet_epoch1.pt").is_file()


@pytest.mark.slow
def test_mindspore_volcano_ascend_pods_place_every_rank_by_the_table(
    hosts: Hosts, tmp_path: Path
) -> None:
    """MindSpore joins an Ascend rank table through HCCL, which a CPU lacks: its pods are
    rehearsed to the per-rank environment (a dry run, after the table completes)."""
    options = Options("demo", "mindspore", "ascend", "generic", devices_per_node=2, nnodes=2)
    project = render(options, tmp_path)
    docs = manifest(project, "volcano")
    table = operators.rank_table(list(hosts.addresses), 2)
    write_table_later(tmp_path, table.dumps(), after=1.0)
    results = assert_all_finish(start_pods(hosts, project, tmp_path, docs, dry_run=True))
    for node, (_, stdout, _) in enumerate(results):
        ranks = re.findall(r"RANK_SIZE=(\d+) RANK_ID=(\d+) DEVICE_ID=(\d+)", stdout)
        server = table.servers[node]
        assert ranks == [("4", str(d.rank_id), str(d.device_id)) for d in server.devices], stdout
        # No pod-wide variable of Volcano's reaches a rank: each has its own RANK_ID.
        assert "WORLD_SIZE=" not in stdout


@pytest.mark.slow
def test_a_pod_given_4_devices_of_an_8_device_project_trains_on_4(
    hosts: Hosts, tmp_path: Path
) -> None:
    options = Options("demo", "pytorch", "ascend", "generic", devices_per_node=8, nnodes=1)
    project = render(options, tmp_path)
    docs = manifest(project, "volcano", "--devices-per-node", "4", "--nnodes", "1")
    job = docs[-1]
    assert job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "huawei.com/Ascend910": 4
    }
    app = Path(shutil.copytree(project, tmp_path / "pod0" / "app"))
    (app.parent / "hccl.json").write_text(operators.rank_table([hosts.addresses[0]], 4).dumps())
    (pod,) = operators.pods(docs, hosts.addresses)[:1]
    variables = pod_env(pod, app, hosts.addresses[0], 4)
    proc = hosts.start(
        0, [*command(pod.container, app, False), "--", "--epoch_size", "1"], None, **variables
    )
    results = assert_all_finish([proc])
    assert_trained_as_one(placements(tmp_path, results), 4)


def test_a_rank_table_that_never_completes_fails_within_the_join_timeout(
    hosts: Hosts, tmp_path: Path
) -> None:
    options = Options("demo", target="ascend", devices_per_node=1, nnodes=2, platform="generic")
    project = render(options, tmp_path)
    docs = manifest(project, "volcano", "--join-timeout", "5")
    began = time.monotonic()
    results = finish(start_pods(hosts, project, tmp_path, docs, "--epoch_size", "1"), 120)
    assert time.monotonic() - began < 40
    for code, _, stderr in results:
        assert code == 1
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "still says initializing after 5 s" in errors[0], stderr
    assert_all_gone(str(tmp_path / "pod0"))
