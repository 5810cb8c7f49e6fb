"""Volcano Job: a master task and a worker task, with the pytorch and svc plugins; on
Ascend, MindCluster's rings-config ConfigMap and labels as well."""

from __future__ import annotations

from generator.jobs import faults, pod
from generator.jobs.pod import Doc
from generator.jobs.spec import JobSpec

API_VERSION = "batch.volcano.sh/v1alpha1"
RING_LABEL = "ring-controller.atlas"
# The pytorch plugin sets MASTER_ADDR (the master pod's svc hostname), MASTER_PORT (--port:
# spec.port, the job's own on Ascend's host network), WORLD_SIZE (pods) and RANK (master 0,
# worker i+1); svc gives pods stable hostnames.
PLUGINS = {"pytorch": ["--master=master", "--worker=worker"], "svc": []}
# What the ConfigMap holds until Ascend Operator writes the table ("status": "completed").
INITIAL_RANK_TABLE = '{"status":"initializing"}'


def documents(spec: JobSpec) -> list[Doc]:
    """The Job, after its rank-table ConfigMap on Ascend (kubectl applies in order)."""
    ascend: dict[str, str] = {}
    if spec.ascend:
        ascend = {
            RING_LABEL: pod.ring_controller(spec),
            **faults.mindcluster_labels(spec.kind, spec.chip),
        }
    tasks = [_task(spec, "master", 1)]
    if spec.nnodes > 1:
        tasks.append(_task(spec, "worker", spec.nnodes - 1))
    metadata = pod.metadata(spec, ascend)
    if pod.job_annotations(spec):
        metadata["annotations"] = pod.job_annotations(spec)
    job = {
        "apiVersion": API_VERSION,
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "schedulerName": "volcano",
            "queue": spec.queue or "default",
            # Gang: no pod starts until every node's pod can.
            "minAvailable": spec.nnodes,
            # A lost or failed pod reruns the whole gang, a configuration error never.
            "maxRetry": faults.RESTARTS,
            "policies": [dict(p) for p in faults.VOLCANO_POLICIES],
            "plugins": _plugins(spec),
            "tasks": tasks,
        },
    }
    return [_rings_config(spec), job] if spec.ascend else [job]


def _plugins(spec: JobSpec) -> Doc:
    found = {name: list(args) for name, args in PLUGINS.items()}
    found["pytorch"].append(f"--port={spec.port}")
    return found


def _task(spec: JobSpec, name: str, count: int) -> Doc:
    extra = {RING_LABEL: pod.ring_controller(spec), "app": spec.framework} if spec.ascend else {}
    main = pod.container(spec, spec.framework)
    template = pod.template(spec, main, restart_policy="Never", extra_labels=extra)
    return {"name": name, "replicas": count, "template": template}


def _rings_config(spec: JobSpec) -> Doc:
    """The ConfigMap Ascend Operator writes the job's hccl.json into, by its name."""
    ring = {RING_LABEL: pod.ring_controller(spec)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": pod.metadata(spec, ring, name=pod.rings_config(spec)),
        "data": {"hccl.json": INITIAL_RANK_TABLE},
    }
