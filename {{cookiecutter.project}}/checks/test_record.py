"""The run record: hparams, metrics lines and artifact hashes; silent on non-zero ranks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from src.scaffold.record import RunRecord


def test_writes_hparams_metrics_and_artifacts(tmp_path: Path) -> None:
    record = RunRecord(tmp_path / "out")
    record.log_hparams({"lr": 0.1, "batch_size": 4})
    record.log("train", {"loss": 0.5}, step=10, epoch=1)
    record.log("test", {"accuracy": 0.9}, step=10, epoch=1)
    checkpoint = tmp_path / "out" / "model.pt"
    checkpoint.write_bytes(b"weights")
    record.add_artifact(checkpoint)

    out = tmp_path / "out"
    assert json.loads((out / "hparams.json").read_text()) == {"lr": 0.1, "batch_size": 4}
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(line["type"], line["step"], line["epoch"]) for line in lines] == [
        ("train", 10, 1),
        ("test", 10, 1),
    ]
    assert lines[0]["metrics"] == {"loss": 0.5} and isinstance(lines[0]["time"], float)
    digest = hashlib.sha256(b"weights").hexdigest()
    assert json.loads((out / "artifacts.json").read_text()) == [
        {"path": "model.pt", "bytes": 7, "sha256": digest}
    ]


def test_resume_appends_and_a_new_run_starts_over(tmp_path: Path) -> None:
    first = RunRecord(tmp_path)
    first.log("train", {"loss": 1.0}, step=1, epoch=1)
    (tmp_path / "a.pt").write_bytes(b"a")
    first.add_artifact(tmp_path / "a.pt")

    resumed = RunRecord(tmp_path, append=True)
    resumed.log("train", {"loss": 0.5}, step=2, epoch=2)
    (tmp_path / "b.pt").write_bytes(b"b")
    resumed.add_artifact(tmp_path / "b.pt")
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2
    paths = [a["path"] for a in json.loads((tmp_path / "artifacts.json").read_text())]
    assert paths == ["a.pt", "b.pt"]

    RunRecord(tmp_path)
    assert not (tmp_path / "metrics.jsonl").exists()
    assert not (tmp_path / "artifacts.json").exists()


def test_disabled_record_writes_nothing(tmp_path: Path) -> None:
    record = RunRecord(tmp_path / "out", enabled=False)
    record.log_hparams({"lr": 0.1})
    record.log("train", {"loss": 1.0}, step=1, epoch=1)
    (tmp_path / "x.pt").write_bytes(b"x")
    record.add_artifact(tmp_path / "x.pt")
    assert not (tmp_path / "out").exists()
