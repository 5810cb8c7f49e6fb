"""Kubeflow training-operator v1 PyTorchJob: one Master and nnodes-1 Workers (PyTorch, CUDA)."""

from __future__ import annotations

from generator.jobs import faults, pod
from generator.jobs.pod import Doc
from generator.jobs.spec import JobSpec

API_VERSION = "kubeflow.org/v1"
# The operator finds the training container by this name and the rendezvous port by
# this port name; 23456 (spec.port on CUDA) is its default.
CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"


def documents(spec: JobSpec) -> list[Doc]:
    """One PyTorchJob; nprocPerNode makes the operator set PET_* for torchrun."""
    scheduling: Doc = {"minAvailable": spec.nnodes}
    if spec.queue:
        scheduling["queue"] = spec.queue
    replicas = {"Master": _replica(spec, 1)}
    if spec.nnodes > 1:
        replicas["Worker"] = _replica(spec, spec.nnodes - 1)
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "PyTorchJob",
            "metadata": pod.metadata(spec),
            "spec": {
                "nprocPerNode": str(spec.devices_per_node),
                # Gang scheduling when the operator runs with a gang scheduler.
                "runPolicy": {"schedulingPolicy": scheduling},
                "pytorchReplicaSpecs": replicas,
            },
        }
    ]


def _replica(spec: JobSpec, count: int) -> Doc:
    main = pod.container(spec, CONTAINER, ports=[{"name": PORT_NAME, "containerPort": spec.port}])
    template = pod.template(spec, main)
    return {
        "replicas": count,
        "restartPolicy": faults.PYTORCHJOB_RESTART_POLICY,
        "template": template,
    }
