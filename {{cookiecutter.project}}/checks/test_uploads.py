"""Uploads to the platform: changed files once, dropped ones removed, retries, the final word."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from src.scaffold.errors import ConfigError, StorageError
from src.scaffold.storage.retry import Retry
from src.scaffold.storage.uploads import Uploader


class Bucket:
    """A Remote that is a local directory, failing the first ``failures`` calls of put."""

    def __init__(self, root: Path, failures: int = 0) -> None:
        self.root, self.failures = root, failures
        self.where = str(root)
        self.puts: list[list[str]] = []

    def put(self, local: Path, names: list[str]) -> None:
        if self.failures:
            self.failures -= 1
            raise StorageError("copying to the bucket failed: 503 Service Unavailable")
        self.puts.append(names)
        for name in names:
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(local / name, self.root / name)

    def delete(self, names: list[str]) -> None:
        for name in names:
            (self.root / name).unlink()

    def holds(self, name: str) -> bool:
        return (self.root / name).is_file()

    def get(self, names: list[str], local: Path) -> list[str]:
        found = [n for n in names if (self.root / n).is_file()]
        for name in found:
            shutil.copy(self.root / name, local / name)
        return found


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("TRAIN_UPLOAD_BACKOFF", "0.01")
    (tmp_path / "out").mkdir()
    (tmp_path / "bucket").mkdir()
    return tmp_path / "out", tmp_path / "bucket"


def test_each_file_goes_up_once_per_change(dirs: tuple[Path, Path]) -> None:
    out, bucket = dirs
    remote = Bucket(bucket)
    uploader = Uploader(out, remote)
    (out / "cnn_epoch1.pt").write_bytes(b"1")
    (out / "metrics.jsonl").write_text("a\n")
    (out / ".cnn_epoch2.pt.tmp").write_bytes(b"half")
    assert uploader.sync()
    (out / "cnn_epoch2.pt").write_bytes(b"2")
    with (out / "metrics.jsonl").open("a") as stream:
        stream.write("b\n")
    (out / "cnn_epoch1.pt").unlink()
    assert uploader.sync(final=True)
    assert remote.puts == [
        ["cnn_epoch1.pt", "metrics.jsonl"],
        ["cnn_epoch2.pt", "metrics.jsonl"],
    ]
    assert sorted(p.name for p in bucket.iterdir()) == ["cnn_epoch2.pt", "metrics.jsonl"]
    assert uploader.sync(final=True) and len(remote.puts) == 2  # nothing changed: nothing sent


def test_a_failed_epoch_upload_warns_and_retries_later(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    out, bucket = dirs
    remote = Bucket(bucket, failures=3)  # every attempt of the first sync fails
    uploader = Uploader(out, remote)
    (out / "cnn_epoch1.pt").write_bytes(b"1")
    with caplog.at_level(logging.WARNING):
        assert uploader.sync() is False
    assert "trying again after the next epoch" in caplog.text
    assert "attempt 1 of 3" in caplog.text
    assert uploader.sync(final=True)
    assert (bucket / "cnn_epoch1.pt").read_bytes() == b"1"


def test_a_transient_failure_is_retried_at_once(dirs: tuple[Path, Path]) -> None:
    out, bucket = dirs
    (out / "record.json").write_text("{}")
    assert Uploader(out, Bucket(bucket, failures=2)).sync(final=True)
    assert (bucket / "record.json").is_file()


def test_the_final_upload_must_succeed(dirs: tuple[Path, Path]) -> None:
    out, bucket = dirs
    (out / "cnn_epoch1.pt").write_bytes(b"1")
    with pytest.raises(StorageError, match=r"503 .*gave up after 3 attempts"):
        Uploader(out, Bucket(bucket, failures=99)).sync(final=True)


def test_fetched_files_are_not_sent_back(dirs: tuple[Path, Path]) -> None:
    out, bucket = dirs
    (bucket / "latest.json").write_text("{}")
    remote = Bucket(bucket)
    uploader = Uploader(out, remote)
    uploader.mark_present(remote.get(["latest.json", "missing.pt"], out))
    assert uploader.sync(final=True) and remote.puts == []


def test_a_restart_in_place_sends_what_the_killed_attempt_saved_but_never_sent(
    dirs: tuple[Path, Path],
) -> None:
    """Killed between a save and its upload, then rerun on the same node: the local checkpoint
    goes up (and a later drop of it deletes a file the remote holds)."""
    out, bucket = dirs
    (bucket / "latest.json").write_text("{}")
    (out / "latest.json").write_text("{}")
    (out / "cnn_epoch1_step30.pt").write_bytes(b"1")
    remote = Bucket(bucket)
    uploader = Uploader(out, remote)
    uploader.mark_present([p.name for p in out.iterdir()])
    assert uploader.sync() and remote.puts == [["cnn_epoch1_step30.pt"]]
    (out / "cnn_epoch1_step30.pt").unlink()
    assert uploader.sync() and not (bucket / "cnn_epoch1_step30.pt").exists()


def test_no_remote_means_nothing_to_do(tmp_path: Path) -> None:
    assert Uploader(tmp_path, None).sync(final=True)


def test_no_retries_means_one_attempt_and_the_final_failure_still_fails(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAIN_UPLOAD_RETRIES", "0")
    remote = Bucket(dirs[1], failures=1)
    (dirs[0] / "record.json").write_text("{}")
    with pytest.raises(StorageError, match=r"gave up after 1 attempt\)"):
        Uploader(dirs[0], remote).sync(final=True)
    assert remote.failures == 0 and not (dirs[1] / "record.json").exists()


@pytest.mark.parametrize("retries", ["1", "4"])
def test_retries_count_after_the_first_attempt(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, retries: str
) -> None:
    monkeypatch.setenv("TRAIN_UPLOAD_RETRIES", retries)
    policy = Retry.read("UPLOAD")
    assert policy.attempts == int(retries) + 1
    assert policy.waits() == [0.01 * 2**n for n in range(int(retries))]
    (dirs[0] / "record.json").write_text("{}")
    # As many failures as retries: the last attempt gets through.
    assert Uploader(dirs[0], Bucket(dirs[1], failures=int(retries)), policy).sync(final=True)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("TRAIN_UPLOAD_RETRIES", "abc", "a whole number of retries (0: try once), 0 or more"),
        ("TRAIN_UPLOAD_RETRIES", "-1", "a whole number of retries"),
        ("TRAIN_UPLOAD_RETRIES", "1.5", "a whole number of retries"),
        ("TRAIN_DOWNLOAD_RETRIES", "many", "a whole number of retries"),
        ("TRAIN_UPLOAD_BACKOFF", "soon", "must be seconds, 0 or more"),
        ("TRAIN_DOWNLOAD_BACKOFF", "nan", "must be seconds, 0 or more"),
    ],
)
def test_a_bad_retry_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        Retry.read(name.split("_")[1])
    said = str(caught.value)
    assert said.startswith(f"{name} must be ") and said.endswith(f", not {value!r}")
    assert says in said and "\n" not in said


def test_the_pointer_goes_up_after_the_checkpoint_it_names(dirs: tuple[Path, Path]) -> None:
    out, bucket = dirs
    remote = Bucket(bucket)
    for name in ("latest.json", "artifacts.json", "cnn_epoch1.pt", "metrics.jsonl"):
        (out / name).write_text(name)
    Uploader(out, remote).sync()
    # A job killed between two copies never leaves latest.json naming a file not up yet.
    assert remote.puts == [["cnn_epoch1.pt", "metrics.jsonl", "artifacts.json", "latest.json"]]
