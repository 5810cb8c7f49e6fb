"""Checkpoints kept: the newest N plus the best by the monitored metric; latest.json; the
newest found for --resume auto."""

from __future__ import annotations

import json
from pathlib import Path

from src.scaffold.outputs.checkpoints import POINTER, Retention, find_latest, name
from src.scaffold.task import Monitor


def save(retention: Retention, epoch: int, score: float) -> list[str]:
    (retention.directory / name(epoch, ".pt", "net")).write_bytes(b"weights %d" % epoch)
    return retention.saved(epoch, score)


def test_keeps_the_newest_and_the_best(tmp_path: Path) -> None:
    retention = Retention(tmp_path, ".pt", model="net", keep=2)
    dropped = [save(retention, epoch, acc) for epoch, acc in enumerate([0.5, 0.9, 0.7, 0.8], 1)]
    assert dropped == [[], [], ["net_epoch1.pt"], []]
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == [
        "net_epoch2.pt",  # the best (0.9), older than the newest two
        "net_epoch3.pt",
        "net_epoch4.pt",
    ]
    pointer = json.loads((tmp_path / POINTER).read_text())
    assert pointer["latest"] == "net_epoch4.pt" and pointer["best"] == "net_epoch2.pt"
    assert list(pointer["scores"]) == [
        "net_epoch2.pt",
        "net_epoch3.pt",
        "net_epoch4.pt",
    ]
    assert find_latest(tmp_path, ".pt") == tmp_path / "net_epoch4.pt"


def test_a_new_best_lets_the_old_one_go(tmp_path: Path) -> None:
    retention = Retention(tmp_path, ".pt", model="net", keep=1)
    save(retention, 1, 0.9)
    assert save(retention, 2, 0.5) == []  # epoch 1 stays: it is the best
    assert save(retention, 3, 0.95) == ["net_epoch1.pt", "net_epoch2.pt"]
    assert [p.name for p in tmp_path.glob("*.pt")] == ["net_epoch3.pt"]


def test_resumed_policy_remembers_the_scores(tmp_path: Path) -> None:
    first = Retention(tmp_path, ".ckpt", model="net", keep=1)
    (tmp_path / "net_epoch1.ckpt").write_bytes(b"1")
    first.saved(1, 0.99)
    again = Retention.resume(tmp_path, ".ckpt", 1, "net", Monitor())
    (tmp_path / "net_epoch2.ckpt").write_bytes(b"2")
    assert again.saved(2, 0.5) == []  # epoch 1 is still the best
    assert again.best() == "net_epoch1.ckpt"


def test_find_latest_without_a_pointer_takes_the_highest_epoch(tmp_path: Path) -> None:
    assert find_latest(tmp_path, ".pt") is None
    for epoch in (2, 10, 9):
        (tmp_path / name(epoch, ".pt", "net")).write_bytes(b"x")
    (tmp_path / "net_epochX.pt").write_bytes(b"x")
    assert find_latest(tmp_path, ".pt") == tmp_path / "net_epoch10.pt"
    (tmp_path / POINTER).write_text(json.dumps({"latest": "net_epoch9.pt"}))
    assert find_latest(tmp_path, ".pt") == tmp_path / "net_epoch9.pt"


def test_a_metric_to_minimise_keeps_the_lowest(tmp_path: Path) -> None:
    retention = Retention(tmp_path, ".pt", 1, "net", Monitor("loss", "min"))
    save(retention, 1, 0.5)
    assert save(retention, 2, 0.9) == []  # epoch 1 stays: its loss is the lowest
    assert save(retention, 3, 0.1) == ["net_epoch1.pt", "net_epoch2.pt"]
    pointer = json.loads((tmp_path / POINTER).read_text())
    assert pointer["monitor"] == {"metric": "loss", "mode": "min"}
    assert pointer["best"] == "net_epoch3.pt"


def test_scores_of_another_metric_are_not_compared(tmp_path: Path) -> None:
    first = Retention(tmp_path, ".pt", 1, "net", Monitor())
    save(first, 1, 0.99)
    again = Retention.resume(tmp_path, ".pt", 1, "net", Monitor("loss", "min"))
    assert again.scores == {}  # accuracies are no losses


def test_a_checkpoint_inside_an_epoch_is_kept_until_the_next_one(tmp_path: Path) -> None:
    retention = Retention(tmp_path, ".pt", model="net", keep=2)
    save(retention, 1, 0.5)
    for step in (15, 30):  # checkpoint_every inside epoch 2
        (tmp_path / name(2, ".pt", "net", step)).write_bytes(b"inside")
        dropped = retention.saved(2, None, step)
    assert dropped == ["net_epoch2_step15.pt"]
    pointer = json.loads((tmp_path / POINTER).read_text())
    # The epochs finished, and the file to continue from; no score: it was not validated.
    assert pointer["epoch"] == 1 and pointer["latest"] == "net_epoch2_step30.pt"
    assert list(pointer["scores"]) == ["net_epoch1.pt"]
    # The epoch's own checkpoint replaces the one inside it.
    assert save(retention, 2, 0.6) == ["net_epoch2_step30.pt"]
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["net_epoch1.pt", "net_epoch2.pt"]


def test_find_latest_orders_checkpoints_inside_an_epoch_before_its_own(tmp_path: Path) -> None:
    for file in ("net_epoch2.pt", "net_epoch3_step45.pt", "net_epoch3_step100.pt"):
        (tmp_path / file).write_bytes(b"x")
    assert find_latest(tmp_path, ".pt") == tmp_path / "net_epoch3_step100.pt"
    (tmp_path / "net_epoch3.pt").write_bytes(b"x")
    assert find_latest(tmp_path, ".pt") == tmp_path / "net_epoch3.pt"
