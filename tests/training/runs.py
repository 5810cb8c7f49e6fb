"""Running generated projects as their users do: train.py and launchers in subprocesses."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tests.training import forkserver

FAKE_MOXING = Path(__file__).resolve().parent / "fake_moxing"
# Variables a launcher or a platform sets: a test that wants them sets them itself.
LAUNCH_VARS = (
    *("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"),
    *("RANK_ID", "RANK_SIZE", "DEVICE_ID", "RANK_TABLE_FILE", "MS_WORKER_NUM", "MS_ROLE"),
    *("MS_SCHED_HOST", "MS_SCHED_PORT", "MS_NODE_ID", "TRAIN_CACHE_DIR", "OUTPUT_URL"),
    *("DATA_DOWNLOAD_METHOD", "DATASET_URL", "LOCAL_DATASET_PATH", "LOCAL_OUTPUT_PATH"),
)
SUFFIX = {"pytorch": ".pt", "mindspore": ".ckpt"}


def clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in LAUNCH_VARS}
    # msrun starts its workers as plain "python": this interpreter's must come first.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env | extra


def run(
    project: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` in the project directory and return the finished process: a
    script (``train.py ...``) by a fork of an interpreter with the project's framework imported
    (tests/training/forkserver.py says what that does and does not cover)."""
    env = env or clean_env()
    if framework := forkserver.forkable(project, args, env):
        return forkserver.server(framework).run(list(args), project, env, timeout)
    return subprocess.run(
        [sys.executable, *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def train(project: Path, output: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    """Run train.py on the CPU into output; fail the test with its output if it fails."""
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output), *args)
    result = run(project, *argv, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return output


def report(output: Path, dest: Path) -> str:
    """`gen report` of the run in ``output`` into ``dest``: its report.md, after a clean exit."""
    reported = subprocess.run(
        [sys.executable, "-m", "generator", "report", str(output), "-o", f"{dest}/"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert reported.returncode == 0, reported.stderr
    return (dest / "report.md").read_text(encoding="utf-8")


def checkpoint(output: Path, epoch: int, framework: str) -> Path:
    return output / f"lenet_epoch{epoch}{SUFFIX[framework]}"


def weights(path: Path) -> dict[str, np.ndarray]:
    """The arrays a checkpoint of either framework holds (model weights at least)."""
    if path.suffix == ".pt":
        import torch

        state = torch.load(path, weights_only=True)
        if "sharded" in state:  # shard: full's: its shards gathered by torch's own converter
            from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

            with tempfile.TemporaryDirectory() as tmp:
                dcp_to_torch_save(path.parent / state["sharded"]["directory"], f"{tmp}/whole.pt")
                state = torch.load(f"{tmp}/whole.pt", weights_only=True)
        return {name: tensor.numpy() for name, tensor in state["model"].items()}
    import mindspore as ms

    params = ms.load_checkpoint(str(path))
    # Besides the state: the epoch and seed, and what describes the data (strings).
    skip = ("epoch", "seed")
    return {
        name: p.asnumpy()
        for name, p in params.items()
        if name not in skip and hasattr(p, "asnumpy")
    }


def assert_same_weights(got: Path, expected: Path, atol: float = 0.0) -> None:
    want, have = weights(expected), weights(got)
    assert have.keys() == want.keys()
    for name, value in want.items():
        np.testing.assert_allclose(have[name], value, rtol=0, atol=atol, err_msg=name)


def metrics(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


def epoch_rows(output: Path) -> list[dict]:
    """The run record's lines but the every-N-steps ones: train and val per epoch, test."""
    return [line for line in metrics(output) if line["type"] != "step"]


def assert_artifacts(output: Path, names: list[str]) -> None:
    """artifacts.json lists exactly these files, each with its true size and SHA-256."""
    artifacts = json.loads((output / "artifacts.json").read_text())
    assert [a["path"] for a in artifacts] == names
    for artifact in artifacts:
        data = (output / artifact["path"]).read_bytes()
        assert artifact["bytes"] == len(data)
        assert artifact["sha256"] == hashlib.sha256(data).hexdigest()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def c2net_env(root: Path, method: str) -> dict[str, str]:
    """The variables a C2Net job starts with, its local directories made under root. The
    dataset is MnistDataset.zip: at obs://bucket/MnistDataset.zip for MOXING; for MOUNT the
    caller puts it in LOCAL_DATASET_PATH, as the platform's mount does."""
    local = {name: root / name for name in ("code", "dataset", "pretrain", "output")}
    for path in local.values():
        path.mkdir(parents=True)
    listing = [{"dataset_name": "MnistDataset.zip", "dataset_url": "obs://bucket/MnistDataset.zip"}]
    return {
        "DATA_DOWNLOAD_METHOD": method,
        "CODE_URL": "obs://bucket/code",
        "LOCAL_CODE_PATH": str(local["code"]),
        "DATASET_URL": json.dumps(listing) if method == "MOXING" else "",
        "LOCAL_DATASET_PATH": str(local["dataset"]),
        "DATASET_NEED_UNZIP": "true",
        "PRETRAIN_MODEL_URL": "[]",
        "LOCAL_PRETRAIN_MODEL_PATH": str(local["pretrain"]),
        "OUTPUT_URL": "obs://bucket/c2net-out" if method == "MOXING" else "",
        "LOCAL_OUTPUT_PATH": str(local["output"]),
        "LOCAL_TENSORBOARD_PATH": str(root / "tensorboard"),
    }


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """A finished process's stdout; the test fails with its output when it failed."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def two_workers(project: Path, output: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    """train.py under msrun with 2 workers, into output."""
    msrun = [str(Path(sys.executable).parent / "msrun"), "--worker_num=2", "--local_worker_num=2"]
    msrun += [f"--master_port={free_port()}", f"--log_dir={output}-logs", "--join=True"]
    args = ("--device_target", "cpu", "--train_url", str(output), *args)
    result = subprocess.run(
        [*msrun, "train.py", *args],
        cwd=project,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    logs = "".join(p.read_text()[-2000:] for p in Path(f"{output}-logs").glob("worker_*.log"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:] + logs
    return output


def torchrun_train(
    project: Path, output: Path, *args: str, env: dict[str, str] | None = None, ranks: int = 2
) -> Path:
    """train.py under torchrun with ``ranks`` processes on the CPU, into output."""
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)]
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output), *args)
    result = run(project, *launcher, *argv, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return output
