"""Ascend ModelZoo's entry points: test/train_{full,performance}_{1p,8p}.sh --data_path=DIR,
per-rank logs under test/output/<ASCEND_DEVICE_ID>/ and ModelZoo's summary at the end."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import RenderProject
from tests.template.launchers import env, run

FIELDS = (
    "CaseName",
    "BatchSize",
    "DeviceType",
    "RankSize",
    "ActualFPS",
    "TrainingTime",
    "TrainAccuracy",
    "ActualLoss",
    "E2ETrainingTime",
)


def git(cwd: Path, *args: str) -> str:
    identity = ("-c", "user.name=Test", "-c", "user.email=test@example.com")
    return subprocess.run(
        ["git", *identity, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_performance_1p_runs_a_fixed_number_of_steps_and_sums_up(
    render_project: RenderProject, framework: str
) -> None:
    project = render_project(framework=framework, target="ascend", platform="generic")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "as generated")
    variables = env(PYTHON=sys.executable, PERF_STEPS="30", ASCEND_DEVICE_ID="0")
    script = project / "test" / "train_performance_1p.sh"
    result = run(script, f"--data_path={project / 'data'}", environ=variables, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = dict(re.findall(r"^(\w+) = (.+)$", result.stdout, re.M))
    assert set(FIELDS) <= summary.keys(), result.stdout[-2000:]
    assert (
        summary["CaseName"] == "lenet_bs32_1p_perf"
        and summary["Network"] == "lenet"
        and summary["RankSize"] == "1"
    )
    assert float(summary["ActualFPS"]) > 0 and float(summary["TrainingTime"]) > 0
    assert 0 <= float(summary["TrainAccuracy"]) <= 1 and float(summary["ActualLoss"]) > 0
    case_dir = project / "test" / "output" / "0"
    assert (case_dir / "lenet_bs32_1p_perf.log").read_text().count(" = ") == len(FIELDS) + 1
    assert (case_dir / "train_0.log").is_file()
    # 30 steps: part of the first epoch (40 steps of 32 on the training split).
    (metrics,) = (case_dir / "checkpoints").glob("*/metrics.jsonl")  # one dir per run
    steps = [int(m) for m in re.findall(r'"step": (\d+)', metrics.read_text())]
    assert max(steps) == 30
    assert "Final Performance images/sec" in result.stdout
    # The run leaves nothing that gen push (git add -A) would commit.
    assert "!! test/output/" in git(project, "status", "--porcelain", "--ignored").splitlines()
    assert git(project, "status", "--porcelain") == ""


@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
@pytest.mark.parametrize("mode", ["full", "performance"])
def test_8p_scripts_run_the_per_rank_launcher(
    render_project: RenderProject, framework: str, mode: str
) -> None:
    project = render_project(framework=framework, target="ascend", devices_per_node=8)
    script = project / "test" / f"train_{mode}_8p.sh"
    variables = env(PYTHON=sys.executable)
    args = (f"--data_path={project / 'data'}", "--dry-run")
    if framework == "mindspore":
        variables["NODE_RANK"] = "0"  # the shipped example table lists a placeholder host
    result = run(script, *args, environ=variables)
    assert result.returncode == 0, result.stderr
    output = project / "test" / "output"
    for device in range(8):
        assert f"# rank {device}, log {output}/{device}/train.log" in result.stdout
    assert ("--max_steps 200" in result.stdout) == (mode == "performance")


def test_scripts_need_a_data_path(render_project: RenderProject) -> None:
    project = render_project(target="ascend")
    result = run(project / "test" / "train_full_1p.sh")
    assert result.returncode == 2 and "--data_path=DIR is required" in result.stderr
    assert run(project / "test" / "train_full_1p.sh", "--epochs=3").returncode == 2


def test_cuda_projects_have_no_modelzoo_scripts(render_project: RenderProject) -> None:
    assert not (render_project(target="cuda") / "test").exists()
