"""The generated MindSpore projects train for real on CPU, with either training loop: accuracy,
msrun's 2 ranks == 1 process, resume, run record, user errors; and the OBS storage adapter, with
a stand-in moxing that copies local directories."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest

LOOPS = ("model", "custom")
# Variables a launcher or a platform sets; a test that wants them sets them itself.
LAUNCH_VARS = (
    *("RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK_ID", "RANK_SIZE", "DEVICE_ID", "RANK_TABLE_FILE"),
    *("MS_WORKER_NUM", "MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_NODE_ID"),
    *("DATASET_URL", "OUTPUT_URL", "LOCAL_DATASET_PATH", "LOCAL_OUTPUT_PATH", "TRAIN_CACHE_DIR"),
)
FAKE_MOXING = Path(__file__).resolve().parent / "fake_moxing"
TRAIN_SAMPLES = 1438  # the digits' training split
STEPS = TRAIN_SAMPLES // 64
EPOCHS = 10
# Checkpoint entries that are bookkeeping, not training state.
BOOKKEEPING = {"epoch_num", "seed", "sinks_per_epoch"}


def clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in LAUNCH_VARS}
    # msrun starts its workers as plain "python": this interpreter's must come first.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env | extra


def run(
    project: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 600
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
    """Run train.py on the CPU into output; fail the test with its output if it fails."""
    result = run(project, "train.py", "--device_target", "cpu", "--train_url", str(output), *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return output


def checkpoint(output: Path, epoch: int) -> Path:
    (path,) = output.glob(f"lenet-{epoch}_*.ckpt")
    return path


def weights(path: Path) -> dict[str, np.ndarray]:
    params = ms.load_checkpoint(str(path))
    return {name: p.asnumpy() for name, p in params.items() if name not in BOOKKEEPING}


def metrics(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


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


@pytest.fixture(scope="module", params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def project(loop: str, mindspore_projects: dict[str, Path]) -> Path:
    return mindspore_projects[loop]


@pytest.fixture(scope="module")
def full_run(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One process, the shipped config: 10 epochs of batch 64 on the project's ./data."""
    return train(project, tmp_path_factory.mktemp("full"))


@pytest.fixture(scope="module")
def msrun_run(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """msrun, 2 workers of batch 32 for 2 epochs: full_run's global batch and data."""
    output = tmp_path_factory.mktemp("msrun")
    msrun = [str(Path(sys.executable).parent / "msrun"), "--worker_num=2", "--local_worker_num=2"]
    msrun += [f"--master_port={free_port()}", f"--log_dir={output}-logs", "--join=True"]
    args = ["--device_target", "cpu", "--train_url", str(output), "--batch_size", "32"]
    result = subprocess.run(
        [*msrun, "train.py", *args, "--epoch_size", "2"],
        cwd=project,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    logs = "".join(p.read_text()[-2000:] for p in Path(f"{output}-logs").glob("worker_*.log"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:] + logs
    return output


@pytest.mark.slow
def test_reaches_95_percent_on_the_shipped_digits(full_run: Path) -> None:
    tests = [line for line in metrics(full_run) if line["type"] == "test"]
    assert [line["epoch"] for line in tests] == list(range(1, EPOCHS + 1))
    assert tests[-1]["metrics"]["accuracy"] >= 0.95, tests[-1]


@pytest.mark.slow
def test_msrun_two_ranks_end_with_the_weights_of_one(full_run: Path, msrun_run: Path) -> None:
    one, two = weights(checkpoint(full_run, 2)), weights(checkpoint(msrun_run, 2))
    assert one.keys() == two.keys() and "moments.fc3.weight" in one
    for name in one:
        np.testing.assert_allclose(two[name], one[name], rtol=0, atol=1e-5, err_msg=name)
    # Rank 1 wrote nothing into the shared directory: no extra files, no doubled lines.
    names = {p.name for p in msrun_run.iterdir()}
    assert {"hparams.json", "metrics.jsonl", "artifacts.json"} <= names
    assert {n for n in names if n.endswith(".ckpt")} == {f"lenet-{e}_{STEPS}.ckpt" for e in (1, 2)}
    assert [(line["type"], line["epoch"]) for line in metrics(msrun_run)] == [
        ("train", 1),
        ("test", 1),
        ("train", 2),
        ("test", 2),
    ]
    hparams = json.loads((msrun_run / "hparams.json").read_text())
    assert (hparams["world_size"], hparams["global_batch_size"]) == (2, 64)


@pytest.mark.slow
def test_resume_ends_with_the_weights_of_an_unbroken_run(
    project: Path, full_run: Path, tmp_path: Path
) -> None:
    resumed = train(project, tmp_path, "--resume", str(checkpoint(full_run, EPOCHS - 1)))
    assert [p.name for p in resumed.glob("*.ckpt")] == [f"lenet-{EPOCHS}_{STEPS}.ckpt"]
    assert [line["epoch"] for line in metrics(resumed)] == [EPOCHS, EPOCHS]
    expected = weights(checkpoint(full_run, EPOCHS))
    got = weights(checkpoint(resumed, EPOCHS))
    assert got.keys() == expected.keys()
    for name, value in got.items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


@pytest.mark.slow
def test_run_record_is_complete_and_hashes_match(loop: str, full_run: Path) -> None:
    hparams = json.loads((full_run / "hparams.json").read_text())
    expected = {"batch_size": 64, "epoch_size": EPOCHS, "world_size": 1, "train_loop": loop}
    assert {key: hparams[key] for key in expected} == expected
    assert {"lr", "momentum", "seed", "context_mode", "loss_scale", "device"} <= hparams.keys()

    lines = metrics(full_run)
    assert [(line["type"], line["step"], line["epoch"]) for line in lines] == [
        (kind, epoch * STEPS, epoch) for epoch in range(1, EPOCHS + 1) for kind in ("train", "test")
    ]
    for line in lines:
        keys = {"loss", "samples_per_s"} if line["type"] == "train" else {"loss", "accuracy"}
        assert set(line["metrics"]) == keys

    artifacts = json.loads((full_run / "artifacts.json").read_text())
    assert [a["path"] for a in artifacts] == [
        f"lenet-{epoch}_{STEPS}.ckpt" for epoch in range(1, EPOCHS + 1)
    ]
    for artifact in artifacts:
        data = (full_run / artifact["path"]).read_bytes()
        assert artifact["bytes"] == len(data)
        assert artifact["sha256"] == hashlib.sha256(data).hexdigest()


def test_missing_dataset_is_one_line_and_exit_2(project: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    args = ("--data_url", str(missing), "--train_url", str(tmp_path / "out"))
    result = run(project, "train.py", "--device_target", "cpu", *args)
    assert_one_line_exit_2(
        result, str(missing), "train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
    )


@pytest.mark.slow
def test_generated_project_tests_pass(render_project) -> None:
    # Another combination than mindspore_projects': ModelArts paths, both targets.
    project = render_project(
        framework="mindspore", target="both", platform="modelarts", ms_train_loop="custom"
    )
    result = run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


# --- Storage: OBS through (a stand-in) moxing --------------------------------------------

# Stages obs://bucket/digits and the output URL as train.py does and prints the result;
# with "sync" it then writes a file into the output directory and copies it back.
STAGE = """
import json, sys
from src import storage
from src.errors import TrainError
try:
    staged = storage.stage(sys.argv[1], sys.argv[2], storage.Placement.from_env(8))
    if "sync" in sys.argv:
        staged.train_url.mkdir(parents=True, exist_ok=True)
        (staged.train_url / "result.txt").write_text("done")
        staged.sync_output()
except TrainError as err:
    sys.exit(f"error: {err}")
print(json.dumps({key: str(value) for key, value in vars(staged).items()}))
"""


@pytest.fixture
def obs(tmp_path: Path, digits_dir: Path) -> dict[str, str]:
    """The environment of a job with moxing: the digits in a bucket, a cache, a copy log."""
    root = tmp_path / "obs"
    shutil.copytree(digits_dir, root / "bucket" / "digits")
    return {
        "PYTHONPATH": str(FAKE_MOXING),
        "FAKE_OBS_ROOT": str(root),
        "FAKE_MOXING_LOG": str(tmp_path / "copies.log"),
        "TRAIN_CACHE_DIR": str(tmp_path / "cache"),
    }


def copies(obs: dict[str, str]) -> list[str]:
    log = Path(obs["FAKE_MOXING_LOG"])
    return log.read_text().splitlines() if log.exists() else []


def start_ranks(
    project: Path, argv: list[str], ranks: tuple[int, ...], **env: str
) -> list[subprocess.Popen[str]]:
    """One process per local rank of a 2-rank job on this node, started in the order given."""
    procs = []
    for rank in ranks:
        rank_env = clean_env(RANK_SIZE="2", LOCAL_RANK=str(rank), **env)
        procs.append(
            subprocess.Popen(
                [sys.executable, *argv],
                cwd=project,
                env=rank_env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    return procs


def test_first_rank_per_node_copies_and_the_other_waits(
    mindspore_projects: dict[str, Path], obs: dict[str, str]
) -> None:
    cache = Path(obs["TRAIN_CACHE_DIR"])
    argv = ["-c", STAGE, "obs://bucket/digits", "obs://bucket/out"]
    # Rank 1 first, and a slow copy: it has to wait for rank 0's marker.
    procs = start_ranks(mindspore_projects["custom"], argv, (1, 0), **obs, FAKE_MOXING_DELAY="1.5")
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert copies(obs) == [f"obs://bucket/digits -> {cache / 'data'}"]
    for stdout, _ in outputs:
        staged = json.loads(stdout)
        assert staged == {
            "data_url": str(cache / "data"),
            "train_url": str(cache / "output"),
            "output_url": "obs://bucket/out",
        }
    assert (cache / "data" / "train" / "train-images-idx3-ubyte").is_file()
    assert (cache / ".data.done").is_file() and not (cache / ".data.failed").exists()


def test_failed_copy_fails_every_rank_fast(
    mindspore_projects: dict[str, Path], obs: dict[str, str]
) -> None:
    cache = Path(obs["TRAIN_CACHE_DIR"])
    argv = ["train.py", "--smoke", "--data_url", "obs://bucket/digits", "--train_url", "/tmp/x"]
    env = obs | {
        "FAKE_MOXING_FAIL": "digits",
        "FAKE_MOXING_DELAY": "1",
        "TRAIN_STAGE_TIMEOUT": "300",
    }
    start = time.monotonic()
    procs = start_ranks(mindspore_projects["custom"], argv, (1, 0), **env)
    results = [
        subprocess.CompletedProcess(proc.args, proc.wait(timeout=120), *proc.communicate())
        for proc in procs
    ]
    assert time.monotonic() - start < 60  # far from the 300 s a waiting rank would give it
    rank1, rank0 = results
    copy = f"copying obs://bucket/digits to {cache / 'data'} failed: NoSuchKey"
    assert_one_line_exit_2(rank0, copy)
    assert_one_line_exit_2(rank1, "the node's first rank could not copy: " + copy)
    assert not (cache / ".data.done").exists()


def test_waiting_rank_times_out_with_a_clear_error(
    mindspore_projects: dict[str, Path], obs: dict[str, str]
) -> None:
    argv = ["train.py", "--smoke", "--data_url", "obs://bucket/digits", "--train_url", "/tmp/x"]
    # Local rank 1 alone: nobody copies.
    (proc,) = start_ranks(mindspore_projects["custom"], argv, (1,), **obs, TRAIN_STAGE_TIMEOUT="1")
    result = subprocess.CompletedProcess(proc.args, proc.wait(timeout=120), *proc.communicate())
    assert_one_line_exit_2(
        result, "waited 1 s for the node's first rank to copy obs://bucket/digits"
    )
    assert copies(obs) == []


def test_outputs_are_copied_back_to_obs(
    mindspore_projects: dict[str, Path], obs: dict[str, str]
) -> None:
    args = ["--smoke", "--data_url", "obs://bucket/digits", "--train_url", "obs://bucket/out"]
    result = run(
        mindspore_projects["custom"],
        "train.py",
        "--device_target",
        "cpu",
        *args,
        env=clean_env(**obs),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = Path(obs["FAKE_OBS_ROOT"]) / "bucket" / "out"
    names = {p.name for p in out.iterdir()}
    assert {"hparams.json", "metrics.jsonl", "artifacts.json", "lenet-1_2.ckpt"} <= names
    output = Path(obs["TRAIN_CACHE_DIR"]) / "output"
    # The data once; the outputs after the epoch and at the end.
    assert copies(obs) == [
        f"obs://bucket/digits -> {Path(obs['TRAIN_CACHE_DIR']) / 'data'}",
        f"{output} -> obs://bucket/out",
        f"{output} -> obs://bucket/out",
    ]


def test_c2net_variables_name_the_storage(
    mindspore_projects: dict[str, Path], obs: dict[str, str], tmp_path: Path
) -> None:
    c2net = {
        "DATASET_URL": json.dumps(
            [{"dataset_name": "mnist", "dataset_url": "obs://bucket/digits"}]
        ),
        "OUTPUT_URL": "obs://bucket/c2net-out",
        "LOCAL_DATASET_PATH": str(tmp_path / "dataset"),
        "LOCAL_OUTPUT_PATH": str(tmp_path / "output"),
    }
    # Local flags: the variables take precedence when moxing is there.
    argv = ["-c", STAGE, "./data", "./output", "sync"]
    result = run(mindspore_projects["custom"], *argv, env=clean_env(**obs, **c2net))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "data_url": str(tmp_path / "dataset" / "mnist"),
        "train_url": str(tmp_path / "output"),
        "output_url": "obs://bucket/c2net-out",
    }
    assert (tmp_path / "dataset" / "mnist" / "test" / "t10k-labels-idx1-ubyte").is_file()
    out = Path(obs["FAKE_OBS_ROOT"]) / "bucket" / "c2net-out" / "result.txt"
    assert out.read_text() == "done"


def test_without_moxing_an_obs_url_is_one_line_and_exit_2(
    mindspore_projects: dict[str, Path], tmp_path: Path
) -> None:
    args = ["--data_url", "obs://bucket/digits", "--train_url", str(tmp_path)]
    result = run(mindspore_projects["custom"], "train.py", *args)
    assert_one_line_exit_2(result, "data_url obs://bucket/digits is an object-storage URL")
