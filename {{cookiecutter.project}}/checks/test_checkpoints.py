"""Checkpoints kept: the newest N plus the best by the monitored metric; latest.json; the
newest intact found for --resume auto (each checked against its sidecar's checksum)."""

from __future__ import annotations

import errno
import json
import logging
import re
import shutil
from pathlib import Path

import pytest

from src.scaffold.errors import CheckpointError, DiskFullError
from src.scaffold.outputs.checkpoints import (
    POINTER,
    Retention,
    check_intact,
    find_latest,
    name,
    write,
)
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


def sealed(directory: Path, epoch: int, data: bytes = b"weights") -> Path:
    """A checkpoint written as the backends write one: through checkpoints.write."""
    path = directory / name(epoch, ".pt", "net")
    write(path, lambda tmp: tmp.write_bytes(data + b" %d" % epoch), len(data))
    return path


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[3] ^= 0x01
    path.write_bytes(bytes(data))


DAMAGE = {
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:-2]), "truncated: 7 of 9 bytes"),
    "empty": (lambda p: p.write_bytes(b""), "empty"),
    "bit-flipped": (flip, "checksum mismatch (net_epoch3.pt.sha256)"),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_newest_checkpoint_gives_way_to_the_newest_intact(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    retention = Retention(tmp_path, ".pt", model="net", keep=5)
    for epoch in (1, 2, 3):
        sealed(tmp_path, epoch)
        retention.saved(epoch, 0.5)
    assert json.loads((tmp_path / "net_epoch3.pt.sha256").read_text())["bytes"] == 9
    assert find_latest(tmp_path, ".pt") == tmp_path / "net_epoch3.pt"
    damage, why = DAMAGE[kind]
    damage(tmp_path / "net_epoch3.pt")
    with caplog.at_level(logging.WARNING):
        for _ in range(3):  # asked again (outputs/truth.py, then the run): said once
            assert find_latest(tmp_path, ".pt") == tmp_path / "net_epoch2.pt"
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped the damaged {tmp_path / 'net_epoch3.pt'} ({why}): "
        "resuming from net_epoch2.pt, the newest intact"
    ]
    with pytest.raises(CheckpointError, match=re.escape(f"({why}): give an intact checkpoint")):
        check_intact(tmp_path / "net_epoch3.pt", "--resume")  # --resume PATH: one line


def test_none_intact_is_one_line_and_no_sidecar_is_trusted(tmp_path: Path) -> None:
    for epoch in (1, 2):
        flip(sealed(tmp_path, epoch))
    with pytest.raises(CheckpointError) as err:
        find_latest(tmp_path, ".pt")
    assert str(err.value) == (
        f"no intact checkpoint to resume from: {tmp_path / 'net_epoch2.pt'} (checksum mismatch "
        f"(net_epoch2.pt.sha256)); {tmp_path / 'net_epoch1.pt'} (checksum mismatch "
        "(net_epoch1.pt.sha256))"
    )
    # An older version's checkpoint (no sidecar) is trusted, an empty one is not.
    (tmp_path / "net_epoch1.pt.sha256").unlink()
    assert find_latest(tmp_path, ".pt") == tmp_path / "net_epoch1.pt"
    (tmp_path / "net_epoch1.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"net_epoch1.pt \(empty\)"):
        find_latest(tmp_path, ".pt")


def test_a_dropped_checkpoint_takes_its_sidecar_and_leftovers_go_at_the_next_start(
    tmp_path: Path,
) -> None:
    retention = Retention(tmp_path, ".pt", model="net", keep=1)
    for epoch in (1, 2):
        sealed(tmp_path, epoch)
        retention.saved(epoch, 0.1 * epoch)
    leftovers = [".net_epoch3.tmp.pt", ".net_epoch3.tmp.tmp", ".net_epoch3_step9.tmp.ckpt"]
    leftovers += [".net_epoch3.pt.sha256.tmp", "net_epoch3.pt.sha256"]  # killed before renaming
    # Another process may be writing these now: the lock, a record file (rank 0's).
    kept = [".latest.json.tmp", ".running.json.42.tmp"]
    for left in [*leftovers, *kept]:
        (tmp_path / left).write_bytes(b"part")
    Retention.resume(tmp_path, ".pt", 1, "net", Monitor())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        *kept,
        POINTER,
        "net_epoch2.pt",
        "net_epoch2.pt.sha256",
    ]


def test_a_failed_or_killed_save_leaves_the_earlier_checkpoints_as_they_were(
    tmp_path: Path,
) -> None:
    retention = Retention(tmp_path, ".pt", model="net", keep=5)
    sealed(tmp_path, 1)
    retention.saved(1, 0.5)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full(tmp: Path) -> None:
        tmp.write_bytes(b"half")  # a real full disk: tests/training/test_damaged.py
        raise OSError(errno.ENOSPC, "No space left on device")

    def killed(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise KeyboardInterrupt

    with pytest.raises(DiskFullError) as err:
        write(tmp_path / "net_epoch2.pt", full, 12345)
    free = shutil.disk_usage(tmp_path).free
    assert str(err.value).startswith(
        f"no space left on the device for {tmp_path / 'net_epoch2.pt'}"
    )
    assert "about 12,345 bytes needed" in str(err.value) and "the earlier checkpoints" in str(
        err.value
    )
    assert abs(int(re.search(r"([\d,]+) free", str(err.value))[1].replace(",", "")) - free) < 2**30
    with pytest.raises(KeyboardInterrupt):
        write(tmp_path / "net_epoch2.pt", killed, 12345)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
