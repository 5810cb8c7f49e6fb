"""sweep.py: trials of train.py searched by Optuna, each an ordinary run in its own directory,
two side by side on the CPU, the median pruner stopping the hopeless ones from their validation
rows; a sweep killed outright continues with --resume auto; bad sweep.yaml is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import gen
from tests.training import runs

# Grid order by config.yaml's seed (0): 0.1/64, 0.1/32, 0.05/32, 1e-6/64, 1e-6/32, 0.05/64. The
# hopeless lr (1e-6: the first weights' accuracy, 0.076) comes 4th and 5th, each started once
# 2 trials have ended, one of them finished at least (the first to end cannot be pruned, with
# nothing finished before it): behind its validations, the hopeless trial is pruned.
SIX = {
    "space": {"lr": [1.0e-6, 0.05, 0.1], "batch_size": [32, 64]},
    "sampler": "grid",
    "trials": 6,
    "startup_trials": 1,
}
EVERY = ("--data_url", "{digits}", "--epoch_size", "2", "--validate_every", "10")


def _sweep(project: Path, tmp_path: Path, space: dict, *args: str, digits: Path) -> tuple:
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(space, sort_keys=False))
    every = [arg.format(digits=digits) for arg in EVERY]
    argv = ("sweep.py", "--sweep_config", str(config), "--train_url", str(tmp_path / "out"))
    result = runs.run(project, *argv, *args, "--", *every, timeout=900)
    return result, tmp_path / "out" / "sweep"


def _records(directory: Path) -> list[dict]:
    text = (directory / "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.slow
def test_six_trials_two_side_by_side_prune_the_hopeless_and_write_the_best(
    pytorch_project: Path, digits_dir: Path, tmp_path: Path
) -> None:
    result, out = _sweep(pytorch_project, tmp_path, SIX, "--parallel", "2", digits=digits_dir)
    said = runs.ok(result)
    rows = {}
    for line in (out / "trials.md").read_text().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[int(cells[0])] = cells
    assert sorted(rows) == list(range(6)) and "| trial | state | accuracy |" in said
    pruned = [n for n, cells in rows.items() if cells[1] == "pruned"]
    # The hopeless ones at least: their accuracy stays the first weights' while the good trials
    # that ended before them (one or more by then) learn. A good trial behind a better one's
    # early validations may be pruned too: that is the median pruner's bet.
    assert any(rows[n][3] == "1e-06" for n in pruned), rows
    finished = [n for n, cells in rows.items() if cells[1] == "finished"]
    for number in range(6):
        # An ordinary run's record: its options, every validation, its reason where pruned.
        record = _records(out / str(number))
        hparams = json.loads((out / str(number) / "hparams.json").read_text())
        assert (hparams["lr"], hparams["batch_size"]) == (
            float(rows[number][3]),
            int(rows[number][4]),
        )
        assert any(row["type"] == "val" for row in record)
        stops = [row for row in record if row["type"] == "stop"]
        if number in pruned:
            assert "pruned by the sweep's median pruner at step" in stops[-1]["reason"]
        else:
            assert not stops and [r for r in record if r["type"] == "test"]
    # The best: the finished trial whose own record holds the best validation accuracy.
    best = max(
        finished,
        key=lambda n: max(r["accuracy"] for r in _records(out / str(n)) if r["type"] == "val"),
    )
    written = yaml.safe_load((out / "best.yaml").read_text())
    assert written == {"lr": float(rows[best][3]), "batch_size": int(rows[best][4])}
    assert f"best: trial {best}, accuracy" in said
    assert (out / "sweep.png").stat().st_size > 10_000
    # gen report of the sweep: its trials' curves, and its table.
    report = gen("report", str(out), "-o", f"{tmp_path / 'report'}/", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert all(f"| trial {n} |" in text for n in range(6)), text
    assert f"## The sweep in {out}" in text and (out / "trials.md").read_text() in text


@pytest.mark.slow
def test_a_sweep_killed_in_its_third_trial_continues_with_resume_auto(
    pytorch_project: Path, digits_dir: Path, tmp_path: Path
) -> None:
    """SIGKILL to the sweep: its running trial stops as from a platform's SIGTERM (it saves);
    --resume auto runs that trial's options again in its directory, from its checkpoint."""
    space = {"space": {"lr": [0.05, 0.1], "batch_size": [32, 64]}, "sampler": "grid"}
    space |= {"trials": 4, "pruner": "none"}
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(space, sort_keys=False))
    # 4 epochs: 3 of them, 4 s or more, between its first checkpoint and its end, for the kill.
    every = [arg.format(digits=digits_dir) for arg in EVERY] + ["--epoch_size", "4"]
    argv = ["sweep.py", "--sweep_config", str(config), "--train_url", str(tmp_path / "out")]
    out = tmp_path / "out" / "sweep"
    sweep = subprocess.Popen(
        [sys.executable, *argv, "--", *every],
        cwd=pytorch_project,
        env=runs.clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not (out / "2" / "latest.json").exists():  # its first checkpoint
            assert sweep.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        os.kill(sweep.pid, signal.SIGKILL)
    finally:
        sweep.kill()
        sweep.wait()
    # The trial saw its sweep go (SIGTERM), saved and stopped: wait for it to let go.
    deadline = time.monotonic() + 120
    while (out / "2" / ".running.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    again = runs.run(pytorch_project, *argv, "--resume", "auto", "--", *every, timeout=900)
    said = runs.ok(again)
    assert "trial 2 was interrupted: it resumes in" in said
    table = (out / "trials.md").read_text().splitlines()[2:]
    numbers = [int(line.strip("|").split("|")[0]) for line in table]
    # Four trials, none lost or counted twice: trial 3 ran interrupted 2's options in its
    # directory, then trial 4 its own.
    assert numbers == [0, 1, 3, 4]
    assert sorted(p.name for p in out.iterdir() if p.name.isdigit()) == ["0", "1", "2", "4"]
    hparams = json.loads((out / "2" / "hparams.json").read_text())
    assert len(hparams["attempts"]) == 2 and hparams["resume"]
    best = max(
        max(r["accuracy"] for r in _records(out / name) if r["type"] == "val")
        for name in ("0", "1", "2", "4")
    )
    assert f"accuracy {best:.6g}" in said


@pytest.mark.slow
def test_a_failed_trial_is_recorded_with_its_line_and_the_sweep_goes_on(
    pytorch_project: Path, digits_dir: Path, tmp_path: Path
) -> None:
    """An lr of 1e6 makes the loss not a number: train.py stops with its error line, the trial is
    failed with that line, and the other trial runs and is the best."""
    space = {"space": {"lr": [1.0e6, 0.05]}, "sampler": "grid", "trials": 2, "pruner": "none"}
    result, out = _sweep(pytorch_project, tmp_path, space, "--trials", "2", digits=digits_dir)
    said = runs.ok(result)
    rows = [line.strip("|").split("|") for line in (out / "trials.md").read_text().splitlines()]
    states = {float(cells[3]): (cells[1].strip(), cells[4].strip()) for cells in rows[2:]}
    state, note = states[1.0e6]
    assert state == "failed" and note.startswith("the training loss is "), states
    assert "try a lower --lr" in note
    assert states[0.05][0] == "finished"
    assert "failed: " in said and "(the sweep goes on)" in said
    assert yaml.safe_load((out / "best.yaml").read_text()) == {"lr": 0.05}


@pytest.mark.parametrize(
    ("case", "space", "args", "expected"),
    [
        (
            "unknown key",
            {"space": {"lrr": [0.1]}},
            (),
            "space: unknown option 'lrr' (did you mean 'lr'?)",
        ),
        (
            "empty range",
            {"space": {"lr": []}},
            (),
            "space.lr: an empty list: give the values to try",
        ),
        (
            "log through zero",
            {"space": {"lr": {"log": [0, 0.1]}}},
            (),
            "log range [0, 0.1] reaches 0",
        ),
        (
            "metric",
            {"space": {"lr": [0.1]}, "metric": "f1"},
            (),
            "sweep.yaml's metric 'f1': monitor.metric 'f1' is not among the metrics",
        ),
        (
            "parallel",
            {"space": {"lr": [0.1]}},
            ("--parallel", "999"),
            "--parallel 999 trials of 1 rank(s): this node has",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_bad_input_is_one_line_and_runs_nothing(
    pytorch_project: Path,
    digits_dir: Path,
    tmp_path: Path,
    case: str,
    space: dict,
    args: tuple,
    expected: str,
) -> None:
    result, out = _sweep(pytorch_project, tmp_path, space, *args, digits=digits_dir)
    runs.assert_one_line_exit_2(result, expected)
    assert not out.exists()


def _rows(output: Path) -> list[dict]:
    """The record's rows without what differs between any two runs (their ids and times)."""
    keep = ("type", "epoch", "step", "loss", "accuracy")
    return [{k: row[k] for k in keep if k in row} for row in _records(output)]


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_a_trial_of_two_ranks_is_the_plain_two_rank_run_of_its_options(
    pytorch_project: Path,
    mindspore_projects: dict[str, Path],
    digits_dir: Path,
    tmp_path: Path,
    framework: str,
) -> None:
    """--ranks 2: the trial runs through the project's own launcher (torchrun, msrun), every
    rank with the trial's options: its record is a plain 2-rank run's with them, and both
    ranks end with the same weights."""
    project = pytorch_project if framework == "pytorch" else mindspore_projects["custom"]
    space = {"space": {"lr": [0.05]}, "trials": 1, "sampler": "grid", "pruner": "none"}
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(space))
    every = ("--data_url", str(digits_dir), "--epoch_size", "1", "--max_steps", "8")
    out = tmp_path / "out"
    argv = ("sweep.py", "--sweep_config", str(config), "--train_url", str(out), "--ranks", "2")
    runs.ok(runs.run(project, *argv, "--", *every, timeout=900))
    trial = out / "sweep" / "0"
    launcher = "torchrun" if framework == "pytorch" else "msrun"
    plain = tmp_path / "plain"
    command = ["bash", "scripts/run_8p.sh", "--launcher", launcher, "--nproc", "2"]
    command += ["--master-port", str(runs.free_port()), "--output", str(plain)]
    command += ["--", "--lr", "0.05", *every]
    env = runs.clean_env(PYTHON=sys.executable, OMP_NUM_THREADS="1")
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # The same program on the same data and options, its 2 ranks reducing in the same order.
    assert _rows(trial) == _rows(plain) and [r for r in _rows(trial) if r["type"] == "val"]
    logs = [p.read_text() for p in sorted((trial / "logs").rglob("*.log"))]
    ends = [line for text in logs for line in text.splitlines() if "finished, parameters " in line]
    assert {line.split(" of ")[0].split(":")[-1] for line in ends} == {"rank 0", "rank 1"}, ends
    assert len({line.split("parameters ")[1].split()[0] for line in ends}) == 1, ends
