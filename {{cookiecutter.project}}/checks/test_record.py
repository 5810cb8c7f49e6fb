"""The run record: hparams, flat metrics lines and artifact hashes; a resumed run rewound to
its checkpoint; TensorBoard files read back by TensorBoard itself; silent on other ranks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from src.scaffold.outputs.record import RunRecord


def lines_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_writes_hparams_metrics_and_artifacts(tmp_path: Path) -> None:
    record = RunRecord(tmp_path / "out", "run-1")
    record.log_hparams({"lr": 0.1, "batch_size": 4})
    record.log("train", {"loss": 0.5}, step=10, epoch=1)
    record.log("test", {"accuracy": 0.9}, step=10, epoch=1)
    checkpoint = tmp_path / "out" / "model.pt"
    checkpoint.write_bytes(b"weights")
    record.add_artifact(checkpoint)

    out = tmp_path / "out"
    hparams = json.loads((out / "hparams.json").read_text())
    assert hparams == {"run_id": "run-1", "lr": 0.1, "batch_size": 4}
    lines = lines_of(out)
    # Flat: pandas.read_json(lines=True) needs no normalising step.
    assert [{k: v for k, v in line.items() if k != "time"} for line in lines] == [
        {"run": "run-1", "type": "train", "epoch": 1, "step": 10, "loss": 0.5},
        {"run": "run-1", "type": "test", "epoch": 1, "step": 10, "accuracy": 0.9},
    ]
    assert isinstance(lines[0]["time"], float)
    digest = hashlib.sha256(b"weights").hexdigest()
    assert json.loads((out / "artifacts.json").read_text()) == [
        {"path": "model.pt", "bytes": 7, "sha256": digest}
    ]


def test_a_resumed_run_drops_what_came_after_its_checkpoint_but_tests(tmp_path: Path) -> None:
    first = RunRecord(tmp_path, "run-1")
    for epoch in (1, 2, 3):
        first.log("step", {"loss": 1.0, "lr": 0.1}, step=epoch * 10 - 5, epoch=epoch)
        first.log("train", {"loss": 1.0}, step=epoch * 10, epoch=epoch)
    first.log("test", {"accuracy": 0.5}, step=30, epoch=3)
    for name in ("a.pt", "b.pt"):
        (tmp_path / name).write_bytes(name.encode())
        first.add_artifact(tmp_path / name)
    (tmp_path / "b.pt").unlink()  # the retention policy dropped it, the job died before saying so

    resumed = RunRecord(tmp_path, "run-1", resumed_after=20)  # the step epoch 2 ended at
    resumed.log("train", {"loss": 0.5}, step=30, epoch=3)
    kept = [(line["type"], line["epoch"]) for line in lines_of(tmp_path)]
    # Every attempt's test stays: the first attempt's score is part of the record.
    assert kept == [
        *(("step", 1), ("train", 1), ("step", 2), ("train", 2)),
        *(("test", 3), ("train", 3)),
    ]
    (tmp_path / "c.pt").write_bytes(b"c")
    resumed.add_artifact(tmp_path / "c.pt")
    paths = [a["path"] for a in json.loads((tmp_path / "artifacts.json").read_text())]
    assert paths == ["a.pt", "c.pt"]


def test_tensorboard_reads_the_scalars_and_the_hparams_text(tmp_path: Path) -> None:
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    record = RunRecord(tmp_path / "out", "run-1", tensorboard=tmp_path / "tb")
    record.log_hparams({"lr": 0.1})
    record.log("step", {"loss": 2.0, "lr": 0.5}, step=5, epoch=1)
    record.log("val", {"accuracy": 0.75}, step=10, epoch=1)
    board = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    board.Reload()
    assert [(e.step, e.value) for e in board.Scalars("train/loss")] == [(5, 2.0)]
    assert [(e.step, e.value) for e in board.Scalars("train/lr")] == [(5, 0.5)]
    assert [(e.step, e.value) for e in board.Scalars("val/accuracy")] == [(10, 0.75)]
    (text,) = board.Tensors("hparams")  # the text plugin's tensor
    assert b"| lr | 0.1 |" in text.tensor_proto.string_val[0]


def test_disabled_record_writes_nothing(tmp_path: Path) -> None:
    record = RunRecord(tmp_path / "out", "run-1", enabled=False, tensorboard=tmp_path / "tb")
    record.log_hparams({"lr": 0.1})
    record.log("train", {"loss": 1.0}, step=1, epoch=1)
    (tmp_path / "x.pt").write_bytes(b"x")
    record.add_artifact(tmp_path / "x.pt")
    assert not (tmp_path / "out").exists() and not (tmp_path / "tb").exists()


def test_a_full_disk_under_the_metrics_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """/dev/full answers every write with ENOSPC, as a full disk does."""
    from src.scaffold.errors import DiskFullError

    (tmp_path / "metrics.jsonl").symlink_to("/dev/full")
    record = RunRecord(tmp_path, "run-1")
    with pytest.raises(DiskFullError) as full:
        record.log("train", {"loss": 1.0}, 5, 1)
    said = str(full.value)
    assert said.startswith(f"no space left on the device for {tmp_path / 'metrics.jsonl'}: about")
    assert "bytes needed" in said and "checkpoints and latest.json are intact" in said
