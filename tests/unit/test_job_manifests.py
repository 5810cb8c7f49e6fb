"""gen job render's manifests: every kind x framework x target that fits renders, passes what
the API server enforces (tests/k8s_schema.py) and keeps the rules the cluster relies on.

The fit table and the rules are written here from the issue and the upstream docs, not
read from generator.jobs, so a change there has to be a change here too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.errors import KindDoesNotFit
from generator.jobs import manifests
from generator.jobs import spec as jobs
from generator.render.options import FRAMEWORKS, TARGETS, Options
from tests import k8s_schema

EXPECTED_FITS = {
    "trainjob": {("pytorch", "cuda")},
    "pytorchjob": {("pytorch", "cuda")},
    "volcano": {(fw, acc) for fw in FRAMEWORKS for acc in ("cuda", "ascend")},
    "ascendjob": {("pytorch", "ascend"), ("mindspore", "ascend")},
}
KINDS = tuple(EXPECTED_FITS)
IMAGE = "registry.example.com:5000/team/demo:cuda-0123abcd"
VARIANTS = {
    "1node": {"nnodes": 1},
    "3nodes-pvc-ns-queue": {
        "nnodes": 3,
        "devices_per_node": 4,
        "data_pvc": "mnist-data",
        "output_pvc": "runs.v1",
        "namespace": "team-a",
        "queue": "research",
        "join_timeout": 120,
    },
}
DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
ACCELERATOR = {"cuda": "nvidia.com/gpu", "ascend": "huawei.com/Ascend910"}
RANK_TABLE_DIR = "/user/serverid/devindex/config"


def _accelerators(target: str) -> tuple[str, ...]:
    return ("cuda", "ascend") if target == "both" else (target,)


FITTING = [
    (kind, fw, target, acc)
    for kind in KINDS
    for fw in FRAMEWORKS
    for target in TARGETS
    for acc in _accelerators(target)
    if (fw, acc) in EXPECTED_FITS[kind]
]
UNFITTING = [
    (kind, fw, target)
    for kind in KINDS
    for fw in FRAMEWORKS
    for target in TARGETS
    if not any((fw, acc) in EXPECTED_FITS[kind] for acc in _accelerators(target))
]


@dataclass(frozen=True)
class Asked:
    """What a case asked for: what every rule below is checked against."""

    kind: str
    framework: str
    accelerator: str
    name: str
    nnodes: int
    devices: int
    variant: dict[str, Any]


def _render(kind: str, fw: str, target: str, acc: str, variant: dict[str, Any]) -> Any:
    record = Options(project="Demo_Job", framework=fw, target=target, nnodes=2)
    # --target only where the kind could run either accelerator of a 'both' project.
    pick = acc if target == "both" and kind == "volcano" else None
    request = jobs.JobRequest(kind=kind, image=IMAGE, target=pick, **variant)
    return jobs.resolve(record, request, Path("/nonexistent"))


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
@pytest.mark.parametrize(("kind", "fw", "target", "acc"), FITTING, ids="-".join)
def test_every_fitting_combination_renders_manifests_the_server_accepts(
    kind: str, fw: str, target: str, acc: str, variant: str
) -> None:
    spec = _render(kind, fw, target, acc, VARIANTS[variant])
    docs = manifests.documents(spec)
    assert list(yaml.safe_load_all(manifests.render(spec))) == docs
    for doc in docs:
        assert k8s_schema.problems(doc) == [], doc["kind"]
    for template, _, _ in _pods(docs):
        assert k8s_schema.pod_template_problems(template) == []
    nnodes = VARIANTS[variant]["nnodes"]
    devices = VARIANTS[variant].get("devices_per_node", 8)
    asked = Asked(kind, fw, acc, "demo-job", nnodes, devices, VARIANTS[variant])
    check_rules(docs, asked)


@pytest.mark.parametrize(("kind", "fw", "target"), UNFITTING, ids="-".join)
def test_kinds_that_do_not_fit_the_project_are_refused(kind: str, fw: str, target: str) -> None:
    record = Options(project="demo", framework=fw, target=target)
    with pytest.raises(KindDoesNotFit) as caught:
        jobs.resolve(record, jobs.JobRequest(kind=kind, image=IMAGE), Path("/nonexistent"))
    fitting = [k for k in KINDS if any((fw, a) in EXPECTED_FITS[k] for a in _accelerators(target))]
    assert str(caught.value).endswith(f"kinds that fit: {', '.join(fitting)}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_fitting_kinds_follow_the_fit_table(fw: str, target: str) -> None:
    expected = [k for k in KINDS if any((fw, a) in EXPECTED_FITS[k] for a in _accelerators(target))]
    assert expected  # every project runs somewhere
    assert jobs.fitting_kinds(Options(project="d", framework=fw, target=target)) == expected


# --- the rules -------------------------------------------------------------------------------


def check_rules(docs: list[dict[str, Any]], asked: Asked) -> None:
    """Everything the cluster relies on, for one rendered case."""
    job = docs[-1]
    _check_names(docs, asked)
    _check_gang(docs, asked)
    _check_restarts(docs, asked)
    for template, _, _ in _pods(docs):
        _check_placement(template, asked)
        main = _main_container(job, template)
        _check_container(main, template, asked)
    _check_kind(job, asked)
    _check_port(docs, asked)
    if asked.kind == "volcano" and asked.accelerator == "ascend":
        _check_rank_table(docs, asked)
    elif asked.kind == "trainjob" and asked.variant.get("queue"):
        assert [doc["kind"] for doc in docs] == ["TrainingRuntime", "TrainJob"]
    else:
        assert len(docs) == 1


def _pods(docs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int, str | None]]:
    """(pod template, replicas, restart policy) for each group of pods the job (the last
    document) makes; a TrainJob's pod is its own runtime's, else its patch of the stock one."""
    job = docs[-1]
    spec = job["spec"]
    if job["kind"] == "TrainJob":
        if spec["runtimeRef"]["kind"] == "TrainingRuntime":
            patch = docs[0]["spec"]["template"]["spec"]
        else:
            patch = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
        node = patch["replicatedJobs"][0]["template"]["spec"]["template"]
        return [(node, spec["trainer"]["numNodes"], None)]
    if job["kind"] == "Job":
        tasks = spec["tasks"]
        return [
            (t["template"], t["replicas"], t["template"]["spec"]["restartPolicy"]) for t in tasks
        ]
    replicas = spec["pytorchReplicaSpecs" if job["kind"] == "PyTorchJob" else "replicaSpecs"]
    return [(r["template"], r["replicas"], r["restartPolicy"]) for r in replicas.values()]


def _pod_names(job: dict[str, Any]) -> list[str]:
    """The pod hostnames the operator makes: each must be a DNS label."""
    name, spec = job["metadata"]["name"], job["spec"]
    if job["kind"] == "TrainJob":
        return [f"{name}-node-0-{i}" for i in range(spec["trainer"]["numNodes"])]
    if job["kind"] == "Job":
        return [f"{name}-{t['name']}-{i}" for t in spec["tasks"] for i in range(t["replicas"])]
    replicas = spec["pytorchReplicaSpecs" if job["kind"] == "PyTorchJob" else "replicaSpecs"]
    return [f"{name}-{t.lower()}-{i}" for t, r in replicas.items() for i in range(r["replicas"])]


def _main_container(job: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    containers = template["spec"]["containers"]
    assert len(containers) == 1
    if job["kind"] != "TrainJob":
        return containers[0]
    # The runtime's "node" container gets the trainer's fields and the patch's mounts.
    trainer = job["spec"]["trainer"]
    assert containers[0]["name"] == "node"
    return {
        "name": "node",
        "image": trainer["image"],
        "command": trainer["command"],
        "env": trainer.get("env", []),
        "resources": trainer["resourcesPerNode"],
        "volumeMounts": containers[0]["volumeMounts"],
    }


def _check_kind(job: dict[str, Any], asked: Asked) -> None:
    """The names each operator looks for."""
    spec = job["spec"]
    if asked.kind == "trainjob":
        # A queue makes it a Volcano gang, on a runtime of its own (the stock one has no gang).
        own = ("TrainingRuntime", asked.name) if asked.variant.get("queue") else None
        stock = ("ClusterTrainingRuntime", "torch-distributed")
        assert (spec["runtimeRef"]["kind"], spec["runtimeRef"]["name"]) == (own or stock)
        assert spec["trainer"]["numProcPerNode"] == asked.devices
    elif asked.kind == "pytorchjob":
        assert spec["nprocPerNode"] == str(asked.devices)
        assert list(spec["pytorchReplicaSpecs"]) == ["Master", "Worker"][: min(asked.nnodes, 2)]
        _assert_port(job, "pytorchjob-port")
    elif asked.kind == "ascendjob":
        assert job["metadata"]["labels"]["framework"] == asked.framework
        leader = "Scheduler" if asked.framework == "mindspore" else "Master"
        assert list(spec["replicaSpecs"]) == [leader, "Worker"][: min(asked.nnodes, 2)]
        assert spec["replicaSpecs"][leader]["replicas"] == 1
        _assert_port(job, "ascendjob-port")
    else:
        assert set(spec["plugins"]) == {"pytorch", "svc"}
        assert [t["name"] for t in spec["tasks"]] == ["master", "worker"][: min(asked.nnodes, 2)]


def _assert_port(job: dict[str, Any], name: str) -> None:
    for template, _, _ in _pods([job]):
        assert [p["name"] for p in template["spec"]["containers"][0]["ports"]] == [name]


# Ascend pods share their node's network: each job has a port of its own in this range
# (a hash of its name); pods off the host's network keep the operators' default.
JOB_PORTS = range(20000, 30000)
POD_PORT = 23456


def job_ports(docs: list[dict[str, Any]]) -> set[int]:
    """Every port the job's documents name: container ports, Volcano's --port=, --master-port."""
    found: set[int] = set()
    job = docs[-1]
    for arg in job["spec"].get("plugins", {}).get("pytorch", []):
        if arg.startswith("--port="):
            found.add(int(arg.removeprefix("--port=")))
    for template, _, _ in _pods(docs):
        main = _main_container(job, template)
        found |= {p["containerPort"] for p in template["spec"]["containers"][0].get("ports", [])}
        port = _command_port(main["command"])
        if port is not None:
            found.add(port)
    return found


def _command_port(command: list[str]) -> int | None:
    if "--master-port" not in command:
        return None
    return int(command[command.index("--master-port") + 1])


def _check_port(docs: list[dict[str, Any]], asked: Asked) -> None:
    """One port in every place a job names it; the job's own where pods use the host's network."""
    found = job_ports(docs)
    if asked.kind == "trainjob":
        assert found == set()  # Trainer's torch plugin picks the port
    elif asked.accelerator == "ascend":
        (port,) = found
        assert port in JOB_PORTS
    else:
        assert found == {POD_PORT}


def _check_names(docs: list[dict[str, Any]], asked: Asked) -> None:
    namespace = asked.variant.get("namespace")
    for doc in docs:
        assert DNS_LABEL.fullmatch(doc["metadata"]["name"]), doc["metadata"]["name"]
        assert len(doc["metadata"]["name"]) <= 63
        assert doc["metadata"].get("namespace") == namespace
    assert docs[-1]["metadata"]["name"] == asked.name
    for pod_name in _pod_names(docs[-1]):
        assert DNS_LABEL.fullmatch(pod_name) and len(pod_name) <= 63, pod_name
    assert len(_pod_names(docs[-1])) == asked.nnodes


def _check_gang(docs: list[dict[str, Any]], asked: Asked) -> None:
    """All nodes at once: the scheduler places nnodes pods or none."""
    job = docs[-1]
    spec = job["spec"]
    assert sum(replicas for _, replicas, _ in _pods(docs)) == asked.nnodes
    queue = asked.variant.get("queue")
    if job["kind"] == "Job":
        assert spec["minAvailable"] == asked.nnodes
        assert spec["schedulerName"] == "volcano"
        assert spec["queue"] == (queue or "default")
    elif job["kind"] == "TrainJob":
        assert spec["trainer"]["numNodes"] == asked.nnodes
        # Trainer's Volcano plugin reads the queue from the runtime's JobSet template.
        assert "annotations" not in job["metadata"]
        if queue:
            runtime = docs[0]["spec"]
            assert runtime["podGroupPolicy"] == {"volcano": {}}
            annotations = runtime["template"]["metadata"]["annotations"]
            assert annotations == {"scheduling.volcano.sh/queue-name": queue}
            (pod, _, _) = _pods(docs)[0]
            assert pod["spec"]["schedulerName"] == "volcano"
    else:
        policy = spec["runPolicy"]["schedulingPolicy"]
        assert policy["minAvailable"] == asked.nnodes
        assert policy.get("queue") == (queue or ("default" if job["kind"] == "AscendJob" else None))


def _check_restarts(docs: list[dict[str, Any]], asked: Asked) -> None:
    """A fault reruns the job, a bounded number of times; a configuration error (exit status 2)
    is never rerun where the kind's API can tell it apart."""
    job = docs[-1]
    spec = job["spec"]
    policies = {p for _, _, p in _pods(docs)}
    labels = job["metadata"]["labels"]
    if asked.accelerator == "ascend":
        # MindCluster's resumable training; "force" is not for pods on the host's network.
        assert labels["fault-scheduling"] == "grace"
        # pod-rescheduling needs MindCluster's TaskD in the image: left off.
        assert "pod-rescheduling" not in labels
    else:
        assert not {"fault-scheduling", "fault-retry-times"} & set(labels)
    if asked.kind == "trainjob":
        if asked.variant.get("queue"):
            _check_own_runtime_restarts(docs[0])
        else:
            assert policies == {None}  # the stock runtime's JobSet failure policy decides
    elif asked.kind == "volcano":
        assert policies == {"Never"}
        assert 1 <= spec["maxRetry"] <= 3
        assert "fault-retry-times" not in labels  # it needs a PodFailed action Volcano refuses
        assert volcano_action(spec["policies"], "PodFailed", 2) == "AbortJob"
        for code in (1, 137, 143):
            assert volcano_action(spec["policies"], "PodFailed", code) == "RestartJob"
        assert volcano_action(spec["policies"], "PodEvicted", 0) == "RestartJob"
    elif asked.kind == "pytorchjob":
        # The training-operator reruns exit codes 128-255 (a signal) and fails 1-127 for good;
        # its backoffLimit would count nothing under ExitCode, so none misleads.
        assert policies == {"ExitCode"}
        assert "backoffLimit" not in spec["runPolicy"]
    else:
        # MindCluster's unconditional retry needs restartPolicy Never, and only 910b has it.
        assert policies == {"Never"}
        assert 1 <= spec["runPolicy"]["backoffLimit"] <= 3
        assert labels["fault-retry-times"] == "3"


def volcano_action(policies: list[dict[str, Any]], event: str, exit_code: int) -> str:
    """The action Volcano's job controller takes for a pod's ``event``: the first policy whose
    event matches, or else whose exitCode matches, in order (volcano-sh/volcano:
    pkg/controllers/job/job_controller_util.go applyPolicies); SyncJob when none does."""
    for policy in policies:
        if event in [*policy.get("events", []), policy.get("event")]:
            return policy["action"]
        if policy.get("exitCode") is not None and policy["exitCode"] == exit_code:
            return policy["action"]
    return "SyncJob"


def trainjob_outcome(runtime: dict[str, Any], exit_code: int, disrupted: bool = False) -> str:
    """What a node pod that failed with ``exit_code`` does to a TrainJob on ``runtime``: "pod
    replaced", "restart" (the JobSet) or "fail", by the Job's podFailurePolicy (rules in order,
    Kubernetes' Job controller), backoffLimit, then the JobSet's failurePolicy rules."""
    jobset = runtime["spec"]["template"]["spec"]
    (node,) = jobset["replicatedJobs"]
    job = node["template"]["spec"]
    reason = "BackoffLimitExceeded"
    for rule in job["podFailurePolicy"]["rules"]:
        codes = rule.get("onExitCodes")
        conditions = [c["type"] for c in rule.get("onPodConditions", [])]
        if codes and codes["operator"] == "In" and exit_code in codes["values"]:
            assert codes["containerName"] == "node"
        elif not (disrupted and "DisruptionTarget" in conditions):
            continue
        if rule["action"] == "Ignore":
            return "pod replaced"
        if rule["action"] == "FailJob":
            reason = "PodFailurePolicy"
        break
    if reason == "BackoffLimitExceeded" and job["backoffLimit"] > 0:
        return "pod replaced"
    for rule in jobset["failurePolicy"].get("rules", []):
        if reason in rule.get("onJobFailureReasons", [reason]):
            return {"FailJobSet": "fail"}.get(rule["action"], "restart")
    return "restart" if jobset["failurePolicy"]["maxRestarts"] > 0 else "fail"


def _check_own_runtime_restarts(runtime: dict[str, Any]) -> None:
    jobset = runtime["spec"]["template"]["spec"]
    assert 1 <= jobset["failurePolicy"]["maxRestarts"] <= 3
    pod = jobset["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert trainjob_outcome(runtime, 2) == "fail"
    for code in (1, 137):
        assert trainjob_outcome(runtime, code) == "restart"
    assert trainjob_outcome(runtime, 143, disrupted=True) == "pod replaced"


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    matched = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In"
        matched = matched and labels.get(expr["key"]) in expr["values"]
    return matched


def _check_placement(template: dict[str, Any], asked: Asked) -> None:
    """One pod per node: a required anti-affinity on the host that selects this job's pods."""
    terms = template["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    labels = template["metadata"]["labels"]
    assert any(
        t["topologyKey"] == "kubernetes.io/hostname" and _selects(t["labelSelector"], labels)
        for t in terms
    )


def _volume(template: dict[str, Any], mounts: list[dict], path: str) -> dict[str, Any]:
    (mount,) = [m for m in mounts if m["mountPath"] == path]
    (volume,) = [v for v in template["spec"]["volumes"] if v["name"] == mount["name"]]
    return volume


def _check_container(main: dict[str, Any], template: dict[str, Any], asked: Asked) -> None:
    resource = ACCELERATOR[asked.accelerator]
    assert main["resources"] == {
        "requests": {resource: asked.devices},
        "limits": {resource: asked.devices},
    }
    assert main["image"] == IMAGE
    # Ascend: the port is checked against the job's others in _check_port.
    port = _command_port(main["command"]) if asked.accelerator == "ascend" else None
    assert main["command"] == _expected_command(asked, port)
    mounts = main["volumeMounts"]
    assert _volume(template, mounts, "/dev/shm") == {
        "name": "dshm",
        "emptyDir": {"medium": "Memory"},
    }
    for key, path in (("data_pvc", "/data"), ("output_pvc", "/output")):
        if asked.variant.get(key):
            claim = _volume(template, mounts, path)["persistentVolumeClaim"]["claimName"]
            assert claim == asked.variant[key]
        else:
            assert not [m for m in mounts if m["mountPath"] == path]
    env = {e["name"]: e for e in main.get("env", [])}
    if asked.accelerator == "ascend":
        _check_ascend_pod(template, mounts, env)
    else:
        assert not [v for v in template["spec"]["volumes"] if "hostPath" in v]
        assert "XDL_IP" not in env
    expected_name = {"pytorchjob": "pytorch", "ascendjob": "ascend", "trainjob": "node"}
    assert main["name"] == expected_name.get(asked.kind, asked.framework)


def _expected_command(asked: Asked, port: int | None) -> list[str]:
    timeout = str(asked.variant.get("join_timeout", 600))
    command = ["bash", "/app/scripts/run_8p.sh", "--cluster", asked.kind, "--join-timeout", timeout]
    # The pod's size is said, so a pod of another size than the project's trains on its own.
    command += ["--nproc", str(asked.devices)]
    if asked.accelerator == "ascend":
        # On the host's network the launcher is told the job's own port.
        command += ["--master-port", str(port)]
    if asked.variant.get("data_pvc"):
        command += ["--data", "/data"]
    if asked.variant.get("output_pvc"):
        command += ["--output", "/output"]
    # No --resume: a restarted pod's same command continues the run in its output.
    return command


def _check_ascend_pod(template: dict[str, Any], mounts: list[dict], env: dict[str, dict]) -> None:
    for path in ("/usr/local/Ascend/driver", "/usr/local/Ascend/add-ons"):
        assert _volume(template, mounts, path)["hostPath"]["path"] == path
    assert env["XDL_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert template["metadata"]["labels"]["ring-controller.atlas"] == "ascend-910b"
    # ascend-for-volcano's 910B handler on Kunpeng (arm) hosts, and the host's network as
    # MindCluster runs its pods.
    assert template["spec"]["nodeSelector"] == _on_arm("module-910b-8")
    assert template["spec"]["hostNetwork"] is True
    assert template["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"


def _on_arm(accelerator_type: str) -> dict[str, str]:
    """An Ascend pod's nodeSelector: the chip's handler, on Kunpeng (arm) hosts by default."""
    return {"accelerator-type": accelerator_type, "host-arch": "huawei-arm"}


def _check_rank_table(docs: list[dict[str, Any]], asked: Asked) -> None:
    config_map, job = docs
    assert config_map["kind"] == "ConfigMap"
    assert config_map["metadata"]["name"] == f"rings-config-{asked.name}"
    assert json.loads(config_map["data"]["hccl.json"]) == {"status": "initializing"}
    ring = config_map["metadata"]["labels"]["ring-controller.atlas"]
    assert job["metadata"]["labels"]["ring-controller.atlas"] == ring
    for template, _, _ in _pods([job]):
        main = template["spec"]["containers"][0]
        volume = _volume(template, main["volumeMounts"], RANK_TABLE_DIR)
        assert volume["configMap"]["name"] == config_map["metadata"]["name"]
        env = {e["name"]: e.get("value") for e in main["env"]}
        assert env["RANK_TABLE_FILE"] == f"{RANK_TABLE_DIR}/hccl.json"


# --- Trainer releases, gangs, Ascend node selection -------------------------------------------

# Each Trainer release patches the stock runtime's pods through its own field (written here
# from the releases' CRDs, tests/data/crds/trainer-v2.*), and refuses the others' fields.
OVERRIDE_FIELDS = {
    "2.0": "podSpecOverrides",
    "2.1": "podTemplateOverrides",
    "2.2+": "runtimePatches",
}
RELEASES = {"2.0": "trainer-v2.0", "2.1": "trainer-v2.1", "2.2+": "trainer-v2.2"}


def _trainjob(**asked: Any) -> list[dict[str, Any]]:
    record = Options(project="demo", framework="pytorch", target="cuda", nnodes=2)
    request = jobs.JobRequest(kind="trainjob", image=IMAGE, data_pvc="mnist", **asked)
    return manifests.documents(jobs.resolve(record, request, Path("/nonexistent")))


@pytest.mark.parametrize("version", OVERRIDE_FIELDS)
def test_a_trainjob_fits_its_trainer_release_and_no_other(version: str) -> None:
    (job,) = _trainjob(trainer_version=version)
    fields = [f for f in OVERRIDE_FIELDS.values() if f in job["spec"]]
    assert fields == [OVERRIDE_FIELDS[version]]
    assert k8s_schema.problems(job, RELEASES[version]) == []
    for other, release in RELEASES.items():
        if other != version:
            found = k8s_schema.problems(job, release)
            assert any(OVERRIDE_FIELDS[version] in p for p in found), (other, found)
    # The data volume reaches the node container whatever the field.
    assert '"claimName": "mnist"' in json.dumps(job["spec"][fields[0]])


GANG_CASES = [(v, g) for v in OVERRIDE_FIELDS for g in jobs.GANGS if (v, g) != ("2.0", "volcano")]


@pytest.mark.parametrize(("version", "gang"), GANG_CASES)
def test_a_trainjob_gang_brings_its_own_runtime(version: str, gang: str) -> None:
    runtime, job = _trainjob(trainer_version=version, gang=gang, join_timeout=300)
    for doc in (runtime, job):
        assert k8s_schema.problems(doc, RELEASES[version]) == [], doc["kind"]
    assert job["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": runtime["metadata"]["name"],
    }
    assert not [f for f in OVERRIDE_FIELDS.values() if f in job["spec"]]
    policy = runtime["spec"]["podGroupPolicy"]
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
    }
    pod = node["template"]["spec"]["template"]["spec"]
    if gang == "volcano":
        assert policy == {"volcano": {}} and pod["schedulerName"] == "volcano"
    else:
        # The gang may wait to be placed whole as long as the ranks wait to meet.
        assert policy == {"coscheduling": {"scheduleTimeoutSeconds": 300}}
        assert pod["schedulerName"] == "scheduler-plugins-scheduler"
    assert pod["securityContext"]["fsGroup"] == 1000
    torch = runtime["spec"]["mlPolicy"]["torch"]
    assert torch == ({} if version == "2.2+" else {"numProcPerNode": 8})
    _check_own_runtime_restarts(runtime)


@pytest.mark.parametrize(("chip", "retries"), [("910", None), ("910b", "3"), ("910_93", None)])
def test_only_910b_ascendjobs_ask_for_mindclusters_unconditional_retry(
    chip: str, retries: str | None
) -> None:
    """fault-retry-times: only Atlas 800T A2 and 900 A2 PoD support it (MindCluster's YAML
    description), and a Volcano Job cannot take it; fault-scheduling goes on every Ascend job."""
    record = Options(project="demo", framework="mindspore", target="ascend", chip=chip)
    devices = 16 if chip == "910_93" else 8
    for kind in ("ascendjob", "volcano"):
        request = jobs.JobRequest(kind=kind, image=IMAGE, devices_per_node=devices)
        docs = manifests.documents(jobs.resolve(record, request, Path("/nonexistent")))
        labels = docs[-1]["metadata"]["labels"]
        assert labels["fault-scheduling"] == "grace"
        assert labels.get("fault-retry-times") == (retries if kind == "ascendjob" else None)
        for doc in docs:
            assert k8s_schema.problems(doc) == []


def test_an_a3_job_takes_whole_16_npu_nodes_as_one_super_pod() -> None:
    record = Options(project="demo", framework="mindspore", target="ascend", chip="910_93")
    for kind in ("ascendjob", "volcano"):
        request = jobs.JobRequest(kind=kind, image=IMAGE, nnodes=3, devices_per_node=16)
        docs = manifests.documents(jobs.resolve(record, request, Path("/nonexistent")))
        job = docs[-1]
        assert job["metadata"]["annotations"] == {"sp-block": "48"}
        _check_16_npu_pods(docs, "module-a3-16-super-pod")


def _check_16_npu_pods(docs: list[dict[str, Any]], accelerator_type: str) -> None:
    """Pods of 16 NPUs on the servers of 16, in manifests the server accepts."""
    for template, _, _ in _pods(docs):
        assert template["spec"]["nodeSelector"] == _on_arm(accelerator_type)
        resources = template["spec"]["containers"][0]["resources"]
        assert resources["limits"] == {"huawei.com/Ascend910": 16}
    for doc in docs:
        assert k8s_schema.problems(doc) == []


@pytest.mark.parametrize(("chip", "label"), [("910", "module"), ("910b", "module-910b-8")])
def test_ascend_nodes_are_selected_by_chip_unless_told(chip: str, label: str) -> None:
    record = Options(project="demo", framework="pytorch", target="ascend")
    for asked, expected in (({}, label), ({"accelerator_type": "module-a3-16"}, "module-a3-16")):
        request = jobs.JobRequest(kind="ascendjob", image=IMAGE, chip=chip, **asked)
        docs = manifests.documents(jobs.resolve(record, request, Path("/nonexistent")))
        for template, _, _ in _pods(docs):
            assert template["spec"]["nodeSelector"] == _on_arm(expected)
        assert "annotations" not in docs[-1]["metadata"]  # sp-block is A3's alone


def test_an_a2_pod_of_16_npus_goes_to_a_box16_server() -> None:
    # Atlas 200T A2 Box16: 16 NPUs in two groups of 8 (ascend-for-volcano module910bx16).
    record = Options(project="demo", framework="pytorch", target="ascend")
    request = jobs.JobRequest(kind="ascendjob", image=IMAGE, chip="910b", devices_per_node=16)
    docs = manifests.documents(jobs.resolve(record, request, Path("/nonexistent")))
    _check_16_npu_pods(docs, "module-910b-16")
