"""train.py end to end on the CPU: --smoke runs, checkpoints, --resume and user errors."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

PROJECT = Path(__file__).resolve().parent.parent
# A single process, whatever launcher started pytest.
DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def run_train(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in DIST_VARS}
    return subprocess.run(
        [sys.executable, "train.py", "--device_target", "cpu", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output of one --smoke run: one epoch on random data."""
    output = tmp_path_factory.mktemp("smoke")
    result = run_train("--smoke", "--train_url", str(output))
    assert result.returncode == 0, result.stderr
    return output


def test_smoke_writes_a_checkpoint_and_a_run_record(smoke_run: Path) -> None:
    checkpoint = torch.load(smoke_run / "lenet_epoch1.pt", weights_only=True)
    assert checkpoint["epoch"] == 1 and set(checkpoint) == {"model", "optimizer", "epoch", "seed"}
    hparams = json.loads((smoke_run / "hparams.json").read_text())
    assert hparams["smoke"] is True and hparams["world_size"] == 1
    lines = [json.loads(line) for line in (smoke_run / "metrics.jsonl").read_text().splitlines()]
    assert [line["type"] for line in lines] == ["train", "test"]
    assert all(set(line) == {"type", "step", "epoch", "metrics", "time"} for line in lines)
    assert set(lines[1]["metrics"]) == {"loss", "accuracy"}
    (artifact,) = json.loads((smoke_run / "artifacts.json").read_text())
    data = (smoke_run / artifact["path"]).read_bytes()
    assert artifact["bytes"] == len(data)
    assert artifact["sha256"] == hashlib.sha256(data).hexdigest()


def test_resume_continues_to_the_same_weights(smoke_run: Path, tmp_path: Path) -> None:
    broken, whole = tmp_path / "broken", tmp_path / "whole"
    shutil.copytree(smoke_run, broken)
    resume = ["--resume", str(broken / "lenet_epoch1.pt")]
    resumed = run_train("--smoke", "--epoch_size", "2", "--train_url", str(broken), *resume)
    assert resumed.returncode == 0, resumed.stderr
    assert run_train("--smoke", "--epoch_size", "2", "--train_url", str(whole)).returncode == 0

    for name, tensor in weights(whole / "lenet_epoch2.pt").items():
        assert torch.equal(weights(broken / "lenet_epoch2.pt")[name], tensor), name
    epochs = [json.loads(line)["epoch"] for line in (broken / "metrics.jsonl").open()]
    assert epochs == [1, 1, 2, 2]


def test_bad_resume_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pt"
    result = run_train("--smoke", "--train_url", str(tmp_path), "--resume", str(missing))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: --resume {missing}: no such file"
