"""What each kind does when a pod fails: the job restarts on a fault, a bounded number of times,
and every pod reruns the same command, which continues the run its output holds; a
configuration error (the launcher's exit status 2) is never rerun where the API can tell it."""

from __future__ import annotations

from typing import Any

Doc = dict[str, Any]

# train.py and the launchers exit 2 on a configuration error: a rerun fails the same way.
CONFIG_ERROR = 2
# Whole-job restarts before the job fails; the launchers restart a failed group inside the
# pod first (TRAIN_MAX_RESTARTS, default 2).
RESTARTS = 3

# --- Volcano Job ------------------------------------------------------------------------------
# The controller takes the first policy that matches a pod's failure, checking each policy's
# event, then its exitCode, in order (volcano-sh/volcano: pkg/controllers/job/
# job_controller_util.go applyPolicies; the exit code is the pod's first container's). So the
# exit code 2 policy comes first. A lost rank fails its peers within a second, so PodFailed
# restarts the gang as PodEvicted does, at most maxRetry times (the webhook refuses an event
# named twice and exitCode 0: pkg/webhooks/admission/jobs/validate/util.go validatePolicies).
VOLCANO_POLICIES: tuple[Doc, ...] = (
    {"exitCode": CONFIG_ERROR, "action": "AbortJob"},
    {"event": "PodEvicted", "action": "RestartJob"},
    {"event": "PodFailed", "action": "RestartJob"},
)

# --- MindCluster (AscendJob, Ascend Volcano Job) -----------------------------------------------
# Job labels (Ascend/mind-cluster: docs/en/scheduling/06_api/15_yaml_configuration.md;
# 04_usage/04_resumable_training/03_configuration/02_configuring_fault_handling_policies.md):
# fault-scheduling "grace" turns on resumable training (job-level rescheduling: the faulty
# node or NPU isolated, every pod recreated; "force" is not for pods on the host's network,
# and ours are). fault-retry-times N also reruns the job on a service-plane fault (a container
# that exits non-zero) up to N times; only Atlas 800T A2 and 900 A2 PoD servers support it,
# it needs restartPolicy Never, and on a Volcano Job it needs the PodFailed policy "Ignore",
# an action upstream Volcano's webhook refuses, so Volcano Jobs keep VOLCANO_POLICIES instead.
# MindCluster cannot tell exit codes apart: there a configuration error is rerun, N times at
# most. pod-rescheduling "on" (only the faulty pod recreated) is left off: it needs MindCluster's
# TaskD inside the image, driving the training processes, which the project's images lack.
FAULT_SCHEDULING = {"fault-scheduling": "grace"}
UNCONDITIONAL_RETRY_CHIPS = ("910b",)


def mindcluster_labels(kind: str, chip: str) -> dict[str, str]:
    """The resumable-training labels of an Ascend job of ``kind`` on ``chip``."""
    labels = dict(FAULT_SCHEDULING)
    if kind == "ascendjob" and chip in UNCONDITIONAL_RETRY_CHIPS:
        labels["fault-retry-times"] = str(RESTARTS)
    return labels


# --- PyTorchJob -------------------------------------------------------------------------------
# ExitCode: the training-operator recreates a pod whose exit code is 128-255 (killed by a
# signal: evicted, preempted, OOM-killed) and fails the job on 1-127, the configuration error
# among them (Kubeflow training-operator docs, "Job scheduling: restartPolicy"; pkg/controller.v1/
# common/pod.go). Its backoffLimit counts only OnFailure and Always restarts (pkg/core/job.go
# PastBackoffLimit; kubeflow/training-operator#2045, "a specification, not a bug"), so none is
# set: what bounds crashes is the launcher's TRAIN_MAX_RESTARTS inside the pod.
PYTORCHJOB_RESTART_POLICY = "ExitCode"

# --- TrainJob (a runtime of the job's own) ------------------------------------------------------
# The node Job fails on its first failed pod (backoffLimit 0) and JobSet then restarts every
# Job, RESTARTS times at most (JobSet failurePolicy.maxRestarts), unless the Job failed by its
# podFailurePolicy: exit code 2 fails the Job with reason PodFailurePolicy, which fails the
# JobSet. A pod disrupted by the cluster (preemption, eviction, a node drained: condition
# DisruptionTarget) is replaced without counting. podFailurePolicy needs restartPolicy Never.
# The stock torch-distributed ClusterTrainingRuntime sets none of this and a TrainJob cannot
# patch it (runtimePatches reach only the pod template): its Jobs' defaults decide there.
POD_RESTART_POLICY = "Never"


def job_failure_policy(container: str) -> Doc:
    """The node Job's part: fail on the first failed pod, or on exit status 2 for good."""
    return {
        "backoffLimit": 0,
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": container,
                        "operator": "In",
                        "values": [CONFIG_ERROR],
                    },
                },
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                },
            ]
        },
    }


def jobset_failure_policy() -> Doc:
    """The JobSet's part: restart the whole set, but not after a configuration error."""
    return {
        "maxRestarts": RESTARTS,
        "rules": [
            {
                "name": "configuration-error",
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
            }
        ],
    }
