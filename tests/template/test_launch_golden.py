"""Every launcher's --dry-run, compared whole with its golden file (pytest --update-golden
rewrites them after a deliberate change): what each rank of a job gets, as a user reads it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from generator.shipped.ranktable import tables as ranktable
from tests.conftest import RenderProject
from tests.golden import Golden
from tests.template.launchers import BIN, env, run

ONE_NODE = ("--dry-run", "--master-port", "29500")
# case: (project options, script, arguments, environment)
CASES = {
    "run_1p.txt": (
        {},
        "run_1p.sh",
        ("--dry-run", "--device-id", "3", "--", "--epoch_size", "2"),
        {},
    ),
    "torchrun_node1_of_2.txt": (
        {"target": "cuda", "devices_per_node": 4, "nnodes": 2},
        "run_8p.sh",
        ("--dry-run", "--node-rank", "1", "--master-addr", "10.0.0.1", "--", "--smoke"),
        {},
    ),
    "ranktable_pytorch_no_table.txt": (
        {"target": "ascend", "devices_per_node": 2},
        "run_8p.sh",
        (*ONE_NODE, "--master-addr", "10.0.0.1", "--data", "/data", "--output", "/out"),
        {},
    ),
    "ranktable_devices_4_7.txt": (
        {"target": "ascend", "devices_per_node": 4, "framework": "mindspore"},
        "run_8p.sh",
        ("--dry-run", "--nproc", "4", "--rank-table", "{tmp}/t47.json", "--node-rank", "0"),
        {},
    ),
    "ranktable_node1_of_2.txt": (
        {"target": "ascend", "devices_per_node": 8, "framework": "mindspore", "nnodes": 2},
        "run_8p.sh",
        ("--dry-run", "--rank-table", "{tmp}/t16.json", "--node-rank", "1"),
        {},
    ),
    # shard: full on 8 NPUs, MindSpore's optimizer parallel: msrun's 8 workers, as its
    # documentation starts them; each rank's own settings are the project's check_shards.
    "msrun_8_npus_shard_full.txt": (
        {"target": "ascend", "devices_per_node": 8, "framework": "mindspore"},
        "run_8p.sh",
        ("--launcher", "msrun", *ONE_NODE, "--", "--shard", "full"),
        {},
    ),
    "msrun_node1_of_2.txt": (
        {"target": "cuda", "devices_per_node": 4, "framework": "mindspore", "nnodes": 2},
        "run_8p.sh",
        ("--dry-run", "--node-rank", "1", "--", "--smoke"),
        {},
    ),
    "cluster_pytorchjob.txt": (
        {"target": "cuda", "devices_per_node": 8},
        "run_8p.sh",
        ("--cluster", "pytorchjob", "--dry-run"),
        {"PET_NNODES": "3", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": "2"}
        | {"PET_MASTER_ADDR": "job-master-0", "PET_MASTER_PORT": "23456"},
    ),
    "cluster_volcano_cuda.txt": (
        {"target": "cuda", "devices_per_node": 2},
        "run_8p.sh",
        ("--cluster", "volcano", "--dry-run"),
        {"MASTER_ADDR": "job-master-0.job", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1"},
    ),
    "cluster_ascendjob_mindspore.txt": (
        {"target": "ascend", "devices_per_node": 8, "framework": "mindspore", "nnodes": 2},
        "run_8p.sh",
        ("--cluster", "ascendjob", "--dry-run"),
        {"MS_WORKER_NUM": "16", "MS_LOCAL_WORKER": "8", "MS_NODE_RANK": "1"}
        | {"MS_SCHED_HOST": "10.96.0.7", "MS_SCHED_PORT": "2222", "MS_ROLE": "MS_WORKER"},
    ),
    "cluster_ascendjob_pytorch.txt": (
        {"target": "ascend", "devices_per_node": 8, "nnodes": 2},
        "run_8p.sh",
        ("--cluster", "ascendjob", "--dry-run"),
        {"MASTER_ADDR": "10.96.0.8", "MASTER_PORT": "2222", "WORLD_SIZE": "16", "RANK": "1"}
        | {"LOCAL_WORLD_SIZE": "8", "LOCAL_RANK": "0,1,2,3,4,5,6,7"},
    ),
}
# The sweep as a job's command (gen job render --sweep): a PyTorchJob's one pod, its shape
# checked and its variables gone, sweep.py continuing the study on /output with the pod's
# data; an AscendJob's MindSpore pod (msrun's workers counted); a ModelArts job's boot
# command, its appended obs:// train_url the sweep's, the rest every trial's.
CASES |= {
    "sweep_pytorchjob.txt": (
        {"target": "cuda", "devices_per_node": 8, "nnodes": 2},
        "run_8p.sh",
        ("--sweep", "--cluster", "pytorchjob", "--join-timeout", "600", "--nproc", "8")
        + ("--parallel", "4", "--data", "/data", "--output", "/output", "--dry-run")
        + ("--", "--epoch_size", "3"),
        {"PET_NNODES": "1", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": "0"}
        | {"PET_MASTER_ADDR": "job-master-0", "PET_MASTER_PORT": "23456"},
    ),
    "sweep_ascendjob_mindspore.txt": (
        {"target": "ascend", "devices_per_node": 8, "framework": "mindspore"},
        "run_8p.sh",
        ("--sweep", "--cluster", "ascendjob", "--parallel", "2", "--dry-run"),
        {"MS_WORKER_NUM": "8", "MS_LOCAL_WORKER": "8", "MS_NODE_RANK": "0"}
        | {"MS_SCHED_HOST": "10.96.0.7", "MS_SCHED_PORT": "2222", "MS_ROLE": "MS_WORKER"},
    ),
    "sweep_modelarts.txt": (
        {"target": "cuda", "devices_per_node": 8},
        "run_8p.sh",
        ("--sweep", "--dry-run", "--data_url=obs://bucket/data/", "--train_url=obs://bucket/out/")
        + ("--trials=8", "--epoch_size=3"),
        {"MA_VJ_NAME": "modelarts-job-5e6f7a8b", "MA_NUM_HOSTS": "1", "MA_NUM_GPUS": "8"},
    ),
}
# A ModelArts job of 2 nodes x 8 devices, as node 1 sees it: the same command on every node.
MODELARTS_JOB = {
    "MA_VJ_NAME": "modelarts-job-5e6f7a8b",
    "MA_NUM_HOSTS": "2",
    "VC_WORKER_NUM": "2",
    "VC_TASK_INDEX": "1",
    "MA_NUM_GPUS": "8",
    "VC_WORKER_HOSTS": "modelarts-job-5e6f7a8b-worker-0.modelarts-job-5e6f7a8b,"
    "modelarts-job-5e6f7a8b-worker-1.modelarts-job-5e6f7a8b",
    "MA_CURRENT_IP": "10.0.0.2",
}
CASES |= {
    "modelarts_torchrun_2x8.txt": (
        {"target": "cuda", "devices_per_node": 8, "nnodes": 2},
        "run_8p.sh",
        ("--dry-run", "--data_url=/home/ma-user/modelarts/inputs/data_url_0/", "--epoch_size=3"),
        MODELARTS_JOB,
    ),
    "modelarts_msrun_2x8.txt": (
        {"target": "ascend", "devices_per_node": 8, "framework": "mindspore", "nnodes": 2},
        "run_8p.sh",
        ("--dry-run",),
        MODELARTS_JOB,
    ),
    # The job's rank table lists this node (MA_CURRENT_IP) second.
    "modelarts_ranktable_2x8.txt": (
        {"target": "ascend", "devices_per_node": 8, "framework": "mindspore", "nnodes": 2},
        "run_8p.sh",
        ("--dry-run",),
        MODELARTS_JOB | {"RANK_TABLE_FILE": "{tmp}/t16.json"},
    ),
}
GOLDEN_CASES = list(CASES)


def _tables(tmp_path: Path) -> None:
    on_4_7 = ranktable.generate("10.0.0.1", [4, 5, 6, 7], [f"10.9.0.{i}" for i in range(4)])
    (tmp_path / "t47.json").write_text(on_4_7.dumps())
    (tmp_path / "t16.json").write_text(ranktable.example(8, 2).dumps())


@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_dry_runs_match_their_golden_files(
    render_project: RenderProject, golden: Golden, tmp_path: Path, case: str
) -> None:
    options, script, args, extra = CASES[case]
    project = render_project("demo", **options)
    _tables(tmp_path)
    argv = [arg.format(tmp=tmp_path) for arg in args]
    extra = {name: value.format(tmp=tmp_path) for name, value in extra.items()}
    result = run(project / "scripts" / script, *argv, environ=env(PYTHON=sys.executable, **extra))
    assert result.returncode == 0, result.stderr
    text = result.stdout.replace(str(project), "{project}").replace(str(tmp_path), "{tmp}")
    text = text.replace(str(BIN / "msrun"), "{bin}/msrun").replace(sys.executable, "{python}")
    golden.check(case, text)
