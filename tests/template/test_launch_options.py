"""The launchers' command lines: bad input is one line and the usage, exit 2; defaults come
from the environment and the answers the project was generated with; paths stay one word."""

from __future__ import annotations

import ast
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import RenderProject
from tests.template.launchers import assert_usage_error, env, fake_python, run

BAD = [
    ("pytorch", "cuda", "run_8p.sh", ["--bogus"], "unknown argument: --bogus"),
    ("pytorch", "cuda", "run_8p.sh", ["--nproc", "x"], "--nproc must be a whole number"),
    ("pytorch", "cuda", "run_8p.sh", ["--nproc", "08"], "--nproc must be a whole number"),
    ("pytorch", "cuda", "run_8p.sh", ["--nproc"], "--nproc needs a value"),
    ("pytorch", "cuda", "run_8p.sh", ["--nproc", "--dry-run"], "--nproc needs a value"),
    (
        "pytorch",
        "cuda",
        "run_8p.sh",
        ["--nnodes", "2", "--node-rank", "2"],
        "--node-rank 2 is not below --nnodes 2",
    ),
    (
        "pytorch",
        "cuda",
        "run_8p.sh",
        ["--master-port", "70000"],
        "--master-port must be a TCP port",
    ),
    ("pytorch", "cuda", "run_8p.sh", ["--join-timeout", "soon"], "--join-timeout must be whole"),
    ("pytorch", "cuda", "run_8p.sh", ["--launcher", "mpirun"], "--launcher must be torchrun"),
    ("pytorch", "cuda", "run_8p.sh", ["--cluster", "slurm"], "--cluster must be trainjob"),
    ("pytorch", "ascend", "run_8p.sh", ["--log-by", "host"], "--log-by must be rank or device"),
    ("pytorch", "ascend", "run_1p.sh", ["--device-id", "gpu0"], "--device-id must be a whole"),
    ("pytorch", "ascend", "run_1p.sh", ["--data", ""], "--data needs a value"),
    ("pytorch", "ascend", "run_1p.sh", ["extra"], "unknown argument: extra"),
    (
        "pytorch",
        "ascend",
        "run_1p.sh",
        ["--entry", "serve.py"],
        "--entry must be train.py, eval.py, predict.py or export.py, not 'serve.py'",
    ),
    ("mindspore", "both", "run_msrun.sh", ["--worker-num", "0"], "--worker-num must be a whole"),
    (
        "mindspore",
        "both",
        "run_msrun.sh",
        ["--worker-num", "8", "--nproc", "8", "--node-rank", "1", "--nnodes", "2"],
        "--node-rank 1 with --nproc 8 needs ranks up to 15, but the job has 8 workers",
    ),
    (
        "mindspore",
        "both",
        "run_msrun.sh",
        ["--master-port", "80"],
        "--master-port must be a TCP port from 1024",
    ),
    ("mindspore", "both", "run_8p.sh", ["--launcher", "torchrun"], "--launcher must be msrun"),
    ("mindspore", "ascend", "run_8p.sh", ["--rank-table"], "--rank-table needs a value"),
]


@pytest.mark.parametrize(("framework", "target", "script", "args", "message"), BAD)
def test_bad_arguments_print_usage_and_exit_2(
    render_project: RenderProject, framework: str, target: str, script: str, args, message: str
) -> None:
    project = render_project(framework=framework, target=target)
    result = run(project / "scripts" / script, "--dry-run", *args)
    # run_8p.sh hands the launcher's options on: its usage may be the one shown.
    assert_usage_error(result, message, "run_")


@pytest.mark.parametrize("entry", ["eval.py", "predict.py", "export.py"])
def test_run_1p_runs_the_entry_it_is_given(render_project: RenderProject, entry: str) -> None:
    project = render_project(target="ascend")
    dry = run(project / "scripts" / "run_1p.sh", "--dry-run", "--entry", entry, "--", "samples/")
    words = shlex.split(dry.stdout.splitlines()[-1])
    # No --data or --output: the script's own data_url and train_url (auto: the platform's,
    # else ./data and ./output; the run's recorded data) decide.
    assert words[1:] == [entry, "samples/"]
    given = run(
        project / "scripts" / "run_1p.sh",
        "--dry-run",
        "--entry",
        entry,
        "--data",
        "d",
        "--output",
        "o",
    )
    assert shlex.split(given.stdout.splitlines()[-1])[2:6] == [
        "--data_url",
        f"{Path.cwd()}/d",
        "--train_url",
        f"{Path.cwd()}/o",
    ]


def test_bad_stop_timeout(render_project: RenderProject) -> None:
    project = render_project(target="ascend")
    result = run(project / "scripts" / "run_8p.sh", environ=env(RANK_STOP_TIMEOUT="1.5"))
    assert_usage_error(
        result, "RANK_STOP_TIMEOUT must be whole seconds, not '1.5'", "run_ranktable"
    )


@pytest.mark.parametrize(
    ("kind", "missing"),
    [
        ("pytorchjob", "PET_NNODES PET_NPROC_PER_NODE PET_NODE_RANK"),
        ("volcano", "MASTER_ADDR MASTER_PORT WORLD_SIZE RANK"),
    ],
)
def test_a_cluster_kind_without_its_variables_is_one_line(
    render_project: RenderProject, kind: str, missing: str
) -> None:
    project = render_project(target="cuda")
    result = run(project / "scripts" / "run_8p.sh", "--cluster", kind, "--dry-run")
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: --cluster {kind}: {missing}")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("cluster", "environ", "nodes"),
    [
        ("pytorchjob", {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": "0"}, 2),
        ("modelarts", {"MA_VJ_NAME": "job-1", "MA_NUM_HOSTS": "4"}, 4),
    ],
)
def test_a_sweep_in_a_job_of_several_nodes_is_one_line(
    render_project: RenderProject, cluster: str, environ: dict[str, str], nodes: int
) -> None:
    project = render_project(target="cuda")
    environ |= {"PET_MASTER_ADDR": "job-master-0", "PET_MASTER_PORT": "23456"}
    args = ("--sweep", "--cluster", cluster, "--dry-run")
    result = run(project / "scripts" / "run_8p.sh", *args, environ=env(**environ))
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: --sweep: this job has {nodes} nodes"), line


# An AscendJob pod of 2 x 4 NPUs as Ascend Operator starts it (component/ascend-operator/
# pkg/controllers/v1/env.go): WORLD_SIZE counts NPUs, LOCAL_RANK lists the pod's.
ASCEND_POD = {"MASTER_ADDR": "10.96.0.8", "MASTER_PORT": "2222", "WORLD_SIZE": "8", "RANK": "1"}
ASCEND_POD |= {"LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "0,1,2,3"}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"LOCAL_RANK": "0,1"}, "LOCAL_RANK='0,1' is not 4 device ids"),
        ({"WORLD_SIZE": "6"}, "WORLD_SIZE=6 is not a multiple of LOCAL_WORLD_SIZE=4"),
        ({"RANK": "one"}, "RANK='one' is not a whole number"),
    ],
)
def test_an_ascendjob_pod_that_is_not_as_its_operator_writes_is_one_line(
    render_project: RenderProject, change: dict[str, str], words: str
) -> None:
    project = render_project(target="ascend", devices_per_node=4, nnodes=2)
    variables = env(PYTHON=sys.executable, **(ASCEND_POD | change))
    result = run(
        project / "scripts" / "run_8p.sh", "--cluster", "ascendjob", "--dry-run", environ=variables
    )
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: --cluster ascendjob: ") and words in line, line


def test_per_device_ranks_never_see_the_pods_torch_variables(
    render_project: RenderProject, tmp_path: Path
) -> None:
    """Each rank is placed by RANK_ID and DEVICE_ID alone: the pod's WORLD_SIZE, RANK and
    LOCAL_RANK list would make every process rank RANK of WORLD_SIZE on one device."""
    project = render_project(target="ascend", devices_per_node=4, nnodes=2)
    body = (
        "names = ('RANK_SIZE', 'RANK_ID', 'DEVICE_ID', 'WORLD_SIZE', 'RANK', 'LOCAL_RANK')\n"
        "print('placed', *(os.environ.get(n, '-') for n in names), flush=True)\n"
    )
    python = fake_python(tmp_path / "python", body)
    variables = env(PYTHON=str(python), **ASCEND_POD)
    result = run(project / "scripts" / "run_8p.sh", "--cluster", "ascendjob", environ=variables)
    assert result.returncode == 0, result.stderr
    logs = sorted((project / "output" / "logs").glob("rank_*/train.log"))
    placed = [log.read_text().split("placed ")[1].split() for log in logs]
    assert placed == [["8", str(4 + i), str(i), "-", "-", "-"] for i in range(4)], placed


def test_both_picks_a_launcher(render_project: RenderProject) -> None:
    for framework, spawner in (("pytorch", "torchrun"), ("mindspore", "msrun")):
        script = render_project(f"b{framework}", framework=framework, target="both") / "scripts"
        auto = run(script / "run_8p.sh", "--dry-run", environ=env(PYTHON=sys.executable)).stdout
        assert auto.startswith("# per-rank:" if Path("/dev/davinci0").exists() else f"# {spawner}:")
        # MindSpore's ranks need a table: the shipped example's one server runs here.
        table = ("--rank-table", str(script.parent / "rank_table_8p.json"))
        chosen = run(
            script / "run_8p.sh",
            "--dry-run",
            "--launcher",
            "ranktable",
            *(table if framework == "mindspore" else ()),
        )
        assert chosen.stdout.startswith("# per-rank:"), chosen.stderr
        by_env = run(
            script / "run_8p.sh", "--dry-run", environ=env(LAUNCHER=spawner, PYTHON=sys.executable)
        )
        assert by_env.stdout.startswith(f"# {spawner}:")


def test_environment_supplies_the_defaults_and_flags_win(render_project: RenderProject) -> None:
    project = render_project(target="cuda", devices_per_node=8)
    variables = env(
        NPROC_PER_NODE="2", NNODES="3", NODE_RANK="2", MASTER_ADDR="node0", MASTER_PORT="2345"
    )
    result = run(project / "scripts" / "run_8p.sh", "--dry-run", environ=variables)
    words = shlex.split(result.stdout.splitlines()[-1])
    expected = "--nnodes 3 --nproc_per_node 2 --node_rank 2 --master_addr node0 --master_port 2345"
    assert words[words.index("--nnodes") : words.index("--rdzv_conf")] == expected.split()
    flagged = run(project / "scripts" / "run_8p.sh", "--dry-run", "--nproc=1", environ=variables)
    assert "--nproc_per_node 1 " in flagged.stdout


def test_help_shows_the_rendered_defaults(render_project: RenderProject) -> None:
    project = render_project(framework="mindspore", target="ascend", devices_per_node=4, nnodes=2)
    for script in ("run_ranktable.sh", "run_msrun.sh"):
        result = run(project / "scripts" / script, "--help")
        assert result.returncode == 0 and "else 4)" in result.stdout and "else 2)" in result.stdout
    assert "--cluster KIND" in run(project / "scripts" / "run_8p.sh", "--help").stdout
    assert run(project / "scripts" / "run_1p.sh", "-h").stdout.startswith(
        "usage: scripts/run_1p.sh"
    )


# Spaces, both quotes, a command substitution, a glob and a leading dash: one word each.
AWKWARD = "my data 'q' \"dq\" $(touch pwned) `touch pwned2` * -x"


def test_awkward_paths_are_single_arguments(render_project: RenderProject, tmp_path: Path) -> None:
    project = render_project(target="ascend")
    argv_file = tmp_path / "argv.txt"
    fake = fake_python(
        tmp_path / "fake python",
        f"with open({str(argv_file)!r}, 'w') as out:\n    out.write(repr(sys.argv[2:]))\n",
    )
    data, output = tmp_path / AWKWARD, tmp_path / f"out {AWKWARD}"
    # A train.py option (the launchers check them before any rank starts) with a space.
    expected = ["--data_url", str(data), "--train_url", str(output), "--dataset_name", "a b"]
    paths = ("--data", str(data), f"--output={output}", "--", "--dataset_name", "a b")
    one = run(project / "scripts" / "run_1p.sh", *paths, environ=env(PYTHON=str(fake)))
    assert one.returncode == 0, one.stderr
    assert ast.literal_eval(argv_file.read_text()) == expected
    many = run(
        project / "scripts" / "run_8p.sh", "--nproc", "1", *paths, environ=env(PYTHON=str(fake))
    )
    assert many.returncode == 0, many.stderr
    assert ast.literal_eval(argv_file.read_text()) == expected
    assert (output / "logs" / "rank_0" / "train.log").is_file()
    dry = run(project / "scripts" / "run_1p.sh", "--dry-run", *paths)
    assert shlex.split(dry.stdout.splitlines()[-1])[2:] == expected
    assert not list(tmp_path.rglob("pwned*")), "a path was executed"


# Before any rank starts: the launchers compare the ranks asked for with the GPUs or NPUs
# this node shows (src/scaffold/run/preflight.py); --nproc auto takes that count.
SEES = [
    ({"CUDA_VISIBLE_DEVICES": "0"}, ["--nproc", "2"], "1 CUDA GPUs (CUDA_VISIBLE_DEVICES=0)"),
    (
        {"ASCEND_VISIBLE_DEVICES": "0,1"},
        ["--nproc", "4"],
        "2 Ascend NPUs (ASCEND_VISIBLE_DEVICES=0,1)",
    ),
    ({}, ["--nproc", "2", "--", "--device_target", "cuda"], "0 CUDA GPUs (no /dev/nvidia[0-9]*)"),
]


@pytest.mark.parametrize(("variables", "args", "sees"), SEES)
def test_more_ranks_than_devices_is_one_line_before_any_starts(
    render_project: RenderProject, tmp_path: Path, variables: dict, args: list, sees: str
) -> None:
    project = render_project(target="cuda")
    output = tmp_path / "out"
    environ = env(PYTHON=sys.executable, **variables)
    result = run(project / "scripts" / "run_8p.sh", "--output", str(output), *args, environ=environ)
    assert result.returncode == 2, result.stdout + result.stderr
    ranks = args[1]
    fix = (
        f"--nproc {sees.split()[0]} (or --nproc auto)" if sees[0] != "0" else "--device_target cpu"
    )
    # env.sh's own warnings (no driver here) come first; the launcher's one line ends it.
    assert [line for line in result.stderr.splitlines() if "error" in line] == [
        f"error: --nproc {ranks} starts {ranks} ranks on this node, but it sees {sees}: give "
        f"{fix}, or run one process with scripts/run_1p.sh"
    ]
    assert result.stderr.strip().splitlines()[-1].startswith("error: --nproc")
    assert not output.exists()


@pytest.mark.parametrize(("variables", "count"), [({"CUDA_VISIBLE_DEVICES": "0,1,2"}, 3), ({}, 1)])
def test_nproc_auto_takes_the_devices_this_node_shows(
    render_project: RenderProject, variables: dict, count: int
) -> None:
    project = render_project(target="cuda")
    environ = env(PYTHON=sys.executable, **variables)
    dry = run(project / "scripts" / "run_8p.sh", "--nproc", "auto", "--dry-run", environ=environ)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"# torchrun: {count} processes on node 0 of 1"), dry.stdout
