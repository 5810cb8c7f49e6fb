"""Runs you can watch and never lose, for both frameworks: one output directory holds one
run (a second run there is refused before it writes anything, --resume auto continues the
first), TensorBoard files by default, a progress line every N steps (a bar on a terminal),
and the same learning-rate curve from PyTorch and MindSpore."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.training import runs

FRAMEWORK = {"pytorch": "pytorch", "model": "mindspore", "custom": "mindspore"}
# The shipped digits: 1294 training samples after the validation split, 40 steps of 32.
STEPS_PER_EPOCH = 40
# A cosine schedule with half an epoch of warmup, every step reported.
SCHEDULE = ("--lr_schedule", "cosine", "--warmup_epochs", "0.5", "--min_lr", "0.001")


@pytest.fixture(scope="module")
def projects(pytorch_project: Path, mindspore_projects: dict[str, Path]) -> dict[str, Path]:
    return {"pytorch": pytorch_project, **mindspore_projects}


@pytest.fixture(scope="module")
def scheduled(projects: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """``scheduled(name)``: (output, stdout) of a 2-epoch run of the cosine schedule with
    every step logged, for "pytorch" or "model" (MindSpore's Model.train); run once each."""
    done: dict[str, tuple[Path, str]] = {}

    def get(name: str) -> tuple[Path, str]:
        if name not in done:
            output = tmp_path_factory.mktemp(f"scheduled-{name}") / "out"
            argv = ("train.py", "--device_target", "cpu", "--train_url", str(output))
            every = ("--epoch_size", "2", "--log_every", "1", *SCHEDULE)
            result = runs.run(projects[name], *argv, *every)
            assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
            done[name] = output, result.stdout
        return done[name]

    return get


def expected_lr(step: int, total: int = 2 * STEPS_PER_EPOCH) -> float:
    """SCHEDULE by hand: 20 warmup steps up to 0.01, then half a cosine down to 0.001."""
    warmup, base, low = STEPS_PER_EPOCH // 2, 0.01, 0.001
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / (total - 1 - warmup)
    return low + (base - low) * 0.5 * (1 + math.cos(math.pi * progress))


def step_rows(output: Path) -> list[dict]:
    return [line for line in runs.metrics(output) if line["type"] == "step"]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytorch", "custom"])
def test_a_second_run_is_refused_and_resume_auto_continues_the_first(
    projects: dict[str, Path], tmp_path: Path, name: str
) -> None:
    project, output = projects[name], tmp_path / "out"
    runs.train(project, output, "--epoch_size", "2", "--keep_checkpoints", "1")
    before = snapshot(output)
    suffix = runs.SUFFIX[FRAMEWORK[name]]
    assert {"latest.json", "artifacts.json", f"lenet_epoch2{suffix}"} <= set(before)
    run_id = json.loads(before["hparams.json"])["run_id"]

    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output))
    again = runs.run(project, *argv, "--epoch_size", "1")
    runs.assert_one_line_exit_2(again, str(output), run_id, "--resume auto", "--train_url")
    assert snapshot(output) == before, "the refused run wrote into the first run's directory"

    # The run's own options continue with it (keep_checkpoints 1); a flag changes one.
    more = ("--epoch_size", "3", "--keep_checkpoints", "3")
    resumed = runs.train(project, output, *more, "--resume", "auto")
    pointer = json.loads((output / "latest.json").read_text())
    assert pointer["latest"] == f"lenet_epoch3{suffix}" and pointer["epoch"] == 3
    # The first run's checkpoints are its own still; the record goes on as one run.
    kept = [n for n in before if n.startswith("lenet_epoch") and (resumed / n).exists()]
    assert kept and all((resumed / n).read_bytes() == before[n] for n in kept)
    lines = runs.epoch_rows(resumed)
    # The first run's test after epoch 2 stays in the record; the second scores epoch 3.
    assert [(line["type"], line["epoch"]) for line in lines] == [
        *((kind, epoch) for epoch in (1, 2) for kind in ("train", "val")),
        *(("test", 2), ("train", 3), ("val", 3), ("test", 3)),
    ]
    assert {line["run"] for line in runs.metrics(resumed)} == {run_id}
    assert json.loads((resumed / "hparams.json").read_text())["run_id"] == run_id
    listed = [a["path"] for a in json.loads((resumed / "artifacts.json").read_text())]
    assert listed == [p.name for p in sorted(resumed.glob(f"lenet_epoch*{suffix}"))]


@pytest.mark.parametrize(
    ("name", "launcher"),
    [
        ("pytorch", ["--nproc", "2"]),
        ("model", ["--launcher", "msrun", "--nproc", "2"]),
        # The shipped example table: 8 devices on a placeholder host, which runs here.
        ("model", ["--launcher", "ranktable", "--rank-table", "{table}", "--nproc", "8"]),
    ],
    ids=["torchrun", "msrun", "ranktable"],
)
def test_a_launcher_refuses_before_any_rank_starts_or_log_is_written(
    projects: dict[str, Path], tmp_path: Path, name: str, launcher: list[str]
) -> None:
    output = tmp_path / "out"
    (output / "logs").mkdir(parents=True)
    (output / "logs" / "torchrun.log").write_text("the first run's launcher log\n")
    (output / "hparams.json").write_text('{"run_id": "20261124-101010-abcd"}\n')
    (output / "lenet_epoch4.pt").write_bytes(b"weights")
    before = snapshot(output)
    script = projects[name] / "scripts" / "run_8p.sh"
    table = str(projects[name] / "rank_table_8p.json")
    launcher = [table if arg == "{table}" else arg for arg in launcher]
    result = subprocess.run(
        ["bash", str(script), *launcher, "--output", str(output), "--", "--smoke"],
        env=runs.clean_env(PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "run 20261124-101010-abcd" in errors[0], result.stderr
    assert "--resume auto" in errors[0] and "--output" in errors[0]
    assert snapshot(output) == before


@pytest.mark.slow
def test_a_second_launch_into_a_live_runs_directory_is_refused_before_it_writes(
    pytorch_project: Path, tmp_path: Path
) -> None:
    """Two launches 1 s apart with different master ports: the first's launcher holds the
    directory (rank 0 takes it over); the second says so in one line and writes nothing."""
    output, script = tmp_path / "out", str(pytorch_project / "scripts" / "run_8p.sh")
    env = runs.clean_env(PYTHON=sys.executable)

    def launch(port: int) -> list[str]:
        return ["bash", script, "--nproc", "2", "--master-port", str(port), "--output", str(output)]

    first = subprocess.Popen(
        [*launch(runs.free_port()), "--", "--epoch_size", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        marker = output / ".running.json"
        deadline = time.monotonic() + 120
        while not marker.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), first.poll()
        os.killpg(first.pid, signal.SIGSTOP)  # the first run's files hold still meanwhile
        before = snapshot(output)
        second = subprocess.run(
            [*launch(runs.free_port()), "--", "--epoch_size", "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert snapshot(output) == before, "the refused launch wrote into the live run's directory"
        os.killpg(first.pid, signal.SIGCONT)
        # env.sh's notes about this host come first; the launcher's one line is the last.
        errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
        assert second.returncode == 2 and errors == second.stderr.splitlines()[-1:], second.stderr
        assert f"{output} is in use" in errors[0] and "give another --output" in errors[0]
        _, stderr = first.communicate(timeout=300)
        assert first.returncode == 0, stderr[-3000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGCONT)
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
    # The first run is whole and alone: one run id, its lock released.
    assert {row["run"] for row in runs.metrics(output)} == {
        json.loads((output / "hparams.json").read_text())["run_id"]
    }
    assert not marker.exists()


def test_a_new_run_into_a_platform_directory_that_holds_a_run_is_refused(
    pytorch_project: Path, tmp_path: Path, digits_dir: Path
) -> None:
    bucket = tmp_path / "obs" / "bucket"
    (bucket / "out").mkdir(parents=True)
    (bucket / "out" / "hparams.json").write_text('{"run_id": "x"}\n')
    env = runs.clean_env(
        PYTHONPATH=str(runs.FAKE_MOXING),
        FAKE_OBS_ROOT=str(tmp_path / "obs"),
        TRAIN_CACHE_DIR=str(tmp_path / "cache"),
    )
    argv = ("train.py", "--device_target", "cpu", "--data_url", str(digits_dir))
    result = runs.run(pytorch_project, *argv, "--train_url", "obs://bucket/out", env=env)
    runs.assert_one_line_exit_2(result, "obs://bucket/out holds another run", "--resume auto")
    assert sorted(p.name for p in (bucket / "out").iterdir()) == ["hparams.json"]


@pytest.mark.slow
def test_both_frameworks_follow_the_same_learning_rate_curve(scheduled) -> None:
    curves = {}
    for name in ("pytorch", "model"):
        rows = step_rows(scheduled(name)[0])
        assert [row["step"] for row in rows] == list(range(1, 2 * STEPS_PER_EPOCH + 1))
        curves[name] = np.array([row["lr"] for row in rows])
    want = np.array([expected_lr(step) for step in range(2 * STEPS_PER_EPOCH)])
    # PyTorch's optimizer holds the Python float; MindSpore's keeps the table in float32, so
    # its values are that float rounded to float32: equal once PyTorch's is rounded too.
    np.testing.assert_array_equal(curves["pytorch"].astype(np.float32), curves["model"])
    np.testing.assert_allclose(curves["pytorch"], want, rtol=1e-12, atol=0)
    assert curves["pytorch"][19] == 0.01 and curves["pytorch"][-1] == pytest.approx(0.001)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytorch", "model"])
def test_tensorboard_reads_the_run(scheduled, name: str) -> None:
    output, _ = scheduled(name)
    board = EventAccumulator(str(output / "tensorboard"))
    board.Reload()
    per_step = {tag: board.Scalars(tag) for tag in ("train/loss", "train/lr")}
    for events in per_step.values():
        assert [e.step for e in events] == list(range(1, 2 * STEPS_PER_EPOCH + 1))
    rows = step_rows(output)
    # Event files hold float32: the same numbers as metrics.jsonl, rounded.
    for tag, key in (("train/loss", "loss"), ("train/lr", "lr")):
        got = [e.value for e in per_step[tag]]
        np.testing.assert_array_equal(got, np.float32([row[key] for row in rows]))
    for tag in ("val/loss", "val/accuracy"):
        steps = [e.step for e in board.Scalars(tag)]
        assert steps == [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH], tag
    assert len(board.Scalars("test/accuracy")) == 1
    (text,) = board.Tensors("hparams")
    hparams = json.loads((output / "hparams.json").read_text())
    assert f'| run_id | "{hparams["run_id"]}" |'.encode() in text.tensor_proto.string_val[0]


def test_tensorboard_moves_or_stays_off(pytorch_project: Path, tmp_path: Path) -> None:
    short = ("--epoch_size", "1", "--max_steps", "3")
    moved = tmp_path / "a"
    runs.train(pytorch_project, moved, *short, "--tensorboard_dir", str(tmp_path / "tb"))
    assert not (moved / "tensorboard").exists()
    board = EventAccumulator(str(tmp_path / "tb"))
    board.Reload()
    assert "val/accuracy" in board.Tags()["scalars"]
    off = runs.train(pytorch_project, tmp_path / "b", *short, "--no_tensorboard")
    assert not (off / "tensorboard").exists() and (off / "metrics.jsonl").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytorch", "model"])
def test_progress_is_a_line_every_n_steps_off_a_terminal(scheduled, name: str) -> None:
    _, stdout = scheduled(name)
    line = re.compile(
        r"epoch (\d)/2  step (\d+)/80  loss \d+\.\d{4}  lr [\d.e-]+  \d+ samples/s"
        r"  ETA \d:\d\d:\d\d$"
    )
    found = [m for m in map(line.search, stdout.splitlines()) if m]
    assert [int(m.group(2)) for m in found] == list(range(1, 81)), stdout[-2000:]
    assert [int(m.group(1)) for m in found] == [1] * 40 + [2] * 40


def test_a_terminal_gets_a_progress_bar(pytorch_project: Path, tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    # A terminal 120 columns wide: tqdm sizes the bar to it.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    argv = [sys.executable, "train.py", "--device_target", "cpu", "--train_url", str(tmp_path)]
    process = subprocess.Popen(
        [*argv, "--epoch_size", "2", "--log_every", "10"],
        cwd=pytorch_project,
        env=runs.clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    screen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the pty closes when the process is gone
            break
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    assert process.wait(timeout=120) == 0, screen[-3000:]
    text = screen.decode(errors="replace")
    # tqdm redraws one line ("\r") with the count and the rate; no per-step log lines.
    assert "80/80" in text and "step/s" in text and "\r" in text, text[-2000:]
    assert not re.search(r"step \d+/80  loss", text), text[-2000:]
    assert "epoch 2/2  train loss" in text  # the epoch lines still come, above the bar
