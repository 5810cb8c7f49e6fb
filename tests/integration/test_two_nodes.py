"""Two nodes rehearsed on one machine: two network namespaces joined by a veth pair act as two
hosts with their own addresses (10.250.N.1 and .2, nothing else is ever dialled). The
generated launchers run there as a user would: torchrun and msrun, 2 nodes x 1 process, end
with the weights of one node x 2 processes; the rank-table launcher finds each node's ranks
by its address; a wrong master and a node that never comes both fail within the join timeout.
A ModelArts job (its variables, its workers' host names) trains as one node would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.shipped.ranktable import tables as ranktable
from tests.conftest import RenderProject, render_once
from tests.integration.netns import Hosts, finish
from tests.template.launchers import assert_all_gone, env, fake_python, free_port
from tests.training.runs import assert_same_weights


# What every training run here trains, as ModelArts appends it (its input's local path as
# --data_url): one epoch of 40 steps, so that the runs of two nodes, of one node, and of a
# ModelArts job compare with one reference each framework.
def train_args(project: Path) -> list[str]:
    data = f"--data_url={project / 'data'}"
    return ["--device_target=cpu", "--epoch_size=1", "--batch_size=32", data]


# No rank starts before the job comes together: the launchers alone race this clock.
JOIN_TIMEOUT = 10
# One node x 2 processes gives each process half the CPUs' threads (src/scaffold/backend/core.py);
# each process of 2 nodes x 1 gets as many. The same threads make a rank's kernels sum in
# the same order wherever its peer is, and a sum of two ranks' gradients is the same either
# way round: the weights are then equal to the bit. (Unequal threads once differed by 2.4e-5.)
SAME_THREADS = {"OMP_NUM_THREADS": str(max(1, len(os.sched_getaffinity(0)) // 2))}


def _two_nodes(hosts: Hosts, project: Path, out: Path, hostnames: tuple, port: str) -> None:
    script = str(project / "scripts" / "run_8p.sh")
    procs = [
        hosts.start(
            node,
            [
                script,
                "--nnodes",
                "2",
                "--nproc",
                "1",
                "--node-rank",
                str(node),
                "--master-addr",
                hosts.addresses[0],
                "--master-port",
                port,
                "--output",
                str(out / f"node{node}"),
                "--",
                *train_args(project),
            ],
            hostnames[node],
            PYTHON=sys.executable,
            **SAME_THREADS,
        )
        for node in (0, 1)
    ]
    results = finish(procs, 300)
    assert [code for code, _, _ in results] == [0, 0], [err[-3000:] for _, _, err in results]


def _one_node(project: Path, out: Path) -> Path:
    script = project / "scripts" / "run_8p.sh"
    result = subprocess.run(
        [str(script), "--nproc", "2", "--master-port", free_port(), "--output", str(out)]
        + ["--", *train_args(project)],
        env=env(PYTHON=sys.executable, **SAME_THREADS),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


@pytest.fixture(scope="module", params=["pytorch", "mindspore"])
def framework(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def one_per_node(framework: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project launched with torchrun or msrun, one process per node, rendered once a
    framework (each run writes into its own output)."""
    options = Options(project="demo", framework=framework, target="cuda", devices_per_node=1)
    return render_once(tmp_path_factory, options)


@pytest.fixture(scope="module")
def one_node(one_per_node: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: one node x 2 processes, train_args's epoch."""
    return _one_node(one_per_node, tmp_path_factory.mktemp("one") / "out")


@pytest.mark.slow
def test_two_nodes_end_with_the_weights_of_one_node(
    one_per_node: Path, one_node: Path, hosts: Hosts, tmp_path: Path, framework: str
) -> None:
    project = one_per_node
    name = "lenet_epoch1" + (".pt" if framework == "pytorch" else ".ckpt")
    # Each its own hostname; and both the machine's, which resolves to 127.0.0.1 here as on
    # Debian and Ubuntu nodes (gloo dialled itself with that before the launcher chose the
    # interface).
    _two_nodes(hosts, project, tmp_path / "own", ("node0", "node1"), free_port())
    assert_same_weights(tmp_path / "own" / "node0" / name, one_node / name)
    if framework == "pytorch":
        _two_nodes(hosts, project, tmp_path / "same", (None, None), free_port())
        assert_same_weights(tmp_path / "same" / "node0" / name, one_node / name)


@pytest.mark.slow
def test_a_wrong_master_and_a_missing_node_fail_within_the_join_timeout(
    one_per_node: Path, hosts: Hosts, tmp_path: Path
) -> None:
    script = str(one_per_node / "scripts" / "run_8p.sh")
    wrong = hosts.addresses[0].rsplit(".", 1)[0] + ".9"  # in the subnet, but nobody's there
    port = free_port()
    train = ["--", *train_args(one_per_node)]
    common = ["--nnodes", "2", "--nproc", "1", "--join-timeout", str(JOIN_TIMEOUT)]
    # No restart: each attempt would wait out the join timeout again.
    common += ["--master-port", port, "--max-restarts", "0"]
    began = time.monotonic()
    procs = [
        # Node 0 waits for a node 1 that never comes; node 1 dials a master that is not there.
        hosts.start(
            0,
            [script, *common, "--node-rank", "0", "--master-addr", hosts.addresses[0], *train],
            None,
            PYTHON=sys.executable,
        ),
        hosts.start(
            1,
            [script, *common, "--node-rank", "1", "--master-addr", wrong, *train],
            None,
            PYTHON=sys.executable,
        ),
    ]
    results = finish(procs, 120)
    # Past the join timeout: the stop, and msrun's scheduler outliving it by 5 s (sigint.py).
    assert time.monotonic() - began < JOIN_TIMEOUT + 5 + 15
    for node, (code, _, stderr) in enumerate(results):
        master = (hosts.addresses[0], wrong)[node]
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert code == 1 and len(errors) == 1, stderr[-3000:]
        assert errors[0].startswith(
            f"error: node {node}: the job did not come together at {master}:{port} "
        )
        assert f"within --join-timeout {JOIN_TIMEOUT} s" in errors[0]
        assert "Traceback" not in stderr
    assert_all_gone(str(one_per_node / "train.py"))


def test_the_rank_table_launcher_finds_each_node_by_its_address(
    render_project: RenderProject, hosts: Hosts, tmp_path: Path
) -> None:
    project = render_project(framework="mindspore", target="ascend", devices_per_node=2)
    # The table lists node 1 first: ranks come from the table, not from node numbers.
    tables = [
        ranktable.generate(hosts.addresses[n], [0, 1], [f"10.9.{n}.1", f"10.9.{n}.2"])
        for n in (1, 0)
    ]
    (tmp_path / "t.json").write_text(ranktable.merge(tables).dumps())
    script = str(project / "scripts" / "run_8p.sh")
    procs = [
        hosts.start(
            node,
            [script, "--dry-run", "--rank-table", str(tmp_path / "t.json")],
            None,
            PYTHON=sys.executable,
        )
        for node in (0, 1)
    ]
    (code0, out0, err0), (code1, out1, err1) = finish(procs, 60)
    assert code0 == code1 == 0, err0 + err1
    assert "RANK_SIZE=4 RANK_ID=2 DEVICE_ID=0" in out0 and "RANK_ID=3 DEVICE_ID=1" in out0
    assert "RANK_SIZE=4 RANK_ID=0 DEVICE_ID=0" in out1 and "RANK_ID=1 DEVICE_ID=1" in out1
    # For real (each rank a stand-in that prints what HCCL would read): the NIC that routes to
    # the first server carries the job.
    fake = fake_python(
        tmp_path / "fake.py",
        "print('ranks', os.environ['RANK_ID'], os.environ['HCCL_SOCKET_IFNAME'],"
        " os.environ['HCCL_IF_IP'], os.environ['HCCL_CONNECT_TIMEOUT'], flush=True)\n",
    )
    procs = [
        hosts.start(
            node,
            [script, "--rank-table", str(tmp_path / "t.json"), "--join-timeout", "300"],
            None,
            PYTHON=str(fake),
        )
        for node in (0, 1)
    ]
    for node, (code, out, err) in enumerate(finish(procs, 60)):
        assert code == 0, err
        line = next(line for line in out.splitlines() if line.startswith("ranks "))
        iface = line.split()[2]
        assert line.split()[3:] == [hosts.addresses[node], "300"]
        assert iface != "lo" and iface.startswith("tt")


JOB = "modelarts-job-5e6f7a8b"


def _modelarts_variables(hosts: Hosts, node: int, workers: list[str]) -> dict[str, str]:
    """What ModelArts injects into node's container of a 2-node job with a device each."""
    return {
        "MA_VJ_NAME": JOB,
        "MA_NUM_HOSTS": "2",
        "VC_WORKER_NUM": "2",
        "VC_TASK_INDEX": str(node),
        "MA_NUM_GPUS": "1",
        "VC_WORKER_HOSTS": ",".join(workers),
        "MA_CURRENT_IP": hosts.addresses[node],
    }


@pytest.mark.slow
def test_a_modelarts_job_trains_as_one_node(
    one_per_node: Path, one_node: Path, hosts: Hosts, tmp_path: Path, framework: str
) -> None:
    # The same command on both nodes, as ModelArts starts it, with the inputs, outputs and
    # hyperparameters appended; the workers' names resolve as the job's DNS resolves them.
    workers = [f"{JOB}-worker-{n}.{JOB}" for n in (0, 1)]
    hosts.name((workers[0], workers[1]))
    # ModelArts appends its input's local path as --data_url (the launcher names no data).
    appended = train_args(one_per_node)
    port = free_port()
    procs = [
        hosts.start(
            node,
            ["bash", str(one_per_node / "scripts" / "run_8p.sh"), *appended]
            + [f"--train_url={tmp_path / f'node{node}'}"],
            None,
            PYTHON=sys.executable,
            MASTER_PORT=port,
            **SAME_THREADS,
            **_modelarts_variables(hosts, node, workers),
        )
        for node in (0, 1)
    ]
    results = finish(procs, 300)
    assert [code for code, _, _ in results] == [0, 0], [err[-3000:] for _, _, err in results]
    suffix = ".pt" if framework == "pytorch" else ".ckpt"
    name = f"lenet_epoch1{suffix}"
    assert_same_weights(tmp_path / "node0" / name, one_node / name)
    assert not (tmp_path / "node1" / name).exists(), "rank 1 saves nothing"


@pytest.mark.parametrize("own", [True, False])
def test_a_modelarts_node_takes_the_interface_holding_its_address(
    render_project: RenderProject, hosts: Hosts, tmp_path: Path, own: bool
) -> None:
    # Node 0's own name resolves to loopback there (as /etc/hosts may have it): the route
    # to the master is then lo, and MA_CURRENT_IP names the interface the job must use.
    project = render_project(framework="pytorch", target="ascend", devices_per_node=1)
    hosts.name(("worker-0", "worker-1"), ("127.0.1.1", hosts.addresses[1]))
    fake = fake_python(
        tmp_path / "fake.py",
        "print('rank', os.environ['MASTER_ADDR'], os.environ['HCCL_SOCKET_IFNAME'],"
        " os.environ['HCCL_IF_IP'], flush=True)\n",
    )
    variables = _modelarts_variables(hosts, 0, ["worker-0", "worker-1"])
    if not own:
        del variables["MA_CURRENT_IP"]
    script = str(project / "scripts" / "run_8p.sh")
    proc = hosts.start(0, [script], None, PYTHON=str(fake), **variables)
    ((code, out, err),) = finish([proc], 60)
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("rank "))
    _, master, iface, address = line.split()
    assert master == "127.0.1.1", "the first of VC_WORKER_HOSTS, resolved"
    if own:
        assert iface.startswith("tt") and address == hosts.addresses[0]
    else:
        assert (iface, address) == ("lo", "127.0.0.1")
