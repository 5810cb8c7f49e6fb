"""The shape of a Kubernetes training job, from what its operator injects into every pod
(gen job render --kind KIND writes such jobs), as options for this project's launchers.

    python3 scripts/operators.py KIND LAUNCHER

prints the launcher that runs KIND's pods (LAUNCHER is run_8p.sh's choice, which some kinds
override), then the pod's variables that the processes it starts must not see, all on the
first line; then the launcher's options, one word a line. A pod missing a variable, or
holding one that is not what its operator writes, is one line on stderr, exit 1.
"""

import os
import sys

# What each operator injects into a pod, with the source file that sets it. These are the
# only variables read here: a pod's shape never comes from anything else.
TRAINER = "kubeflow/trainer v2.0-v2.3: pkg/runtime/framework/plugins/torch/torch.go"
TRAINING_OPERATOR = "kubeflow/training-operator v1.9: pkg/controller.v1/pytorch/envvar.go"
VOLCANO = "volcano-sh/volcano: pkg/controllers/job/plugins/distributed-framework/pytorch/pytorch.go"
ASCEND_OPERATOR = "Ascend/mind-cluster: component/ascend-operator/pkg/controllers/v1/env.go"
# torchrun's rendezvous: the same five from Trainer v2 and from training-operator v1 (which
# also sets MASTER_*, WORLD_SIZE and RANK; torchrun gives its workers their own).
PET = {
    "PET_NNODES": "--nnodes",
    "PET_NPROC_PER_NODE": "--nproc",
    "PET_NODE_RANK": "--node-rank",
    "PET_MASTER_ADDR": "--master-addr",
    "PET_MASTER_PORT": "--master-port",
}
# Volcano's pytorch plugin: one process per pod in its eyes, so WORLD_SIZE counts pods and
# RANK is the pod's index (master 0, worker i+1). MASTER_ADDR names the master task's pod.
VOLCANO_PYTORCH = {
    "MASTER_ADDR": "--master-addr",
    "MASTER_PORT": "--master-port",
    "WORLD_SIZE": "--nnodes",
    "RANK": "--node-rank",
}
# Ascend Operator, MindSpore: the scheduler's address and how many workers in all and here.
ASCEND_MINDSPORE = {
    "MS_WORKER_NUM": "--worker-num",
    "MS_LOCAL_WORKER": "--nproc",
    "MS_NODE_RANK": "--node-rank",
    "MS_SCHED_HOST": "--master-addr",
    "MS_SCHED_PORT": "--master-port",
}
# Ascend Operator, PyTorch: WORLD_SIZE counts the job's NPUs, RANK is the pod's index,
# LOCAL_WORLD_SIZE the pod's NPUs and LOCAL_RANK their ids as a list ("0,1,2,3").
ASCEND_PYTORCH = {
    "MASTER_ADDR": "--master-addr",
    "MASTER_PORT": "--master-port",
    "RANK": "--node-rank",
    "LOCAL_WORLD_SIZE": "--nproc",
    "WORLD_SIZE": "--nnodes",  # divided by LOCAL_WORLD_SIZE
    "LOCAL_RANK": None,  # checked: as many ids as LOCAL_WORLD_SIZE
}
# msrun gives each process its own role and rank: the pod's would make every worker a scheduler.
MSRUN_OWN = tuple(ASCEND_MINDSPORE) + ("MS_ROLE",)
# KIND -> {LAUNCHER: (source, variables -> options, variables the started processes lose)}.
# Per-device starts (ranktable) never pass on a pod's torch variables either: each process
# gets its own RANK_ID and DEVICE_ID (run_ranktable.sh unsets WORLD_SIZE, RANK, LOCAL_RANK).
INJECTED = {
    "trainjob": {"torchrun": (TRAINER, PET, ())},
    "pytorchjob": {"torchrun": (TRAINING_OPERATOR, PET, ())},
    "volcano": {
        "torchrun": (VOLCANO, VOLCANO_PYTORCH, ()),
        "msrun": (VOLCANO, VOLCANO_PYTORCH, ()),
        # The rank table's rank 0 is the master: its pod order need not be Volcano's.
        "ranktable": (VOLCANO, {"MASTER_PORT": "--master-port"}, ("MASTER_ADDR",)),
    },
    "ascendjob": {
        "msrun": (ASCEND_OPERATOR, ASCEND_MINDSPORE, MSRUN_OWN),
        # No table is mounted: the ranks meet at the master, not by an image's own table.
        "ranktable": (ASCEND_OPERATOR, ASCEND_PYTORCH, ("RANK_TABLE_FILE",)),
    },
}
# The launcher a kind's pods run, where the kind decides it (ascendjob: run_8p.sh, by framework).
LAUNCHERS = {"trainjob": "torchrun", "pytorchjob": "torchrun"}
# Options that take a whole number, and its lowest value.
LOWEST = {"--nnodes": 1, "--nproc": 1, "--worker-num": 1, "--node-rank": 0, "--master-port": 1}


class PodError(Exception):
    """A pod whose variables cannot run: the one line to print."""


def _number(name, lowest=0):
    value = os.environ.get(name, "")
    if not value.isdigit() or int(value) < lowest:
        raise PodError(f"{name}={value!r} is not a whole number from {lowest}")
    return int(value)


def _ascend_pytorch(found):
    """WORLD_SIZE counts NPUs: nodes are WORLD_SIZE / LOCAL_WORLD_SIZE; LOCAL_RANK lists
    the pod's NPU ids, one per process."""
    local = _number("LOCAL_WORLD_SIZE", 1)
    world = _number("WORLD_SIZE", 1)
    if world % local:
        raise PodError(f"WORLD_SIZE={world} is not a multiple of LOCAL_WORLD_SIZE={local}")
    ids = os.environ["LOCAL_RANK"].split(",")
    if len(ids) != local or not all(i.strip().isdigit() for i in ids):
        raise PodError(
            f"LOCAL_RANK={os.environ['LOCAL_RANK']!r} is not {local} device ids (LOCAL_WORLD_SIZE)"
        )
    found["--nnodes"] = str(world // local)
    return found


def shape(kind, launcher):
    """(launcher, variables to clear, options) for a pod of ``kind``."""
    launcher = LAUNCHERS.get(kind, launcher)
    contracts = INJECTED.get(kind)
    if contracts is None:
        raise PodError(f"not a kind; choose one of {', '.join(INJECTED)}")
    if launcher not in contracts:
        raise PodError(f"the {launcher} launcher does not run {kind} pods")
    source, variables, cleared = contracts[launcher]
    missing = [name for name in variables if not os.environ.get(name)]
    if missing:
        raise PodError(
            f"{' '.join(missing)} not set; is this pod started by the {kind} operator"
            f" (gen job render --kind {kind}; see {source})?"
        )
    for name, option in variables.items():
        if option in LOWEST:
            _number(name, LOWEST[option])
    found = {option: os.environ[name] for name, option in variables.items() if option}
    if variables is ASCEND_PYTORCH:
        found = _ascend_pytorch(found)
    return launcher, cleared, found


def main(argv):
    if len(argv) != 2:
        raise SystemExit(__doc__)
    try:
        launcher, cleared, found = shape(*argv)
    except PodError as err:
        print(f"error: --cluster {argv[0]}: {err}", file=sys.stderr)
        return 1
    words = [word for option, value in found.items() for word in (option, value)]
    print("\n".join([" ".join((launcher, *cleared)), *words]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
