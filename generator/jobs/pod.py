"""The pod every kind runs: the launcher command, env, accelerators, volumes, placement."""

from __future__ import annotations

from typing import Any

from generator.jobs.ascend import HOST_ARCH, HOST_ARCH_LABELS
from generator.jobs.spec import RING_LABELS, JobSpec

Doc = dict[str, Any]

# The image's WORKDIR holds the project; every pod runs the project's own launcher.
LAUNCHER = "/app/scripts/run_8p.sh"
DATA_DIR, OUTPUT_DIR = "/data", "/output"
# Our own pod label: anti-affinity selects on it, whatever labels the operator adds.
JOB_LABEL = "train-template/job"
GPU, NPU = "nvidia.com/gpu", "huawei.com/Ascend910"
# ascend-for-volcano picks the scheduling handler by this node label (see spec.py).
ACCELERATOR_TYPE = "accelerator-type"
# A3 super pods: the NPUs of one logical super pod, as ascend-for-volcano accepts it
# (generator/jobs/ascend.py sp_block, with its sources); MindCluster reads it from the job's
# annotations.
SP_BLOCK = "sp-block"
# MindCluster's rank table: Ascend Operator fills the rings-config-<job> ConfigMap's
# hccl.json once every pod is placed; the launcher waits for "status": "completed".
RANK_TABLE_DIR = "/user/serverid/devindex/config"
RANK_TABLE_VOLUME = "ascend-910-config"
# The host paths MindCluster's examples mount into every NPU pod: the driver's
# user-space libraries and tools, which the CANN image does not carry.
ASCEND_HOST_PATHS = {
    "ascend-driver": "/usr/local/Ascend/driver",
    "ascend-add-ons": "/usr/local/Ascend/add-ons",
    "localtime": "/etc/localtime",
}
# Both images run as uid 1000 (train, HwHiAiUser); group 1000 on the volumes lets that
# user write a PersistentVolumeClaim owned by root.
FS_GROUP = 1000


def command(spec: JobSpec) -> list[str]:
    """The launcher and what it needs to know; the operator's env says the rest."""
    args = ["bash", LAUNCHER, "--cluster", spec.kind, "--join-timeout", str(spec.join_timeout)]
    if spec.sweep_parallel:  # the sweep on the pod's devices: trials side by side
        args[2:2] = ["--sweep"]
        args += ["--parallel", str(spec.sweep_parallel)]
    # The pod's size, whatever the project was generated for: its processes, one a device.
    args += ["--nproc", str(spec.devices_per_node)]
    if spec.ascend:
        # On the host's network: the job's own port, the one its operator is given too.
        args += ["--master-port", str(spec.port)]
    if spec.data_pvc:
        args += ["--data", DATA_DIR]
    if spec.output_pvc:
        args += ["--output", OUTPUT_DIR]
    # No --resume: a pod the operator restarts runs the same command, which continues the run
    # its output holds; another configuration there is refused (the project's outputs/truth.py).
    # A sweep continues its study the same way (run_sweep.sh: --resume auto).
    return args


def _field(name: str, path: str) -> Doc:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def env(spec: JobSpec) -> list[Doc]:
    """Variables the launcher reads that no operator injects (none on CUDA)."""
    if not spec.ascend:
        return []
    found = [
        # The launcher finds this pod's server entry in hccl.json by the host IP.
        _field("XDL_IP", "status.hostIP"),
        _field("POD_IP", "status.podIP"),
        # Ascend Docker Runtime mounts the NPUs the device plugin wrote here.
        _field("ASCEND_VISIBLE_DEVICES", f"metadata.annotations['{NPU}']"),
    ]
    if spec.kind == "volcano":
        found.append({"name": "RANK_TABLE_FILE", "value": f"{RANK_TABLE_DIR}/hccl.json"})
    return found


def resources(spec: JobSpec) -> Doc:
    """One pod per node takes every accelerator of its node."""
    wanted = {NPU if spec.ascend else GPU: spec.devices_per_node}
    return {"requests": dict(wanted), "limits": dict(wanted)}


def volumes(spec: JobSpec) -> list[Doc]:
    found: list[Doc] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    for name, claim in (("data", spec.data_pvc), ("output", spec.output_pvc)):
        if claim:
            found.append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
    if spec.ascend:
        found += [{"name": n, "hostPath": {"path": p}} for n, p in ASCEND_HOST_PATHS.items()]
    if spec.ascend and spec.kind == "volcano":
        config_map = {"name": rings_config(spec)}
        found.append({"name": RANK_TABLE_VOLUME, "configMap": config_map})
    return found


def volume_mounts(spec: JobSpec) -> list[Doc]:
    # DataLoader workers and HCCL share memory through /dev/shm: 64 MiB is Docker's default.
    found: list[Doc] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    for name, claim, path in (
        ("data", spec.data_pvc, DATA_DIR),
        ("output", spec.output_pvc, OUTPUT_DIR),
    ):
        if claim:
            found.append({"name": name, "mountPath": path})
    if spec.ascend:
        found += [
            {"name": n, "mountPath": p, "readOnly": True} for n, p in ASCEND_HOST_PATHS.items()
        ]
    if spec.ascend and spec.kind == "volcano":
        found.append({"name": RANK_TABLE_VOLUME, "mountPath": RANK_TABLE_DIR})
    return found


def rings_config(spec: JobSpec) -> str:
    return f"rings-config-{spec.name}"


def ring_controller(spec: JobSpec) -> str:
    """MindCluster's product label: ascend-910 or ascend-910b."""
    return f"ascend-{RING_LABELS[spec.chip]}"


def labels(spec: JobSpec) -> dict[str, str]:
    return {JOB_LABEL: spec.name}


def metadata(spec: JobSpec, extra: dict[str, str] | None = None, name: str = "") -> Doc:
    """A document's name (the job's unless given), namespace and labels."""
    found: Doc = {"name": name or spec.name}
    if spec.namespace:
        found["namespace"] = spec.namespace
    found["labels"] = {**labels(spec), **(extra or {})}
    return found


def job_annotations(spec: JobSpec) -> Doc:
    """An Ascend job's scheduling annotations: the super pod block on A3 super pods."""
    return {SP_BLOCK: str(spec.sp_block)} if spec.sp_block else {}


def affinity(spec: JobSpec) -> Doc:
    """One pod per node: no two pods of this job on the same host."""
    selector = {"matchExpressions": [{"key": JOB_LABEL, "operator": "In", "values": [spec.name]}]}
    term = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def placement(spec: JobSpec) -> Doc:
    """Where the pod runs: one per node; on Ascend, on nodes of the chip and the image's CPU,
    on the host's network, as MindCluster's examples run (HCCL and the rank table use the
    host's address)."""
    found: Doc = {"affinity": affinity(spec)}
    if spec.ascend:
        found["nodeSelector"] = {
            ACCELERATOR_TYPE: spec.accelerator_type,
            HOST_ARCH: HOST_ARCH_LABELS[spec.arch],
        }
        # The job's Service names still resolve from the host's network.
        found.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    return found


def container(spec: JobSpec, name: str, ports: list[Doc] | None = None) -> Doc:
    found: Doc = {
        "name": name,
        "image": spec.image,
        # Pushed tags name a commit and are never reused.
        "imagePullPolicy": "IfNotPresent",
        "command": command(spec),
    }
    if env(spec):
        found["env"] = env(spec)
    if ports:
        found["ports"] = ports
    found["resources"] = resources(spec)
    found["volumeMounts"] = volume_mounts(spec)
    return found


SECURITY_CONTEXT: Doc = {"fsGroup": FS_GROUP, "fsGroupChangePolicy": "OnRootMismatch"}


def template(
    spec: JobSpec,
    main: Doc,
    *,
    restart_policy: str | None = None,
    extra_labels: dict[str, str] | None = None,
) -> Doc:
    """A pod template running ``main``; operators that own restarts leave the policy out."""
    pod: Doc = {"restartPolicy": restart_policy} if restart_policy else {}
    pod.update(placement(spec))
    pod.update(securityContext=dict(SECURITY_CONTEXT), containers=[main], volumes=volumes(spec))
    return {"metadata": {"labels": {**labels(spec), **(extra_labels or {})}}, "spec": pod}
