"""train.py end to end on the CPU: --smoke runs, checkpoints kept, resume by path and auto,
pretrained weights, user errors. The framework is the project's, through src.scaffold.backend."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from checks.yours import MODEL, TASK
from src.scaffold.backend.core import CHECKPOINT_SUFFIX as SUFFIX
from src.scaffold.backend.core import load_arrays
from src.scaffold.run.timeline import PHASES

PROJECT = Path(__file__).resolve().parent.parent
# A single process, whatever launcher or platform started pytest.
LAUNCH_VARS = (
    *("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"),
    *("RANK_SIZE", "RANK_ID", "DEVICE_ID", "MS_WORKER_NUM", "MS_ROLE", "RANK_TABLE_FILE"),
    *("DATA_DOWNLOAD_METHOD", "LOCAL_DATASET_PATH", "LOCAL_OUTPUT_PATH"),
)


# A learning rate that does not follow the epochs asked for (config.yaml's may: cosine), so that
# a run resumed with more epochs takes the steps of the unbroken run with as many.
EPOCHS_FREE = ("--lr_schedule", "constant")


def run_train(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in LAUNCH_VARS}
    return subprocess.run(
        [sys.executable, "train.py", "--device_target", "cpu", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def checkpoint(output: Path, epoch: int) -> Path:
    return output / f"{MODEL.name}_epoch{epoch}{SUFFIX}"


def assert_same_weights(got: Path, expected: Path) -> None:
    want = load_arrays(expected)
    have = load_arrays(got)
    assert have.keys() == want.keys()
    for name, value in want.items():
        np.testing.assert_array_equal(have[name], value, err_msg=name)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output of one --smoke run: one epoch on random data, started with two arguments
    a platform adds; what it printed is kept next to the output, in console.txt."""
    output = tmp_path_factory.mktemp("smoke") / "output"
    platform_args = ("--multi_data_url", "[{}]", "--init_method=tcp://10.0.0.1:2")
    result = run_train("--smoke", "--train_url", str(output), *platform_args, *EPOCHS_FREE)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (output.parent / "console.txt").write_text(result.stdout + result.stderr)
    return output


def test_smoke_writes_a_checkpoint_pointer_and_run_record(smoke_run: Path) -> None:
    assert load_arrays(checkpoint(smoke_run, 1))
    pointer = json.loads((smoke_run / "latest.json").read_text())
    assert pointer["latest"] == pointer["best"] == checkpoint(smoke_run, 1).name
    hparams = json.loads((smoke_run / "hparams.json").read_text())
    assert hparams["smoke"] is True and hparams["resolved"]["world_size"] == 1
    lines = [json.loads(line) for line in (smoke_run / "metrics.jsonl").read_text().splitlines()]
    # The last step is always reported, then the epoch's train and val lines, the test.
    assert [line["type"] for line in lines] == ["step", "train", "val", "test"]
    assert {"loss", "lr", "samples_per_s"} <= lines[0].keys()
    assert {"loss", TASK.monitor.metric} <= lines[2].keys() & lines[3].keys()
    (artifact,) = json.loads((smoke_run / "artifacts.json").read_text())
    assert artifact["path"] == checkpoint(smoke_run, 1).name


def test_arguments_the_platform_adds_are_logged_once_by_name(smoke_run: Path) -> None:
    console = (smoke_run.parent / "console.txt").read_text()
    ignored = "platform arguments, accepted and not used: --multi_data_url, --init_method"
    assert console.count(ignored) == 1, console[-2000:]
    assert "tcp://10.0.0.1" not in console  # names only: values may hold credentials


def test_the_start_up_is_split_by_phase_once_the_first_step_is_done(smoke_run: Path) -> None:
    console = (smoke_run.parent / "console.txt").read_text()
    (line,) = [line for line in console.splitlines() if " start-up " in line]
    total, phases = re.search(r"start-up ([\d.]+) s to the first step: (.*)$", line).groups()
    seconds = {name: float(value) for name, value in (p.rsplit(" ", 1) for p in phases.split(", "))}
    assert list(seconds) == list(PHASES)
    # Each printed to 2 decimals: their sum is the total to within 5 x 0.005.
    assert abs(sum(seconds.values()) - float(total)) <= 0.025 + 1e-9, line
    assert all(value >= 0 for value in seconds.values()), line
    # The phases sum to the process's age at its first step: under a minute, over the
    # framework's import (tenths of a second at least).
    assert 0.05 < float(total) < 60, line


def test_resume_continues_to_the_same_weights(smoke_run: Path, tmp_path: Path) -> None:
    broken, whole = tmp_path / "broken", tmp_path / "whole"
    shutil.copytree(smoke_run, broken)
    resume = ["--resume", str(checkpoint(broken, 1)), *EPOCHS_FREE]
    resumed = run_train("--smoke", "--epoch_size", "2", "--train_url", str(broken), *resume)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    again = run_train("--smoke", "--epoch_size", "2", "--train_url", str(whole), *EPOCHS_FREE)
    assert again.returncode == 0, again.stderr[-2000:]
    assert_same_weights(checkpoint(broken, 2), checkpoint(whole, 2))
    # Each attempt's test line stays: the first attempt's after epoch 1, the second's.
    lines = [json.loads(line) for line in (broken / "metrics.jsonl").open()]
    assert [(line["type"], line["epoch"]) for line in lines] == [
        *(("step", 1), ("train", 1), ("val", 1), ("test", 1)),
        *(("step", 2), ("train", 2), ("val", 2), ("test", 2)),
    ]
    assert len({line["run"] for line in lines}) == 1


def test_resume_auto_continues_from_the_output_or_starts_afresh(
    smoke_run: Path, tmp_path: Path
) -> None:
    shutil.copytree(smoke_run, tmp_path / "out")
    args = ("--smoke", "--epoch_size", "2", "--resume", "auto", *EPOCHS_FREE)
    resumed = run_train(*args, "--train_url", str(tmp_path / "out"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "after epoch 1" in resumed.stdout
    fresh = run_train(*args, "--train_url", str(tmp_path / "empty"))
    assert fresh.returncode == 0 and "starting at epoch 1" in fresh.stdout
    assert_same_weights(checkpoint(tmp_path / "out", 2), checkpoint(tmp_path / "empty", 2))


def test_pretrained_weights_load_and_named_layers_can_be_skipped(
    smoke_run: Path, tmp_path: Path
) -> None:
    weights = str(checkpoint(smoke_run, 1))
    # More outputs than the data's classes (or a tokenizer's ids, which fewer cannot hold): the
    # head's shape differs, so it must be skipped.
    args = ("--smoke", "--num_classes", "300", "--pretrained", weights)
    refused = run_train(*args, "--train_url", str(tmp_path / "a"))
    assert refused.returncode == 2, refused.stderr
    # The layer the model declares as its head (@model's head=), else the one named.
    layer = MODEL.head or refused.stderr.split(" layer ", 1)[-1].split()[0]
    assert refused.stderr.startswith(f"error: --pretrained {weights}: layer {layer} has shape")
    assert f"pass --skip_layers {layer}" in refused.stderr and len(refused.stderr.splitlines()) == 1
    loaded = run_train(*args, "--skip_layers", layer, "--train_url", str(tmp_path / "b"))
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert f"loaded pretrained weights from {weights} (kept {layer} initialised)" in loaded.stdout
    # Weights only: the run starts at epoch 1, not where the pretrained run stopped.
    record = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in record][0] == 1
    assert checkpoint(tmp_path / "b", 1).is_file()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--resume", "{tmp}/no" + SUFFIX], "error: --resume {tmp}/no" + SUFFIX + ": no such file"),
        (["--pretrained", "{tmp}/no"], "error: --pretrained {tmp}/no: no such file"),
        (["--data_url", "{tmp}/nowhere"], "error: dataset directory {tmp}/nowhere does not exist"),
        (["--skip_layers", "nope", "--pretrained", "{tmp}"], "error: --pretrained {tmp}: no *"),
    ],
    ids=["resume", "pretrained", "dataset", "pretrained-dir"],
)
def test_user_errors_are_one_line_and_exit_2(tmp_path: Path, args: list, expected: str) -> None:
    argv = [arg.format(tmp=tmp_path) for arg in args]
    smoke = [] if "--data_url" in args else ["--smoke"]
    result = run_train(*smoke, "--train_url", str(tmp_path / "out"), *argv)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(expected.format(tmp=tmp_path)), result.stderr
