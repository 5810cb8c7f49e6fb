"""Checkpoints kept: the newest N plus the best; latest.json; the newest found for --resume auto."""

from __future__ import annotations

import json
from pathlib import Path

from src.scaffold.checkpoints import POINTER, Retention, find_latest, name


def save(retention: Retention, epoch: int, accuracy: float) -> list[str]:
    (retention.directory / name(epoch, ".pt")).write_bytes(b"weights %d" % epoch)
    return retention.saved(epoch, accuracy)


def test_keeps_the_newest_and_the_best(tmp_path: Path) -> None:
    retention = Retention(tmp_path, ".pt", keep=2)
    dropped = [save(retention, epoch, acc) for epoch, acc in enumerate([0.5, 0.9, 0.7, 0.8], 1)]
    assert dropped == [[], [], ["lenet_epoch1.pt"], []]
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == [
        "lenet_epoch2.pt",  # the best (0.9), older than the newest two
        "lenet_epoch3.pt",
        "lenet_epoch4.pt",
    ]
    pointer = json.loads((tmp_path / POINTER).read_text())
    assert pointer["latest"] == "lenet_epoch4.pt" and pointer["best"] == "lenet_epoch2.pt"
    assert list(pointer["val_accuracy"]) == [
        "lenet_epoch2.pt",
        "lenet_epoch3.pt",
        "lenet_epoch4.pt",
    ]
    assert find_latest(tmp_path, ".pt") == tmp_path / "lenet_epoch4.pt"


def test_a_new_best_lets_the_old_one_go(tmp_path: Path) -> None:
    retention = Retention(tmp_path, ".pt", keep=1)
    save(retention, 1, 0.9)
    assert save(retention, 2, 0.5) == []  # epoch 1 stays: it is the best
    assert save(retention, 3, 0.95) == ["lenet_epoch1.pt", "lenet_epoch2.pt"]
    assert [p.name for p in tmp_path.glob("*.pt")] == ["lenet_epoch3.pt"]


def test_resumed_policy_remembers_the_scores(tmp_path: Path) -> None:
    first = Retention(tmp_path, ".ckpt", keep=1)
    (tmp_path / "lenet_epoch1.ckpt").write_bytes(b"1")
    first.saved(1, 0.99)
    again = Retention.resume(tmp_path, ".ckpt", keep=1)
    (tmp_path / "lenet_epoch2.ckpt").write_bytes(b"2")
    assert again.saved(2, 0.5) == []  # epoch 1 is still the best
    assert again.best() == "lenet_epoch1.ckpt"


def test_find_latest_without_a_pointer_takes_the_highest_epoch(tmp_path: Path) -> None:
    assert find_latest(tmp_path, ".pt") is None
    for epoch in (2, 10, 9):
        (tmp_path / name(epoch, ".pt")).write_bytes(b"x")
    (tmp_path / "lenet_epochX.pt").write_bytes(b"x")
    assert find_latest(tmp_path, ".pt") == tmp_path / "lenet_epoch10.pt"
    (tmp_path / POINTER).write_text(json.dumps({"latest": "lenet_epoch9.pt"}))
    assert find_latest(tmp_path, ".pt") == tmp_path / "lenet_epoch9.pt"
