"""Kubeflow Trainer v2 TrainJob on the torch-distributed ClusterTrainingRuntime (PyTorch, CUDA)."""

from __future__ import annotations

from generator.jobs import pod
from generator.jobs.pod import Doc
from generator.jobs.spec import JobSpec

API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "torch-distributed"
# The runtime's replicated job and its container are both called "node".
NODE = "node"
# Each writer of runtimePatches owns the entry keyed by its manager name.
MANAGER = "train-template/gen-job-render"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"


def documents(spec: JobSpec) -> list[Doc]:
    """One TrainJob.

    Gang scheduling and restarts belong to the runtime (its podGroupPolicy and the
    JobSet failure policy, which fails the JobSet when a node's Job fails); a
    TrainJob can only patch placement, volumes and mounts into it.
    """
    metadata = pod.metadata(spec)
    if spec.queue:
        # Read by Trainer's Volcano plugin when the runtime's podGroupPolicy is volcano.
        metadata["annotations"] = {VOLCANO_QUEUE: spec.queue}
    trainer: Doc = {
        "image": spec.image,
        "command": pod.command(spec),
        "numNodes": spec.nnodes,
        "numProcPerNode": spec.devices_per_node,
        "resourcesPerNode": pod.resources(spec),
    }
    if pod.env(spec):
        trainer["env"] = pod.env(spec)
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "TrainJob",
            "metadata": metadata,
            "spec": {
                "runtimeRef": {
                    "apiGroup": "trainer.kubeflow.org",
                    "kind": "ClusterTrainingRuntime",
                    "name": RUNTIME,
                },
                "trainer": trainer,
                "runtimePatches": [{"manager": MANAGER, "trainingRuntimeSpec": _patch(spec)}],
            },
        }
    ]


def _patch(spec: JobSpec) -> Doc:
    """Our pod label, anti-affinity, volumes and mounts, patched into the runtime's nodes."""
    pod_patch = {
        "metadata": {"labels": pod.labels(spec)},
        "spec": {
            "affinity": pod.affinity(spec),
            "securityContext": dict(pod.SECURITY_CONTEXT),
            # Env can only be set through trainer.env for the "node" container.
            "containers": [{"name": NODE, "volumeMounts": pod.volume_mounts(spec)}],
            "volumes": pod.volumes(spec),
        },
    }
    job = {"name": NODE, "template": {"spec": {"template": pod_patch}}}
    return {"template": {"spec": {"replicatedJobs": [job]}}}
