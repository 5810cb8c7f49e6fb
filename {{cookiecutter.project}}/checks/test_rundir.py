"""One output directory, one run: what counts as another run's outputs, the one line a new
run gets there, and what a start that failed before its first epoch left, cleared."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from src.scaffold.errors import ConfigError
from src.scaffold.outputs.rundir import check_fresh, new_run_id, outputs_in
from src.scaffold.run.preflight import main

EPOCH = '{"run": "r", "type": "train", "epoch": 1, "step": 5, "loss": 1.0}\n'


@pytest.mark.parametrize(
    ("name", "text"),
    [("metrics.jsonl", EPOCH), ("latest.json", "{}"), ("resnet_epoch3.ckpt", "w")],
)
def test_each_output_of_a_run_counts(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    assert outputs_in(tmp_path) == [name]
    with pytest.raises(ConfigError, match="continue it with --resume auto, or give another"):
        check_fresh(tmp_path, None)


def test_what_a_failed_start_left_is_cleared(tmp_path: Path) -> None:
    """A record and TensorBoard files, no checkpoint and no finished epoch: a start that
    failed (a bad option, a crash in the model). The next run takes the directory."""
    (tmp_path / "hparams.json").write_text('{"run_id": "x"}')
    (tmp_path / "metrics.jsonl").write_text('{"run": "x", "type": "step", "step": 1}\n')
    (tmp_path / "tensorboard").mkdir()
    (tmp_path / "tensorboard" / "events.out.tfevents.1.host").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("mine")
    said = check_fresh(tmp_path, None)
    assert said is not None and "stopped before its first epoch" in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_logs_notes_and_an_empty_tensorboard_do_not(tmp_path: Path) -> None:
    for name in ("logs/torchrun.log", "README.md", "my_epoch_notes.txt", "tensorboard/.keep"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / "tensorboard" / ".keep").unlink()
    assert outputs_in(tmp_path) == [] and outputs_in(tmp_path / "missing") == []
    check_fresh(tmp_path, None)
    (tmp_path / "tensorboard" / "events.out.tfevents.1.host").write_bytes(b"")
    assert outputs_in(tmp_path) == ["tensorboard/"]


def test_the_line_names_the_run_and_resume_continues_it(tmp_path: Path) -> None:
    (tmp_path / "hparams.json").write_text('{"run_id": "20261124-101010-abcd"}')
    (tmp_path / "latest.json").write_text('{"epoch": 6}')
    (tmp_path / "net_epoch6.pt").write_bytes(b"w")
    with pytest.raises(ConfigError) as refused:
        check_fresh(tmp_path, None, "--output")
    assert "holds run 20261124-101010-abcd after epoch 6" in str(refused.value)
    assert "give another --output" in str(refused.value)
    check_fresh(tmp_path, "auto")
    check_fresh(tmp_path, tmp_path / "net_epoch6.pt")  # its own checkpoint: the same run
    with pytest.raises(ConfigError):
        check_fresh(tmp_path, tmp_path.parent / "elsewhere" / "net_epoch2.pt")


def test_the_launchers_check_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "metrics.jsonl").write_text(EPOCH)
    assert main(["--train_url", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give another --output" in err
    assert main(["--train_url", str(tmp_path), "--resume", "auto"]) == 0
    assert main(["--train_url", str(tmp_path / "new")]) == 0


def test_run_ids_are_the_start_time_and_a_random_part() -> None:
    ids = {new_run_id() for _ in range(20)}
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", run_id) for run_id in ids)
    # Two runs started in the same second still differ: 20 alike has odds of 2**-304.
    assert len(ids) > 1


def test_the_same_command_rerun_continues_and_another_is_refused_naming_what_differs(
    tmp_path: Path, capsys
) -> None:
    """A restart (a platform's, a launcher's, a person's) reruns the command as it was: the run's
    record holds the same options, so it continues; any other option is another run."""
    from src.scaffold.backend import ProjectConfig
    from src.scaffold.config import parse_config

    argv = ["--train_url", str(tmp_path), "--epoch_size", "3"]
    cfg = parse_config(argv, ProjectConfig)
    record = {"run_id": "20261124-101010-abcd", **cfg.hparams()}
    (tmp_path / "hparams.json").write_text(json.dumps(record, default=str))
    (tmp_path / "latest.json").write_text('{"epoch": 1}')
    assert main(argv) == 0
    assert main([*argv, "--device_target", "cpu"]) == 0  # where it runs is the attempt's own
    assert main([*argv, "--lr", "0.5"]) == 2
    err = capsys.readouterr().err
    said = f"not this command's run (its lr {cfg.lr}, this one's 0.5)"
    assert err.count("\n") == 1 and said in err
    # A record that does not hold an option (another version's) is not known to be the same.
    del record["epoch_size"]
    (tmp_path / "hparams.json").write_text(json.dumps(record, default=str))
    assert main(argv) == 2
    assert "epoch_size not in its record" in capsys.readouterr().err


def test_one_live_run_per_directory_and_a_killed_ones_lock_is_taken_over(tmp_path: Path) -> None:
    """The lock names host and process: a live run on this host refuses a second one (in one
    line, before it writes); a killed run's (its processes gone) is stale and taken over; the
    launcher's own lock is taken over by the rank 0 it started."""
    from src.scaffold.outputs import live

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live.take(tmp_path, sleeper.pid, "--output")
        with pytest.raises(ConfigError) as refused:
            live.Marker(tmp_path)
        said = str(refused.value)
        assert f"{tmp_path} is in use" in said and f"pid {sleeper.pid}" in said
        assert "give another --train_url" in said and "\n" not in said
    finally:
        sleeper.kill()
        sleeper.wait()
    marker = live.Marker(tmp_path)  # its holder is gone: stale
    assert live.running(tmp_path) is not None
    marker.remove()
    live.take(tmp_path, os.getpid())  # this process as the launcher: its child takes it over
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pathlib import Path; from src.scaffold.outputs import live;"
            f"live.Marker(Path({str(tmp_path)!r})).name('r')",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert live.read_marker(tmp_path / live.MARKER)["launcher"] == os.getpid()
