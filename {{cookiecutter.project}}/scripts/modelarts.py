"""The shape of a ModelArts training job, from what ModelArts injects into every container
of a custom-image job, as options for this project's launchers (scripts/run_8p.sh).

    python3 scripts/modelarts.py DEVICES [--table] [-- OPTIONS GIVEN...]

(DEVICES: the devices a node the project was made for) prints the launcher options, one
word a line, for what the options given do not say already: --nnodes, --node-rank, --nproc
and --master-addr (the first worker's host name, resolved; a dry run leaves it as a name).
A job that cannot run is one line on stderr, exit 1. With --table the job's rank table says
the node and its devices.
"""

import os
import sys

# Where each variable is documented: Huawei Cloud, ModelArts User Guide (Standard),
# "Managing Environment Variables of a Training Container" (develop-modelarts-0104),
# table 2, "distributed training job". MA_VJ_NAME is not in its tables: ModelArts sets
# it in every training container (the job's name, which its workers' host names carry),
# and public ModelArts launch scripts test it to tell a job from a run on one's own node.
DOCUMENTED = "ModelArts User Guide, develop-modelarts-0104, table 2"
VARIABLES = (
    ("MA_VJ_NAME", "the job's name; set only inside a ModelArts job", "ModelArts job metadata"),
    ("MA_NUM_HOSTS", "the number of nodes (instances)", DOCUMENTED),
    ("VC_WORKER_NUM", "the number of nodes, as Volcano counts them", DOCUMENTED),
    ("VC_TASK_INDEX", "this node's index, from 0", DOCUMENTED),
    ("MA_NUM_GPUS", "the accelerators (GPUs or NPUs) of this node", DOCUMENTED),
    ("VC_WORKER_HOSTS", "every node's host name, comma-separated; the first is node 0", DOCUMENTED),
    ("MA_CURRENT_IP", "this node's address: the interface holding it carries the job", DOCUMENTED),
)


class JobError(Exception):
    """A job whose variables cannot run: the one line to print."""


def _count(name, zero=False):
    """The whole number in variable ``name`` (from 1, or from 0 with ``zero``)."""
    value = os.environ.get(name, "")
    lowest = 0 if zero else 1
    if not value.isdigit() or value != str(int(value)) or int(value) < lowest:
        raise JobError(f"{name}={value!r} is not a whole number from {lowest}")
    return int(value)


def _nodes():
    """MA_NUM_HOSTS and VC_WORKER_NUM, which must agree; 1 when neither is set."""
    counts = {
        name: _count(name) for name in ("MA_NUM_HOSTS", "VC_WORKER_NUM") if name in os.environ
    }
    if len(set(counts.values())) > 1:
        hosts, workers = counts["MA_NUM_HOSTS"], counts["VC_WORKER_NUM"]
        raise JobError(f"MA_NUM_HOSTS={hosts} and VC_WORKER_NUM={workers} disagree")
    return next(iter(counts.values()), 1)


def _given(words):
    """The launcher options given, by name: their values (--dry-run: "true")."""
    given = {}
    for i, word in enumerate(words):
        if word == "--":  # train.py's arguments follow
            break
        name, equals, value = word.partition("=")
        if name == "--dry-run":
            given[name] = "true"
        elif name.startswith("--"):
            given[name] = value if equals else (words[i + 1] if i + 1 < len(words) else "")
    return given


def _processes(given, devices):
    """Processes per node: None where --nproc is given, else this node's MA_NUM_GPUS (a note
    says so when the project was made for another number)."""
    gpus = _count("MA_NUM_GPUS", zero=True) if os.environ.get("MA_NUM_GPUS") else None
    if "--nproc" in given:
        nproc = given["--nproc"]
        if gpus and nproc.isdigit() and int(nproc) > gpus:
            raise JobError(
                f"--nproc {nproc} is more than the {gpus} devices ModelArts gives this node"
                " (MA_NUM_GPUS)"
            )
        return None
    if not gpus:
        state = "is not set" if gpus is None else "is 0 (no accelerators)"
        raise JobError(f"MA_NUM_GPUS {state}: give --nproc, the processes to start on each node")
    if gpus != devices:
        print(
            f"note: ModelArts gives this node {gpus} devices (MA_NUM_GPUS), the project was made"
            f" for {devices}: starting {gpus} processes per node (--nproc {devices} starts"
            f" {devices})",
            file=sys.stderr,
        )
    return gpus


def resolve(host, seconds):
    """The IPv4 address of ``host``, waiting up to ``seconds`` for the job's DNS to list it."""
    from cluster import resolve as wait_for  # scripts/cluster.py, beside this file

    try:
        return wait_for(host, seconds)
    except OSError as err:
        raise JobError(
            f"the master {host} (first of VC_WORKER_HOSTS) did not resolve within"
            f" --join-timeout {seconds:g} s: {err.strerror or err}"
        ) from None


def _master(hosts, given):
    """Node 0's address: the first host resolved (a dry run shows the name)."""
    if given.get("--dry-run"):
        return hosts[0]
    timeout = given.get("--join-timeout") or os.environ.get("JOIN_TIMEOUT") or "600"
    return resolve(hosts[0], float(timeout) if timeout.isdigit() else 600.0)


def options(devices, table, given):
    """The launcher options the job's variables give, for those ``given`` does not."""
    nodes = _nodes()
    given_nodes = given.get("--nnodes", "")
    nodes_used = int(given_nodes) if given_nodes.isdigit() and int(given_nodes) else nodes
    index = _count("VC_TASK_INDEX", zero=True) if os.environ.get("VC_TASK_INDEX") else 0
    if not table and "--node-rank" not in given and index >= nodes_used:
        raise JobError(
            f"VC_TASK_INDEX={index} is outside the job's {nodes_used} nodes (0 to {nodes_used - 1})"
        )
    found = {}
    if not table:  # with a table, the table's entry for this node says these
        found.update({"--nnodes": nodes, "--node-rank": index})
    nproc = _processes(given, devices)
    if nproc is not None:
        found["--nproc"] = nproc
    hosts = [host.strip() for host in os.environ.get("VC_WORKER_HOSTS", "").split(",")]
    hosts = [host for host in hosts if host]
    if nodes_used > 1 and "--master-addr" not in given:
        if not hosts:
            raise JobError(f"VC_WORKER_HOSTS is not set: {nodes_used} nodes cannot find node 0")
        found["--master-addr"] = _master(hosts, given)
    return [
        str(word) for name, value in found.items() if name not in given for word in (name, value)
    ]


def main(argv):
    if len(argv) < 1 or not argv[0].isdigit():
        raise SystemExit(__doc__)
    devices, rest = int(argv[0]), argv[1:]
    table = rest[:1] == ["--table"]
    given = _given(rest[rest.index("--") + 1 :] if "--" in rest else [])
    try:
        found = options(devices, table, given)
    except JobError as err:
        job = os.environ.get("MA_VJ_NAME")
        print(f"error: ModelArts job{' ' + job if job else ''}: {err}", file=sys.stderr)
        return 1
    print("\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
