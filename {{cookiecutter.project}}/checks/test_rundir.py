"""One output directory, one run: what counts as another run's outputs, and the one line a
new run gets there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from src.scaffold.errors import ConfigError
from src.scaffold.outputs.rundir import check_fresh, main, new_run_id, outputs_in


@pytest.mark.parametrize(
    "name",
    ["hparams.json", "metrics.jsonl", "artifacts.json", "latest.json", "resnet_epoch3.ckpt"],
)
def test_each_output_of_a_run_counts(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("{}")
    assert outputs_in(tmp_path) == [name]
    with pytest.raises(ConfigError, match="continue it with --resume auto, or give another"):
        check_fresh(tmp_path, None)


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
    (tmp_path / "metrics.jsonl").write_text("")
    assert main(["--train_url", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["--train_url", str(tmp_path), "--resume", "auto"]) == 0
    assert main(["--train_url", str(tmp_path / "new")]) == 0


def test_run_ids_are_the_start_time_and_a_random_part() -> None:
    ids = {new_run_id() for _ in range(20)}
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", run_id) for run_id in ids)
    # Two runs started in the same second still differ: 20 alike has odds of 2**-304.
    assert len(ids) > 1
