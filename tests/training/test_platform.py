"""The platforms' contract, for both frameworks: OpenI C2Net jobs (with the real c2net package
and without it), OBS through moxing (a stand-in that copies local directories), a stop
(SIGTERM; Ctrl-C's SIGINT reported as such) that leaves the finished epochs saved for
--resume auto."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.training.runs import (
    FAKE_MOXING,
    SUFFIX,
    assert_one_line_exit_2,
    assert_same_weights,
    c2net_env,
    checkpoint,
    clean_env,
    metrics,
    run,
    train,
)

FRAMEWORK = {"pytorch": "pytorch", "model": "mindspore", "custom": "mindspore"}


@pytest.fixture(scope="module")
def projects(pytorch_project: Path, mindspore_projects: dict[str, Path]) -> dict[str, Path]:
    return {"pytorch": pytorch_project, **mindspore_projects}


@pytest.fixture
def bucket(tmp_path: Path, digits_dir: Path) -> dict[str, str]:
    """A stand-in OBS (obs://bucket/...) holding the digits, a zip of them, and a copy log."""
    root = tmp_path / "obs"
    shutil.copytree(digits_dir, root / "bucket" / "digits")
    shutil.make_archive(str(root / "bucket" / "MnistDataset"), "zip", digits_dir)
    (root / "bucket" / "code").mkdir()
    return {
        "PYTHONPATH": str(FAKE_MOXING),
        "FAKE_OBS_ROOT": str(root),
        "FAKE_MOXING_LOG": str(tmp_path / "copies.log"),
        "TRAIN_CACHE_DIR": str(tmp_path / "cache"),
        "TRAIN_UPLOAD_BACKOFF": "0.05",
        "TRAIN_DOWNLOAD_BACKOFF": "0.05",
    }


def copies(env: dict[str, str]) -> list[str]:
    log = Path(env["FAKE_MOXING_LOG"])
    return log.read_text().splitlines() if log.exists() else []


def c2net(tmp_path: Path, method: str, digits_dir: Path) -> dict[str, str]:
    """The variables a C2Net job starts with; MOUNT has the zipped dataset in place already."""
    env = c2net_env(tmp_path / "c2net", method)
    if method == "MOUNT":
        shutil.make_archive(
            str(Path(env["LOCAL_DATASET_PATH"]) / "MnistDataset"), "zip", digits_dir
        )
    return env


# (project, DATA_DOWNLOAD_METHOD, c2net importable) by test id.
C2NET_JOBS = {
    "pytorch-mount-c2net": ("pytorch", "MOUNT", True),
    "pytorch-moxing-no-c2net": ("pytorch", "MOXING", False),
    "mindspore-moxing-c2net": ("model", "MOXING", True),
    "mindspore-mount-no-c2net": ("model", "MOUNT", False),
}


def without_c2net(tmp_path: Path) -> str:
    """A PYTHONPATH entry under which `import c2net` fails, as on a platform image without it."""
    hide = tmp_path / "no_c2net"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['c2net'] = None\n")
    return str(hide)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "method", "package"), C2NET_JOBS.values(), ids=C2NET_JOBS)
def test_a_c2net_job_trains_with_no_path_flags(
    projects, bucket, digits_dir: Path, tmp_path: Path, name: str, method: str, package: bool
) -> None:
    env = {**bucket, **c2net(tmp_path, method, digits_dir)}
    if method == "MOUNT":
        # A GPU job as C2Net starts it: no moxing to import.
        del env["PYTHONPATH"]
        assert run(projects[name], "-c", "import moxing", env=clean_env(**env)).returncode != 0
    if not package:
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [env.get("PYTHONPATH"), without_c2net(tmp_path)])
        )
    if method == "MOUNT":
        # A pretrained model selected in the job: its folder holds one checkpoint.
        weights = train(projects[name], tmp_path / "earlier", "--smoke")
        model = Path(env["LOCAL_PRETRAIN_MODEL_PATH"]) / "lenet"
        shutil.copytree(weights, model)
        for extra in model.glob("lenet_epoch*"):
            if extra.name != f"lenet_epoch1{SUFFIX[FRAMEWORK[name]]}":
                extra.unlink()
    result = run(
        projects[name],
        "train.py",
        "--device_target",
        "cpu",
        "--epoch_size",
        "2",
        env=clean_env(**env),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = Path(env["LOCAL_OUTPUT_PATH"])
    suffix = SUFFIX[FRAMEWORK[name]]
    assert {f"lenet_epoch{e}{suffix}" for e in (1, 2)} <= {p.name for p in output.iterdir()}
    assert [line["epoch"] for line in metrics(output) if line["type"] == "val"] == [1, 2]
    unpacked = Path(env["LOCAL_DATASET_PATH"]) / "MnistDataset"
    assert (unpacked / "train" / "train-images-idx3-ubyte").is_file()
    if method == "MOUNT":
        assert "loaded pretrained weights from" in result.stdout and "/lenet/" in result.stdout
    # TensorBoard (the job's LOCAL_TENSORBOARD_PATH) reads the scalars, per epoch.
    board = EventAccumulator(env["LOCAL_TENSORBOARD_PATH"]).Reload()
    assert {"train/loss", "val/accuracy", "test/accuracy"} <= set(board.Tags()["scalars"])
    assert len(board.Scalars("val/accuracy")) == 2
    if method == "MOXING":
        # upload_output() (or its stand-in without the package) ran after each epoch.
        sent = [
            line for line in copies(bucket) if line.endswith("c2net-out") or "c2net-out/" in line
        ]
        assert len(sent) >= 2, copies(bucket)
        remote = Path(bucket["FAKE_OBS_ROOT"]) / "bucket" / "c2net-out"
        assert {f"lenet_epoch2{suffix}", "metrics.jsonl", "latest.json"} <= {
            p.name for p in remote.iterdir()
        }


def test_flags_win_over_the_c2net_variables(
    pytorch_project: Path, bucket, digits_dir: Path, tmp_path: Path
) -> None:
    env = {**bucket, **c2net(tmp_path, "MOUNT", digits_dir)}
    shutil.rmtree(env["LOCAL_DATASET_PATH"])  # nothing there: the flag must be what is read
    os.mkdir(env["LOCAL_DATASET_PATH"])
    args = [
        "--epoch_size",
        "1",
        "--data_url",
        str(digits_dir),
        "--train_url",
        str(tmp_path / "out"),
    ]
    result = run(pytorch_project, "train.py", "--device_target", "cpu", *args, env=clean_env(**env))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "out" / "lenet_epoch1.pt").is_file()
    assert not list(Path(env["LOCAL_OUTPUT_PATH"]).iterdir())


def _wait_for(path: Path, epoch: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Until latest.json under path names ``epoch`` (or the process died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if json.loads((path / "latest.json").read_text())["epoch"] >= epoch:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"no epoch {epoch} in {path}: {proc.poll()}")


def _started(
    project: Path, argv: list[str], env: dict[str, str], **how: object
) -> subprocess.Popen:
    """``python ARGV`` in the project, its stdout dropped, its stderr kept for the asserts."""
    return subprocess.Popen(
        [sys.executable, *argv],
        cwd=project,
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **how,
    )


def _signal_paused(proc: subprocess.Popen, signum: int, group: bool = False) -> None:
    """Send ``signum`` to a run the stand-in moxing stopped (FAKE_MOXING_PAUSE), then SIGCONT:
    the signal lands at a known point, however fast the run or loaded the machine."""
    kill = os.killpg if group else os.kill
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        # The state ("T": stopped) follows the command name, which is in parentheses.
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
            kill(proc.pid, signum)
            kill(proc.pid, signal.SIGCONT)
            return
        time.sleep(0.05)
    raise AssertionError(f"the run never paused: {proc.poll()}")


# The epoch a stopped run is continued to and compared at.
LAST = 5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytorch", "model", "custom"])
def test_a_stopped_run_resumes_to_the_weights_of_an_unbroken_one(
    projects, full_run, bucket, tmp_path: Path, name: str
) -> None:
    framework = FRAMEWORK[name]
    # PyTorch and MindSpore's model loop write to OBS and are stopped while epoch 3 goes up
    # (an epoch of PyTorch's takes 0.1 s: a timed signal could come after the last one).
    # The custom loop writes to a local directory and is stopped within epoch 3 (2.5 s each).
    remote = name != "custom"
    url = "obs://bucket/run" if remote else str(tmp_path / "run")
    where = Path(bucket["FAKE_OBS_ROOT"]) / "bucket" / "run" if remote else tmp_path / "run"
    argv = [sys.executable, "train.py", "--device_target", "cpu", "--train_url", url]
    argv += ["--keep_checkpoints", "10"]
    pause = {"FAKE_MOXING_PAUSE": checkpoint(Path(), 3, framework).name} if remote else {}
    proc = subprocess.Popen(
        argv,
        cwd=projects[name],
        env=clean_env(**bucket, **pause),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if remote:
        _signal_paused(proc, signal.SIGTERM)
    else:
        _wait_for(where, 2, proc)
        time.sleep(0.3)  # into epoch 3
        proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "stopped by SIGTERM: the finished epochs' outputs are saved" in stderr
    done = json.loads((where / "latest.json").read_text())["epoch"]
    assert done == 3 if remote else 2 <= done < LAST
    assert checkpoint(where, done, framework).is_file()
    assert [line["epoch"] for line in metrics(where) if line["type"] == "val"] == list(
        range(1, done + 1)
    )
    # A restarted job: a fresh node (another cache) continues where the outputs are, up to
    # epoch 5 (the flag wins over the record's 12): the schedule is constant, so its epoch 5
    # is the unbroken run's.
    env = clean_env(**{**bucket, "TRAIN_CACHE_DIR": str(tmp_path / "cache2")})
    again = run(projects[name], *argv[1:], "--resume", "auto", "--epoch_size", str(LAST), env=env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"after epoch {done}" in again.stdout
    unbroken = checkpoint(full_run(name), LAST, framework)
    assert_same_weights(checkpoint(where, LAST, framework), unbroken)
    val = [line["epoch"] for line in metrics(where) if line["type"] == "val"]
    assert val == list(range(1, LAST + 1))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytorch", "custom"])
def test_a_run_killed_after_a_checkpoint_inside_an_epoch_resumes_to_the_unbroken_weights(
    projects, bucket, tmp_path: Path, name: str
) -> None:
    framework, suffix = FRAMEWORK[name], SUFFIX[FRAMEWORK[name]]
    # 40 steps an epoch (1294 training samples, batch 32): a checkpoint every 15 steps falls
    # inside the epochs (steps 15, 30; 45, 60, 75), a validation every 10 at 10..30, 50..70.
    every = ("--epoch_size", "2", "--checkpoint_every", "15", "--validate_every", "10")
    url = "obs://bucket/run"
    argv = ["train.py", "--device_target", "cpu", "--train_url", url, "--no_tensorboard", *every]
    # The stand-in moxing stops the run as the step-60 checkpoint is about to go up: the
    # step-45 one and latest.json naming it are up (the pointer goes after the checkpoint).
    pause = {"FAKE_MOXING_PAUSE": f"lenet_epoch2_step60{suffix}"}
    proc = _started(projects[name], argv, clean_env(**bucket, **pause))
    _signal_paused(proc, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, stderr[-3000:]
    where = Path(bucket["FAKE_OBS_ROOT"]) / "bucket" / "run"
    assert (
        json.loads((where / "latest.json").read_text())["latest"] == f"lenet_epoch2_step45{suffix}"
    )
    # A rescheduled job: the same command on a fresh node (another cache) continues inside
    # epoch 2, with no --resume: the record on OBS holds the command's own options.
    env = clean_env(**{**bucket, "TRAIN_CACHE_DIR": str(tmp_path / "cache2")})
    again = run(projects[name], *argv, env=env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "obs://bucket/run holds run" in again.stdout and "continuing it" in again.stdout
    assert "after epoch 1 and 5 batches of epoch 2" in again.stdout
    unbroken = train(projects[name], tmp_path / "unbroken", "--no_tensorboard", *every)
    assert_same_weights(checkpoint(where, 2, framework), checkpoint(unbroken, 2, framework))
    # Each validation once, by step (the killed attempt's rows after step 45 dropped), and
    # only the epochs' checkpoints left: each epoch's own replaced those taken inside it.
    validations = [(row["epoch"], row["step"]) for row in metrics(where) if row["type"] == "val"]
    assert validations == [(1, 10), (1, 20), (1, 30), (1, 40), (2, 50), (2, 60), (2, 70), (2, 80)]
    # (each with its checksum: the fetched step checkpoint's went when it was dropped)
    kept = [f"lenet_epoch{e}{suffix}" for e in (1, 2)]
    assert sorted(p.name for p in where.glob("lenet_*")) == sorted(
        [*kept, *(f"{name}.sha256" for name in kept)]
    )


# 160 steps an epoch (1294 training samples, batch 8), 3 epochs, a checkpoint every 15 steps.
RESTARTED = ("--epoch_size", "3", "--batch_size", "8", "--checkpoint_every", "15")


@pytest.fixture(scope="module")
def unbroken_restarted(pytorch_project: Path, tmp_path_factory) -> Path:
    """The last checkpoint of RESTARTED's run, never stopped."""
    output = tmp_path_factory.mktemp("unbroken")
    return checkpoint(train(pytorch_project, output, "--no_tensorboard", *RESTARTED), 3, "pytorch")


def _killed_at(proc: subprocess.Popen, where: Path, step: int) -> None:
    """SIGKILL once latest.json (in ``where``) names a checkpoint at ``step`` or later."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            latest = json.loads((where / "latest.json").read_text())["latest"]
        except (OSError, ValueError, KeyError):
            latest = ""
        saved = re.search(r"epoch(\d+)(?:_step(\d+))?", latest)
        if saved and (int(saved[2]) if saved[2] else 160 * int(saved[1])) >= step:
            proc.kill()
            return
        time.sleep(0.01)
    raise AssertionError(f"no checkpoint at step {step} or later in {where}: {proc.poll()}")


# Where a platform's restart finds the outputs: train_url, the job's variables, the rerun's.
PLACES = {
    "plain": ("{tmp}/out", {}, {}),
    "modelarts-local": ("{tmp}/out", {"MA_JOB_DIR": "/home/ma-user/modelarts/user-job-dir"}, {}),
    "obs-in-place": ("obs://bucket/run", {}, {}),
    "obs-rescheduled": ("obs://bucket/run", {}, {"TRAIN_CACHE_DIR": "{tmp}/cache2"}),
    "c2net": ("", {}, {}),
}


@pytest.mark.slow
@pytest.mark.parametrize("place", PLACES)
def test_the_same_command_rerun_after_a_kill_continues_to_the_unbroken_weights(
    pytorch_project: Path, bucket, digits_dir: Path, unbroken_restarted: Path, tmp_path, place
) -> None:
    """What every platform does after a fault: the job's own command again, in place or on a
    fresh node. It continues the run from its newest checkpoint; no --resume is given."""
    url, extra, rerun = PLACES[place]
    env = {**bucket, **extra}
    argv = ["train.py", "--device_target", "cpu", "--no_tensorboard", *RESTARTED]
    if place == "c2net":  # the job's LOCAL_OUTPUT_PATH, uploaded to its OUTPUT_URL
        env.update(c2net(tmp_path, "MOXING", digits_dir))
    else:
        argv += ["--data_url", str(digits_dir), "--train_url", url.format(tmp=tmp_path)]
    # Where the run writes on this node (a fresh node: the rerun's cache).
    local = Path(env.get("LOCAL_OUTPUT_PATH") or tmp_path / "out")
    where = Path(env["TRAIN_CACHE_DIR"]) / "output" if url.startswith("obs") else local
    step = random.randint(15, 400)  # the kill point: a step after the first checkpoint
    proc = _started(pytorch_project, argv, clean_env(**env))
    _killed_at(proc, where, step)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (step, stderr[-3000:])
    env.update({k: v.format(tmp=tmp_path) for k, v in rerun.items()})
    again = run(pytorch_project, *argv, env=clean_env(**env))
    assert again.returncode == 0, (step, again.stdout[-3000:] + again.stderr[-3000:])
    assert "continuing it (a restart)" in again.stdout and "resumed from" in again.stdout, step
    where = Path(env["TRAIN_CACHE_DIR"]) / "output" if url.startswith("obs") else local
    assert_same_weights(checkpoint(where, 3, "pytorch"), unbroken_restarted)


# 161 steps an epoch (1294 training samples, batch 8), 2 epochs: no checkpoint_every.
STOPPED = ("--epoch_size", "2", "--batch_size", "8", "--log_every", "10", "--no_tensorboard")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytorch", "custom"])
def test_sigterm_mid_epoch_saves_the_step_and_the_rerun_ends_as_an_unbroken_run(
    projects, bucket, tmp_path: Path, name: str
) -> None:
    """A preemption: SIGTERM inside epoch 2 saves a checkpoint at the step it came (no
    checkpoint_every is set), uploads it (PyTorch's run writes to OBS) and exits 143; the
    same command continues from that step."""
    framework, suffix = FRAMEWORK[name], SUFFIX[FRAMEWORK[name]]
    remote = name == "pytorch"
    output = Path(bucket["TRAIN_CACHE_DIR"]) / "output" if remote else tmp_path / "out"
    url = "obs://bucket/run" if remote else str(output)
    argv = [sys.executable, "train.py", "--device_target", "cpu", "--train_url", url]
    if remote:
        argv += ["--data_url", "obs://bucket/digits"]
    proc = subprocess.Popen(
        [*argv, *STOPPED],
        cwd=projects[name],
        env=clean_env(**bucket),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    # Step 170 of 322 is 9 steps into epoch 2: the signal comes 150 steps before its end.
    for line in proc.stdout:
        if " step 170/322 " in line:
            proc.send_signal(signal.SIGTERM)
            break
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    latest = json.loads((output / "latest.json").read_text())["latest"]
    saved = re.fullmatch(rf"lenet_epoch2_step(\d+){re.escape(suffix)}", latest)
    assert saved and 170 <= int(saved[1]) < 322, latest
    assert f"stopped by SIGTERM: the checkpoint at step {saved[1]} is saved" in stdout
    if remote:  # on the platform's side too, named by its latest.json
        sent = Path(bucket["FAKE_OBS_ROOT"]) / "bucket" / "run"
        assert (sent / latest).read_bytes() == (output / latest).read_bytes()
        assert json.loads((sent / "latest.json").read_text())["latest"] == latest
    again = run(projects[name], *argv[1:], *STOPPED, env=clean_env(**bucket))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"resumed from {output / latest}" in again.stdout
    unbroken = train(projects[name], tmp_path / "unbroken", *STOPPED)
    assert_same_weights(checkpoint(output, 2, framework), checkpoint(unbroken, 2, framework))


def test_a_stop_during_the_last_upload_finishes_it(pytorch_project: Path, bucket) -> None:
    # metrics.jsonl goes up after each of the 12 epochs, then with the test line at the end.
    pause = {"FAKE_MOXING_PAUSE": "metrics.jsonl", "FAKE_MOXING_PAUSE_AT": "13"}
    argv = ["train.py", "--device_target", "cpu", "--train_url", "obs://bucket/run"]
    proc = _started(pytorch_project, argv, clean_env(**bucket, **pause))
    _signal_paused(proc, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "stopped by SIGTERM: the finished epochs' outputs are saved" in stderr
    where = Path(bucket["FAKE_OBS_ROOT"]) / "bucket" / "run"
    assert [line["type"] for line in metrics(where)][-1] == "test"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytorch", "model", "custom"])
def test_ctrl_c_stops_a_run_as_sigint(projects, bucket, tmp_path: Path, name: str) -> None:
    # MindSpore's graph runs make SIGINT send the process SIGTERM (src/scaffold/backend/sigint.py):
    # its loops are interrupted within epoch 2 (2.5 s each). PyTorch's epochs take 0.1 s, so
    # its run writes to OBS and is interrupted while epoch 1 goes up.
    remote = name == "pytorch"
    output = Path(bucket["FAKE_OBS_ROOT"]) / "bucket" / "run" if remote else tmp_path / "out"
    url = "obs://bucket/run" if remote else str(output)
    pause = {"FAKE_MOXING_PAUSE": checkpoint(Path(), 1, FRAMEWORK[name]).name}
    proc = _started(
        projects[name],
        ["train.py", "--device_target", "cpu", "--train_url", url],
        clean_env(**bucket, **pause) if remote else clean_env(),
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
    )
    if remote:
        _signal_paused(proc, signal.SIGINT, group=True)
    else:
        _wait_for(output, 1, proc)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, stderr[-3000:]
    assert "stopped by SIGINT: the finished epochs' outputs are saved" in stderr
    assert checkpoint(output, 1, FRAMEWORK[name]).is_file()


# --- OBS through moxing: one copier per node, uploads once per change, with retries -------
STAGE = """
import json, sys
from src.scaffold.storage import where as storage
from src.scaffold.config import parse_config
from src.scaffold.backend import ProjectConfig
from src.scaffold.errors import TrainError
try:
    where = storage.prepare(parse_config(sys.argv[1:], ProjectConfig).places())
except TrainError as err:
    sys.exit(f"error: {err}")
print(json.dumps({"data": str(where.data), "output": str(where.output),
                  "remote": where.remote and where.remote.where}))
"""


def start(project: Path, argv: list[str], envs: list[dict[str, str]]) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            [sys.executable, *argv],
            cwd=project,
            env=clean_env(**env),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for env in envs
    ]


def finish(procs: list[subprocess.Popen]) -> list[subprocess.CompletedProcess[str]]:
    return [subprocess.CompletedProcess(p.args, p.wait(180), *p.communicate()) for p in procs]


def test_one_copier_per_node_on_devices_4_to_7(pytorch_project: Path, bucket) -> None:
    cache = Path(bucket["TRAIN_CACHE_DIR"])
    argv = ["-c", STAGE, "--data_url", "obs://bucket/digits", "--train_url", "obs://bucket/out"]
    envs = [
        {**bucket, "FAKE_MOXING_DELAY": "1.5", "RANK_SIZE": "4", "DEVICE_ID": str(d)}
        for d in (5, 4, 6, 7)
    ]
    results = finish(start(pytorch_project, argv, envs))
    assert [r.returncode for r in results] == [0] * 4, [r.stderr for r in results]
    assert copies(bucket) == [f"obs://bucket/digits -> {cache / 'data'}"]
    for result in results:
        assert json.loads(result.stdout) == {
            "data": str(cache / "data"),
            "output": str(cache / "output"),
            "remote": "obs://bucket/out",
        }


def test_a_failed_copy_fails_every_process_fast(pytorch_project: Path, bucket) -> None:
    argv = ["train.py", "--smoke", "--data_url", "obs://bucket/digits", "--train_url", "/tmp/x"]
    env = {
        **bucket,
        "FAKE_MOXING_FAIL": "digits",
        "FAKE_MOXING_DELAY": "1",
        "TRAIN_STAGE_TIMEOUT": "300",
    }
    began = time.monotonic()
    results = finish(start(pytorch_project, argv, [env, env]))
    assert time.monotonic() - began < 90  # far from the 300 s a waiting process would give it
    copy = f"copying obs://bucket/digits to {Path(bucket['TRAIN_CACHE_DIR']) / 'data'} failed"
    for result in results:
        assert_one_line_exit_2(result, copy, "NoSuchKey")


@pytest.mark.parametrize(("retries", "code"), [("", 0), ("1", 2)], ids=["default", "1 retry"])
def test_a_failed_download_is_retried(
    pytorch_project: Path, bucket, tmp_path: Path, retries: str, code: int
) -> None:
    # The store fails the dataset's first two copies: the default's 3 attempts get it.
    env = {**bucket, "FAKE_MOXING_FAIL": "digits", "FAKE_MOXING_FAILS": "2"}
    args = ["--smoke", "--data_url", "obs://bucket/digits", "--train_url", str(tmp_path / "o")]
    result = run(
        pytorch_project, "train.py", *args, env=clean_env(**env, TRAIN_DOWNLOAD_RETRIES=retries)
    )
    assert result.returncode == code, result.stdout[-3000:] + result.stderr[-3000:]
    assert "download failed (attempt 1 of " in result.stdout
    tries = [line for line in copies(bucket) if line.startswith("obs://bucket/digits -> ")]
    assert len(tries) == (3 if code == 0 else 2)
    if code:
        assert_one_line_exit_2(result, "NoSuchKey", "(gave up after 2 attempts)")


@pytest.mark.parametrize("name", ["TRAIN_UPLOAD_RETRIES", "TRAIN_DOWNLOAD_BACKOFF"])
def test_a_bad_retry_setting_stops_the_run_before_any_copy(
    pytorch_project: Path, bucket, name: str
) -> None:
    args = ["--smoke", "--data_url", "obs://bucket/digits", "--train_url", "obs://bucket/out"]
    result = run(pytorch_project, "train.py", *args, env=clean_env(**{**bucket, name: "abc"}))
    assert_one_line_exit_2(result, f"{name} must be ", "not 'abc'")
    assert copies(bucket) == []


def test_a_waiting_process_gives_up_at_its_timeout(pytorch_project: Path, bucket) -> None:
    argv = ["-c", STAGE, "--data_url", "obs://bucket/digits"]
    (copier,) = start(pytorch_project, argv, [{**bucket, "FAKE_MOXING_DELAY": "8"}])
    time.sleep(2)  # the copier holds the lock
    (waiter,) = finish(start(pytorch_project, argv, [{**bucket, "TRAIN_STAGE_TIMEOUT": "1"}]))
    assert waiter.returncode == 1
    assert (
        "waited 1 s for another process of this node to copy obs://bucket/digits" in waiter.stderr
    )
    assert finish([copier])[0].returncode == 0


def test_each_output_is_uploaded_once_and_a_failed_upload_retries(
    pytorch_project: Path, bucket
) -> None:
    # The first upload of epoch 1's checkpoint fails three times: a warning, not a failure.
    env = {**bucket, "FAKE_MOXING_FAIL": "lenet_epoch1", "FAKE_MOXING_FAILS": "3"}
    args = ["--smoke", "--epoch_size", "2", "--data_url", "obs://bucket/digits"]
    result = run(
        pytorch_project, "train.py", *args, "--train_url", "obs://bucket/out", env=clean_env(**env)
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "upload failed, trying again after the next epoch" in result.stdout
    sent = [line.split(" -> ")[1] for line in copies(bucket) if " -> obs://bucket/out/" in line]
    assert sent.count("obs://bucket/out/lenet_epoch1.pt") == 4  # 3 failures, then once
    assert sent.count("obs://bucket/out/lenet_epoch2.pt") == 1
    assert (Path(bucket["FAKE_OBS_ROOT"]) / "bucket" / "out" / "lenet_epoch2.pt").is_file()


def test_a_final_upload_that_fails_fails_the_job(pytorch_project: Path, bucket) -> None:
    env = {**bucket, "FAKE_MOXING_FAIL": "obs://bucket/out/"}
    args = ["--smoke", "--data_url", "obs://bucket/digits", "--train_url", "obs://bucket/out"]
    result = run(pytorch_project, "train.py", *args, env=clean_env(**env))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("error: copying ")
    assert "gave up after 3 attempts" in result.stderr


def test_without_moxing_an_obs_url_is_one_line_and_exit_2(
    pytorch_project: Path, tmp_path: Path
) -> None:
    args = ["--data_url", "obs://bucket/digits", "--train_url", str(tmp_path)]
    result = run(pytorch_project, "train.py", *args)
    assert_one_line_exit_2(result, "data_url obs://bucket/digits needs moxing")


@pytest.mark.slow
def test_msrun_scheduler_never_copies(mindspore_projects: dict[str, Path], bucket) -> None:
    msrun = [str(Path(sys.executable).parent / "msrun"), "--worker_num=2", "--local_worker_num=2"]
    msrun += [f"--log_dir={bucket['TRAIN_CACHE_DIR']}-logs", "--join=True", "--master_port=8155"]
    argv = ["train.py", "--smoke", "--device_target", "cpu", "--data_url", "obs://bucket/digits"]
    result = subprocess.run(
        [*msrun, *argv, "--train_url", "obs://bucket/out"],
        cwd=mindspore_projects["model"],
        env=clean_env(**bucket),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = Path(bucket["TRAIN_CACHE_DIR"]) / "data"
    assert [line for line in copies(bucket) if line.endswith(str(data))] == [
        f"obs://bucket/digits -> {data}"
    ]
