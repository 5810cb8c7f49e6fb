"""Kubeflow Trainer v2 TrainJob (PyTorch, CUDA), for Trainer v2.0, v2.1 or v2.2 and later.

Without a gang, the job runs on the cluster's torch-distributed ClusterTrainingRuntime, which
has no podGroupPolicy: pods start as they are placed and torchrun waits for the others. Our
pod pieces reach its pods through the one override field each release has. With --gang or
--queue the job brings a TrainingRuntime of its own whose podGroupPolicy makes the nodes a
gang (Volcano, or scheduler-plugins' coscheduling), whose pods carry those pieces, and whose
JobSet restarts on a fault but not on a configuration error (generator/jobs/faults.py).
"""

from __future__ import annotations

from generator.jobs import faults, pod
from generator.jobs.pod import Doc
from generator.jobs.spec import JobSpec

API_VERSION = "trainer.kubeflow.org/v1alpha1"
GROUP = "trainer.kubeflow.org"
RUNTIME = "torch-distributed"
# The runtime's replicated job and its container are both called "node"; Trainer's torch
# plugin gives PET_* to the container of the job carrying the ancestor-step label.
NODE = "node"
ANCESTOR = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
# Each writer of runtimePatches (v2.2+) owns the entry keyed by its manager name.
MANAGER = "train-template/gen-job-render"
# Trainer's Volcano plugin (v2.1+) reads the queue from the JobSet template's annotations.
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
# The scheduler that runs each gang plugin: Volcano's, and scheduler-plugins' as a second
# scheduler (its Helm chart's name), where the coscheduling PodGroup is honoured.
SCHEDULERS = {"volcano": "volcano", "coscheduling": "scheduler-plugins-scheduler"}
# The pod-override field of each release: v2.0 patches pod fields flat, v2.1 a pod template,
# v2.2 the runtime spec itself (only v2.2 reaches the pod's securityContext).
OVERRIDE_FIELDS = {
    "2.0": "podSpecOverrides",
    "2.1": "podTemplateOverrides",
    "2.2+": "runtimePatches",
}


def documents(spec: JobSpec) -> list[Doc]:
    """The TrainJob, after its own TrainingRuntime when it is a gang."""
    trainer: Doc = {
        "image": spec.image,
        "command": pod.command(spec),
        "numNodes": spec.nnodes,
        "numProcPerNode": spec.devices_per_node,
        "resourcesPerNode": pod.resources(spec),
    }
    if pod.env(spec):
        trainer["env"] = pod.env(spec)
    kind, runtime = (
        ("TrainingRuntime", spec.name) if spec.gang else ("ClusterTrainingRuntime", RUNTIME)
    )
    job_spec: Doc = {
        "runtimeRef": {"apiGroup": GROUP, "kind": kind, "name": runtime},
        "trainer": trainer,
    }
    if not spec.gang:
        job_spec[OVERRIDE_FIELDS[spec.trainer_version]] = OVERRIDES[spec.trainer_version](spec)
    job = {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": pod.metadata(spec),
        "spec": job_spec,
    }
    return [_runtime(spec), job] if spec.gang else [job]


def _mounts(spec: JobSpec) -> Doc:
    return {"name": NODE, "volumeMounts": pod.volume_mounts(spec)}


def _v2_0(spec: JobSpec) -> list[Doc]:
    """v2.0's podSpecOverrides: mounts and volumes only (no labels, affinity or fsGroup)."""
    return [
        {
            "targetJobs": [{"name": NODE}],
            "containers": [_mounts(spec)],
            "volumes": pod.volumes(spec),
        }
    ]


def _v2_1(spec: JobSpec) -> list[Doc]:
    """v2.1's podTemplateOverrides: our label and anti-affinity too (no fsGroup)."""
    pod_spec = {
        "affinity": pod.affinity(spec),
        "containers": [_mounts(spec)],
        "volumes": pod.volumes(spec),
    }
    return [
        {
            "targetJobs": [{"name": NODE}],
            "metadata": {"labels": pod.labels(spec)},
            "spec": pod_spec,
        }
    ]


def _v2_2(spec: JobSpec) -> list[Doc]:
    """v2.2's runtimePatches: the pod as every other kind renders it."""
    pod_patch = {
        "metadata": {"labels": pod.labels(spec)},
        "spec": {
            "affinity": pod.affinity(spec),
            "securityContext": dict(pod.SECURITY_CONTEXT),
            # Env can only be set through trainer.env for the "node" container.
            "containers": [_mounts(spec)],
            "volumes": pod.volumes(spec),
        },
    }
    job = {"name": NODE, "template": {"spec": {"template": pod_patch}}}
    runtime = {"template": {"spec": {"replicatedJobs": [job]}}}
    return [{"manager": MANAGER, "trainingRuntimeSpec": runtime}]


OVERRIDES = {"2.0": _v2_0, "2.1": _v2_1, "2.2+": _v2_2}


def _runtime(spec: JobSpec) -> Doc:
    """A TrainingRuntime for this job alone: torch, a gang policy, and our pods."""
    gang = spec.gang
    # v2.2 dropped the runtime's numProcPerNode: the TrainJob's says it.
    torch = {} if spec.trainer_version == "2.2+" else {"numProcPerNode": spec.devices_per_node}
    if gang == "volcano":
        policy: Doc = {"volcano": {}}
    else:
        # How long the gang may wait to be placed whole, as long as the ranks wait to meet.
        policy = {"coscheduling": {"scheduleTimeoutSeconds": spec.join_timeout}}
    pod_spec = {
        "restartPolicy": faults.POD_RESTART_POLICY,
        "schedulerName": SCHEDULERS[gang],
        "affinity": pod.affinity(spec),
        "securityContext": dict(pod.SECURITY_CONTEXT),
        "containers": [
            {"name": NODE, "image": spec.image, "volumeMounts": pod.volume_mounts(spec)}
        ],
        "volumes": pod.volumes(spec),
    }
    node = {
        "name": NODE,
        "template": {
            "metadata": {"labels": dict(ANCESTOR)},
            "spec": {
                **faults.job_failure_policy(NODE),
                "template": {"metadata": {"labels": pod.labels(spec)}, "spec": pod_spec},
            },
        },
    }
    template: Doc = {
        "spec": {"failurePolicy": faults.jobset_failure_policy(), "replicatedJobs": [node]}
    }
    if spec.queue:
        template = {"metadata": {"annotations": {VOLCANO_QUEUE: spec.queue}}, **template}
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": pod.metadata(spec, {"trainer.kubeflow.org/framework": "torch"}),
        "spec": {
            "mlPolicy": {"numNodes": spec.nnodes, "torch": torch},
            "podGroupPolicy": policy,
            "template": template,
        },
    }
