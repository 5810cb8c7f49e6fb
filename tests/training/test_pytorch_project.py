"""The generated PyTorch project trains for real on CPU: accuracy, DDP, resume, record, errors."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# Variables a launcher sets; a test that wants one process must not inherit them.
DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
TRAIN_SAMPLES = 1438  # the digits' training split
EPOCHS = 2


def clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in DIST_VARS}
    return env | extra


def run(
    project: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` in the project directory and return the finished process."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=project,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def train(project: Path, output: Path, *args: str) -> Path:
    """Run train.py on the CPU into output; fail the test with its stderr if it fails."""
    result = run(project, "train.py", "--device_target", "cpu", "--train_url", str(output), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return output


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


def metrics(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def single_run(pytorch_project: Path, digits_dir: Path, tmp_path_factory) -> Path:
    """One process, batch 64, two epochs on the digits."""
    output = tmp_path_factory.mktemp("single")
    args = ("--data_url", str(digits_dir), "--batch_size", "64", "--epoch_size", str(EPOCHS))
    return train(pytorch_project, output, *args)


@pytest.fixture(scope="module")
def torchrun_run(pytorch_project: Path, digits_dir: Path, tmp_path_factory) -> Path:
    """Two processes under torchrun, batch 32 each: the same global batch as single_run."""
    output = tmp_path_factory.mktemp("torchrun")
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    args = ["--data_url", str(digits_dir), "--train_url", str(output)]
    args += ["--batch_size", "32", "--epoch_size", str(EPOCHS), "--device_target", "cpu"]
    result = run(pytorch_project, *launcher, "train.py", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return output


@pytest.mark.slow
def test_reaches_95_percent_on_the_shipped_digits(pytorch_project: Path, tmp_path: Path) -> None:
    # No --data_url: the generic project's config.yaml points at its own ./data.
    output = train(pytorch_project, tmp_path)
    tests = [line for line in metrics(output) if line["type"] == "test"]
    assert [line["epoch"] for line in tests] == list(range(1, 11))
    assert tests[-1]["metrics"]["accuracy"] >= 0.95, tests[-1]


@pytest.mark.slow
def test_two_processes_end_with_the_weights_of_one(single_run: Path, torchrun_run: Path) -> None:
    one = weights(single_run / f"lenet_epoch{EPOCHS}.pt")
    two = weights(torchrun_run / f"lenet_epoch{EPOCHS}.pt")
    assert one.keys() == two.keys()
    for name in one:
        assert torch.allclose(one[name], two[name], rtol=0, atol=1e-5), name
    # Rank 1 wrote nothing into the shared directory: no extra files, no doubled lines.
    assert sorted(p.name for p in torchrun_run.iterdir()) == sorted(
        p.name for p in single_run.iterdir()
    )
    assert len(metrics(torchrun_run)) == len(metrics(single_run)) == 2 * EPOCHS
    hparams = json.loads((torchrun_run / "hparams.json").read_text())
    assert (hparams["world_size"], hparams["global_batch_size"]) == (2, 64)


@pytest.mark.slow
def test_resume_ends_with_the_weights_of_an_unbroken_run(
    pytorch_project: Path, digits_dir: Path, single_run: Path, tmp_path: Path
) -> None:
    args = ("--data_url", str(digits_dir), "--batch_size", "64", "--epoch_size", str(EPOCHS))
    resumed = train(
        pytorch_project, tmp_path, *args, "--resume", str(single_run / "lenet_epoch1.pt")
    )
    assert not (resumed / "lenet_epoch1.pt").exists()
    assert [line["epoch"] for line in metrics(resumed)] == [2, 2]
    expected = weights(single_run / "lenet_epoch2.pt")
    for name, tensor in weights(resumed / "lenet_epoch2.pt").items():
        assert torch.equal(tensor, expected[name]), name


@pytest.mark.slow
def test_run_record_is_complete_and_hashes_match(single_run: Path) -> None:
    hparams = json.loads((single_run / "hparams.json").read_text())
    for key, value in {"batch_size": 64, "epoch_size": EPOCHS, "world_size": 1}.items():
        assert hparams[key] == value
    assert {"lr", "momentum", "seed", "data_url", "train_url", "device"} <= hparams.keys()

    lines = metrics(single_run)
    steps_per_epoch = TRAIN_SAMPLES // 64
    expected = [
        (kind, epoch * steps_per_epoch, epoch)
        for epoch in range(1, EPOCHS + 1)
        for kind in ("train", "test")
    ]
    assert [(line["type"], line["step"], line["epoch"]) for line in lines] == expected
    for line in lines:
        assert set(line) == {"type", "step", "epoch", "metrics", "time"}
        keys = {"loss", "samples_per_s"} if line["type"] == "train" else {"loss", "accuracy"}
        assert set(line["metrics"]) == keys
    times = [line["time"] for line in lines]
    assert times == sorted(times)

    artifacts = json.loads((single_run / "artifacts.json").read_text())
    assert [a["path"] for a in artifacts] == [f"lenet_epoch{n}.pt" for n in range(1, EPOCHS + 1)]
    for artifact in artifacts:
        data = (single_run / artifact["path"]).read_bytes()
        assert artifact["bytes"] == len(data)
        assert artifact["sha256"] == hashlib.sha256(data).hexdigest()


@pytest.mark.slow
def test_non_zero_rank_writes_nothing(
    pytorch_project: Path, digits_dir: Path, tmp_path: Path
) -> None:
    # Launched by hand, as torchrun would, but with a separate --train_url per rank.
    port = str(free_port())
    procs = []
    for rank in (0, 1):
        env = clean_env(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            WORLD_SIZE="2",
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE="2",
        )
        cmd = [sys.executable, "train.py", "--device_target", "cpu", "--epoch_size", "1"]
        cmd += ["--data_url", str(digits_dir), "--train_url", str(tmp_path / f"rank{rank}")]
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=pytorch_project,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert (tmp_path / "rank0" / "lenet_epoch1.pt").is_file()
    assert not (tmp_path / "rank1").exists()
    assert outputs[1][0] == ""  # rank 1 does not log progress either


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_missing_dataset(pytorch_project: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = run(
        pytorch_project, "train.py", "--data_url", str(missing), "--train_url", str(tmp_path)
    )
    names = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte")
    assert_one_line_exit_2(result, str(missing), *names, "t10k-labels-idx1-ubyte")


@pytest.mark.parametrize(
    ("corrupt", "expected"),
    [
        (lambda data: data[:-100], "is truncated"),
        (lambda data: b"\x08" + data[1:], "bad magic number"),
    ],
    ids=["truncated", "bad-magic"],
)
def test_malformed_dataset(
    pytorch_project: Path, digits_dir: Path, tmp_path: Path, corrupt, expected: str
) -> None:
    data = shutil.copytree(digits_dir, tmp_path / "data")
    images = data / "train" / "train-images-idx3-ubyte"
    images.write_bytes(corrupt(images.read_bytes()))
    result = run(pytorch_project, "train.py", "--data_url", str(data), "--train_url", str(tmp_path))
    assert_one_line_exit_2(result, str(images), expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--resume", "{tmp}/no.pt"], "--resume {tmp}/no.pt: no such file"),
        (["--device_target", "tpu"], "unknown device target 'tpu'"),
        (["--device_target", "cuda"], "cuda was requested but no CUDA GPU is available"),
    ],
    ids=["resume", "device", "cuda"],
)
def test_user_errors(pytorch_project: Path, tmp_path: Path, args: list, expected: str) -> None:
    argv = [arg.format(tmp=tmp_path) for arg in args]
    # No GPU is visible, on any machine: the cuda case runs everywhere.
    env = clean_env(CUDA_VISIBLE_DEVICES="")
    result = run(pytorch_project, "train.py", "--train_url", str(tmp_path), *argv, env=env)
    assert_one_line_exit_2(result, expected.format(tmp=tmp_path))


@pytest.mark.slow
def test_generated_project_tests_pass(render_project) -> None:
    # Another combination than pytorch_project's: OpenI paths, Ascend extras.
    project = render_project(framework="pytorch", target="ascend", platform="openi")
    result = run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
