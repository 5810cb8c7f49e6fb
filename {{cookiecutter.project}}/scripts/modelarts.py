"""The shape of a ModelArts training job, from what ModelArts injects into every container
of a custom-image job, as options for this project's launchers (scripts/run_8p.sh).

    python3 scripts/modelarts.py DEVICES [--table PATH] [-- OPTIONS GIVEN...]

(DEVICES: the devices a node the project was made for) prints the launcher options, one
word a line, for what the options given do not say already: --nnodes, --node-rank, --nproc
and --master-addr (the first worker's host name, resolved; a dry run leaves it as a name).
A job that cannot run is one line on stderr, exit 1. With --table, the job's rank table
(PATH: the table, or the directory holding jobstart_hccl.json) says the node and its
devices: once it says "completed", --rank-table and this node's --node-rank in it.
"""

import json
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

# The rank table, as ModelArts' own Ascend launcher reads it: its run_ascend scripts (the best
# practice develop-modelarts-0120 ships run_ascend.py, common.py, rank_table.py), read here as
# github.com/Wh1isper/davincirunsdk packages them: davincirunsdk/common.py, rank_table.py.
# The file is ${RANK_TABLE_FILE}/jobstart_hccl.json (common.py get_rank_table_file_path):
# RANK_TABLE_FILE is the directory /user/config, and the table is read once its "status" is
# "completed" (support.huaweicloud.com/docker-modelarts/docker-modelarts-0092.html, table 1).
# This node: in the group_list form ModelArts writes, the instance whose pod_name is this
# pod's name, BATCH_TASK_CURRENT_INSTANCE on older jobs (ModelArts v1), else
# MA_CURRENT_INSTANCE_NAME (common.py ModelArts.get_current_instance_name reads them in that
# order; rank_table.py RankTableV0.get_current_instance); in a
# server_list table, the server whose server_id is MA_CURRENT_HOST_IP, the host's address
# (RankTableV1.get_current_instance): a table lists hosts, not containers. MA_CURRENT_IP,
# the container's own address, then this host's addresses are tried last (as the launcher
# looks); a table of one server is this node's.
TABLE_NAME = "jobstart_hccl.json"
LAUNCHER = "ModelArts' Ascend launcher, run_ascend's rank_table.py (Wh1isper/davincirunsdk)"
TABLE_VARIABLES = (
    (
        "RANK_TABLE_FILE",
        "the directory holding the job's rank table (jobstart_hccl.json), or the table",
        "ModelArts, Creating a Training Job Using a Custom Image (Ascend), docker-modelarts-0092",
    ),
    (
        "BATCH_TASK_CURRENT_INSTANCE",
        "this pod's name on older (v1) jobs, read first: the table's pod_name",
        LAUNCHER,
    ),
    ("MA_CURRENT_INSTANCE_NAME", "this pod's name: the table's pod_name for this node", LAUNCHER),
    ("MA_CURRENT_HOST_IP", "this node's host address: the table's server_id for it", LAUNCHER),
)
# Which variable names this node in the table, and the fields it may match, in that order.
LOOKUP = (
    ("BATCH_TASK_CURRENT_INSTANCE", ("pod_name",)),
    ("MA_CURRENT_INSTANCE_NAME", ("pod_name",)),
    ("MA_CURRENT_HOST_IP", ("server_id", "host_ip")),
    ("MA_CURRENT_IP", ("server_id", "container_ip")),
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


def _join_timeout(given):
    """The seconds a node waits for the others (--join-timeout, JOIN_TIMEOUT, else 600)."""
    timeout = given.get("--join-timeout") or os.environ.get("JOIN_TIMEOUT") or "600"
    return float(timeout) if timeout.isdigit() else 600.0


def _master(hosts, given):
    """Node 0's address: the first host resolved (a dry run shows the name)."""
    if given.get("--dry-run"):
        return hosts[0]
    return resolve(hosts[0], _join_timeout(given))


def table_file(path):
    """The rank table at ``path``: a directory (ModelArts' RANK_TABLE_FILE) holds it as
    jobstart_hccl.json."""
    if os.path.isdir(path) or path.endswith("/"):
        return os.path.join(os.path.normpath(path), TABLE_NAME)
    return path


def table_servers(table):
    """Each server of a decoded rank table, in the order the launcher numbers them
    (scripts/ranktable_rules.py: server_list's order; group_list's by first server_id), with
    the values of its fields that may name this node."""
    if "group_list" in table and "server_list" not in table:
        groups = [g for g in table.get("group_list") or [] if isinstance(g, dict)]
        entries = [i for g in groups for i in g.get("instance_list") or []]
    else:
        entries = table.get("server_list") or []
    servers = {}
    for entry in (e for e in entries if isinstance(e, dict)):
        fields = servers.setdefault(str(entry.get("server_id")), {})
        for key in ("server_id", "host_ip", "container_ip", "pod_name"):
            if isinstance(entry.get(key), str):
                fields.setdefault(key, set()).add(entry[key])
    return servers


def _this_node():
    """What may name this node in a table, in LOOKUP's order, then this host's addresses (as
    the launcher looks): (what it is, its values, the fields they may match)."""
    from cluster import interface_addresses  # scripts/cluster.py, beside this file

    said = [
        (f"{name}={os.environ[name]}", [os.environ[name]], fields)
        for name, fields in LOOKUP
        if os.environ.get(name)
    ]
    own = [address for _, address in interface_addresses() if not address.startswith("127.")]
    if own:
        said.append(
            (f"this host's {', '.join(own)}", own, ("server_id", "host_ip", "container_ip"))
        )
    return said


def table_node(servers):
    """This node's index among ``servers``: the first of _this_node's ways that names one
    server; None for a table of one server where none does (its ranks run here)."""
    tried = _this_node()
    several = False
    for _, values, fields in tried:
        hits = [
            i
            for i, found in enumerate(servers.values())
            if any(value in found.get(key, ()) for key in fields for value in values)
        ]
        if len(hits) == 1:
            return hits[0]
        several = several or len(hits) > 1
    if len(servers) <= 1:
        return None
    shown = "; ".join(what for what, _, _ in tried) or "no address found"
    raise JobError(
        f"{'several' if several else 'none'} of the rank table's servers"
        f" ({', '.join(servers)}) is this node ({shown}): pass --node-rank N"
    )


def table_options(path, given):
    """--rank-table and this node's --node-rank in it, once ModelArts has written it."""
    from cluster import table_status  # scripts/cluster.py, beside this file

    path = table_file(given.get("--rank-table") or path)
    seconds = _join_timeout(given)
    status = table_status(path, seconds)
    if status != "completed":
        raise JobError(
            f"the rank table {path} still says {status} after {seconds:g} s: ModelArts did not"
            " finish it in time (--join-timeout sets the wait)"
        )
    found = {"--rank-table": path}
    if "--node-rank" not in given:
        try:
            with open(path, encoding="utf-8") as stream:
                servers = table_servers(json.load(stream))
        except (OSError, ValueError, AttributeError, TypeError):
            return found  # the launcher says what is wrong with it
        index = table_node(servers)
        if index is not None:
            found["--node-rank"] = index
    return found


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
    else:
        found.update(table_options(table, given))
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
    table = rest[1] if rest[:1] == ["--table"] and len(rest) > 1 else None
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
