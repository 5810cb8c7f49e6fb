"""MindCluster AscendJob: MindSpore as a Scheduler (holding NPUs) plus Workers, PyTorch as a
Master plus Workers; the Ascend Operator injects the framework's env."""

from __future__ import annotations

from generator.jobs import faults, pod
from generator.jobs.pod import Doc
from generator.jobs.spec import JobSpec

API_VERSION = "mindxdl.gitee.com/v1"
RING_LABEL = "ring-controller.atlas"
# The operator finds the training container and its port by these names; the port it
# gives the Service and the leader's MASTER_PORT/MS_SCHED_PORT is the container's
# (Ascend/mind-cluster: component/ascend-operator/pkg/controllers/v1/service.go
# getServiceIpAndPort; 2222 when none, pkg/api/v1/defaults.go). Pods on the host's network
# take the job's own (spec.port, generator/jobs/ascend.py).
CONTAINER = "ascend"
PORT_NAME = "ascendjob-port"
# MindSpore's leader is the Scheduler: with NPUs it is node 0 and also trains (the
# operator sets NPU_POD=true there and numbers Workers from 1), so nnodes pods fill
# nnodes nodes. PyTorch's leader is the Master (RANK 0).
LEADER = {"mindspore": "Scheduler", "pytorch": "Master"}


def documents(spec: JobSpec) -> list[Doc]:
    """One AscendJob; the operator refuses a replica spec with 0 replicas, so a
    one-node job has the leader only."""
    replicas = {LEADER[spec.framework]: _replica(spec, 1)}
    if spec.nnodes > 1:
        replicas["Worker"] = _replica(spec, spec.nnodes - 1)
    labels = {
        "framework": spec.framework,
        RING_LABEL: pod.ring_controller(spec),
        **faults.mindcluster_labels(spec.kind, spec.chip),
    }
    metadata = pod.metadata(spec, labels)
    if pod.job_annotations(spec):
        metadata["annotations"] = pod.job_annotations(spec)
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "AscendJob",
            "metadata": metadata,
            "spec": {
                "schedulerName": "volcano",
                "runPolicy": {
                    # Whole-job reschedules before the job fails.
                    "backoffLimit": faults.RESTARTS,
                    # Gang: the operator checks the queue exists, so it is always named.
                    "schedulingPolicy": {
                        "minAvailable": spec.nnodes,
                        "queue": spec.queue or "default",
                    },
                },
                "successPolicy": "AllWorkers",
                "replicaSpecs": replicas,
            },
        }
    ]


def _replica(spec: JobSpec, count: int) -> Doc:
    main = pod.container(spec, CONTAINER, ports=[{"name": PORT_NAME, "containerPort": spec.port}])
    extra = {RING_LABEL: pod.ring_controller(spec)}
    template = pod.template(spec, main, extra_labels=extra)
    # Never: MindCluster's unconditional retry (fault-retry-times) requires it.
    return {"replicas": count, "restartPolicy": "Never", "template": template}
