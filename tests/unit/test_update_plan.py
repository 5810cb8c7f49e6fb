"""gen update's decision for one path from its three versions, and the kept render's archive."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator import pristine
from generator.pristine import Entry, entry
from generator.update.plan import Action, decide

A, B, C = (entry(text, 0o644) for text in (b"a\n", b"b\n", b"c\n"))
A_EXEC = entry(b"a\n", 0o755)
BIN_B, BIN_C = entry(b"\0b", 0o644), entry(b"\0c", 0o644)


@pytest.mark.parametrize(
    ("base", "theirs", "ours", "action"),
    [
        (A, A, B, None),  # unchanged in the template: yours stays
        (A, B, A, Action.TAKE),  # unchanged by you: the template's
        (A, B, B, None),  # the same change on both sides
        (A, B, C, Action.MERGE),
        (BIN_B, BIN_C, entry(b"\0d", 0o644), Action.SIDECAR),
        (A, None, A, Action.DELETE),
        (A, None, B, Action.KEEP),  # deleted by the template, changed by you
        (A, B, None, Action.KEEP),  # deleted by you: stays deleted
        (A, A, None, Action.KEEP),
        (None, A, None, Action.ADD),
        (None, A, A, None),
        (None, A, B, Action.MERGE),  # added on both sides
        (None, BIN_B, B, Action.SIDECAR),
        (A, A_EXEC, A, Action.CHMOD),
        (A, A_EXEC, B, Action.CHMOD),  # your content, the template's mode
        (None, None, A, None),  # your own file
    ],
)
def test_each_path_gets_one_decision(
    base: Entry | None, theirs: Entry | None, ours: Entry | None, action: Action | None
) -> None:
    step = decide("f", base, theirs, ours)
    assert (step and step.action) == action


def test_the_kept_render_is_the_same_bytes_for_the_same_files(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.sh").write_text("echo hi\n")
    (tmp_path / "scripts" / "run.sh").chmod(0o755)
    (tmp_path / "data.bin").write_bytes(b"\0" * 10)
    (tmp_path / pristine.RECORD).write_text("{}")
    files = pristine.snapshot(tmp_path)
    assert set(files) == {"scripts/run.sh", "data.bin"}
    blob = pristine.dumps(files)
    assert pristine.dumps(pristine.loads(blob)) == blob
    back = pristine.loads(blob)
    assert back["scripts/run.sh"] == entry(b"echo hi\n", 0o755)
    assert back["data.bin"].binary and back["data.bin"].data is None
    assert back["data.bin"].same(files["data.bin"])
