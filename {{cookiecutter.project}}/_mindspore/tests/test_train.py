"""train.py end to end on the CPU: --smoke runs, checkpoints, --resume, user errors; the model."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest

from src.model import LeNet5, evaluate

PROJECT = Path(__file__).resolve().parent.parent
# A single process, whatever launcher started pytest.
LAUNCH_VARS = ("RANK_SIZE", "RANK_ID", "DEVICE_ID", "MS_WORKER_NUM", "MS_ROLE", "RANK_TABLE_FILE")
# The names of the network's parameters in a checkpoint (the optimizer's are "moments.*").
WEIGHTS = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc3.weight", "fc3.bias")


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
    (path,) = output.glob(f"lenet-{epoch}_*.ckpt")
    return path


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output of one --smoke run: one epoch on random data."""
    output = tmp_path_factory.mktemp("smoke")
    result = run_train("--smoke", "--train_url", str(output))
    assert result.returncode == 0, result.stdout + result.stderr
    return output


def test_smoke_writes_a_checkpoint_and_a_run_record(smoke_run: Path) -> None:
    params = ms.load_checkpoint(str(checkpoint(smoke_run, 1)))
    assert int(params["epoch_num"].asnumpy()) == 1 and int(params["seed"].asnumpy()) == 0
    assert set(WEIGHTS) <= params.keys() and "moments.conv1.weight" in params
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
    resume = ["--resume", str(checkpoint(broken, 1))]
    resumed = run_train("--smoke", "--epoch_size", "2", "--train_url", str(broken), *resume)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert run_train("--smoke", "--epoch_size", "2", "--train_url", str(whole)).returncode == 0

    expected = ms.load_checkpoint(str(checkpoint(whole, 2)))
    got = ms.load_checkpoint(str(checkpoint(broken, 2)))
    for name in (*WEIGHTS, "moments.fc3.weight", "global_step"):
        np.testing.assert_array_equal(got[name].asnumpy(), expected[name].asnumpy(), err_msg=name)
    epochs = [json.loads(line)["epoch"] for line in (broken / "metrics.jsonl").open()]
    assert epochs == [1, 1, 2, 2]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--smoke", "--resume", "{tmp}/no.ckpt"], "error: --resume {tmp}/no.ckpt: no such file"),
        (["--data_url", "{tmp}/nowhere"], "error: dataset directory {tmp}/nowhere does not exist"),
        (["--sink_size", "0"], "error: argument --sink_size: 0 must be -1"),
    ],
    ids=["resume", "dataset", "sink-size"],
)
def test_user_errors_are_one_line_and_exit_2(tmp_path: Path, args: list, expected: str) -> None:
    argv = [arg.format(tmp=tmp_path) for arg in args]
    result = run_train("--train_url", str(tmp_path / "out"), *argv)
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(expected.format(tmp=tmp_path)), result.stderr


def test_model_takes_any_batch_size() -> None:
    ms.set_device("CPU")
    net = LeNet5()
    for batch in (1, 7, 64):
        images = np.zeros((batch, 1, 28, 28), np.float32)
        assert net(ms.Tensor(images)).shape == (batch, 10)
    # 1001 samples: a full evaluation batch of 1000 and a last one of 1.
    images = np.random.default_rng(0).standard_normal((1001, 1, 28, 28)).astype(np.float32)
    metrics = evaluate(net, images, np.zeros(1001, np.int32))
    assert 0 <= metrics["accuracy"] <= 1 and metrics["loss"] > 0
