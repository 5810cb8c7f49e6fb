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
        # The shipped example: one server, a placeholder address; its ranks run here.
        variables["RANK_TABLE_FILE"] = str(project / "rank_table_8p.json")
    result = run(script, *args, environ=variables)
    assert result.returncode == 0, result.stderr
    output = project / "test" / "output"
    for device in range(8):
        # ModelZoo's own names: output/<ASCEND_DEVICE_ID>/train_<ASCEND_DEVICE_ID>.log.
        assert f"# rank {device}, log {output}/{device}/train_{device}.log" in result.stdout
    assert ("--max_steps 200" in result.stdout) == (mode == "performance")
    if framework == "mindspore":
        note = "note: the table's one server (10.0.0.1) is not one of this host's addresses"
        assert note in result.stderr and "its ranks run here" in result.stderr


def test_a_fresh_mindspore_8p_run_says_what_it_needs(render_project: RenderProject) -> None:
    """As shipped, on a host without /etc/hccn.conf (this one): one line saying what to give."""
    project = render_project(framework="mindspore", target="ascend", devices_per_node=8)
    script = project / "test" / "train_full_8p.sh"
    result = run(script, f"--data_path={project / 'data'}", environ=env(PYTHON=sys.executable))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: no rank table was given and none could be made for this host: /etc/hccn.conf: "
        "No such file or directory (it lists each device's address_N); set RANK_TABLE_FILE (or "
        "pass --rank-table FILE), or give this host's hccn.conf (--hccn-conf FILE)"
    ]
    assert not (project / "test" / "output").exists()


def test_scripts_need_a_data_path(render_project: RenderProject) -> None:
    project = render_project(target="ascend")
    result = run(project / "test" / "train_full_1p.sh")
    assert result.returncode == 2 and "--data_path=DIR is required" in result.stderr
    assert run(project / "test" / "train_full_1p.sh", "--epochs=3").returncode == 2


def test_cuda_projects_have_no_modelzoo_scripts(render_project: RenderProject) -> None:
    assert not (render_project(target="cuda") / "test").exists()


def test_actual_fps_leaves_out_the_first_steps_compile(
    render_project: RenderProject, tmp_path: Path
) -> None:
    """A performance run shorter than an epoch: one train line, its rate pulled down by the
    first steps' compile; the step lines after the first say the steady rate."""
    summary_py = render_project(target="ascend") / "test" / "summary.py"
    (run_dir := tmp_path / "run").mkdir()
    (run_dir / "hparams.json").write_text('{"batch_size": 32, "model": "lenet"}')
    rows = [
        *(
            f'{{"type": "step", "step": {20 * (i + 1)}, "samples_per_s": {rate}}}'
            for i, rate in enumerate((150, 2000, 2100, 2200))
        ),
        '{"type": "train", "epoch": 1, "loss": 0.5, "samples_per_s": 520}',
        '{"type": "test", "epoch": 1, "accuracy": 0.9}',
    ]
    (run_dir / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    args = [
        str(run_dir),
        "--rank-size",
        "1",
        "--e2e",
        "9",
        "--case-dir",
        str(tmp_path),
        "--mode",
        "performance",
    ]
    result = subprocess.run(
        [sys.executable, str(summary_py), *args],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    summary = dict(re.findall(r"^(\w+) = (.+)$", result.stdout, re.M))
    assert summary["ActualFPS"] == "2100.00" and summary["TrainingTime"] == "15.24"


def test_perf_steps_must_be_a_number(render_project: RenderProject) -> None:
    project = render_project(target="ascend")
    script = project / "test" / "train_performance_1p.sh"
    result = run(script, f"--data_path={project / 'data'}", environ=env(PERF_STEPS="lots"))
    assert result.returncode == 2
    assert result.stderr == "error: PERF_STEPS must be a whole number of steps, not 'lots'\n"
