"""gen update's decision for one path from its three versions, the kept render's archive,
and which of two templates is newer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from generator.render import pristine
from generator.render.pristine import Damaged, Entry, entry
from generator.update.order import Direction, History, Identity, direction, missing_keys
from generator.update.plan import Action, decide
from generator.version import COMMIT_FILE, HISTORY_FILE, template_history
from tests.conftest import skip_outside_ci

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
        (A, A, None, None),  # deleted by you, unchanged there: nothing to say, ever
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


def test_a_damaged_archive_says_what_is_wrong() -> None:
    blob = pristine.dumps({"a.txt": entry(b"a\n" * 5000, 0o644)})
    for damaged, said in (
        (b"garbage", "is not a gzip'd tar archive"),
        (blob[: len(blob) // 2], "is cut short"),
        (pristine.dumps({"a.txt": Entry(0o644, "0" * 64, False, b"a\n")}), "do not match"),
    ):
        with pytest.raises(Damaged, match=said):
            pristine.loads(damaged)


# o -- a -- b -- d     (d merges c)
#       \-- c --/
HISTORY = History("d b c\nb a\nc a\na o\no\n")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [("o", "d", True), ("c", "d", True), ("d", "d", True), ("b", "c", False), ("d", "a", False)],
)
def test_ancestry_follows_every_parent(old: str, new: str, expected: bool) -> None:
    assert HISTORY.is_ancestor(old, new) is expected
    assert not HISTORY.is_ancestor(old, "unknown")


@pytest.mark.parametrize(
    ("project", "target", "history", "way"),
    [
        (Identity("0.1.0", "a"), Identity("0.1.0", "a"), None, Direction.SAME),
        (Identity("0.1.0", "a"), Identity("0.1.0", "d"), HISTORY, Direction.FORWARD),
        (Identity("0.1.0", "d"), Identity("0.1.0", "b"), HISTORY, Direction.BACK),
        # Siblings, or a commit the history does not hold, at one version: not taken as older.
        (Identity("0.1.0", "b"), Identity("0.1.0", "c"), HISTORY, Direction.UNKNOWN),
        (Identity("0.1.0", "x"), Identity("0.1.0", "d"), HISTORY, Direction.UNKNOWN),
        (Identity("0.1.0", "x"), Identity("0.1.0", None), None, Direction.UNKNOWN),
        # Where the history cannot tell, the versions do.
        (Identity("0.1.0", "x"), Identity("0.2.0", "d"), HISTORY, Direction.FORWARD),
        (Identity("0.10.0", "x"), Identity("0.9.1", "d"), HISTORY, Direction.BACK),
        (Identity("0.1.0", None), Identity("0.1.0", "d"), HISTORY, Direction.FORWARD),
    ],
)
def test_which_template_is_newer(
    project: Identity, target: Identity, history: History | None, way: Direction
) -> None:
    assert direction(project, target, history) is way


def test_a_dirty_commit_is_its_commit() -> None:
    record = {"generator": "train-template 0.1.0", "template_commit": "abc-dirty"}
    assert Identity.of_record(record) == Identity("0.1.0", "abc")
    assert str(Identity.of_record({"generator": "train-template 0.2.0"})) == "0.2.0"


def test_only_an_answer_the_template_had_is_required() -> None:
    from generator.update import order

    history = History(f"new {order.KEYS_ADDED['arch']}\n{order.KEYS_ADDED['arch']} old\nold\n")
    keys = ("target", "arch")
    assert missing_keys({"template_commit": "new"}, keys, history) == ["target", "arch"]
    assert missing_keys({"template_commit": "old", "target": "x"}, keys, history) == []
    assert missing_keys({"template_commit": "new", "target": "x"}, keys, None) == []
    assert missing_keys({"template_commit": "new"}, keys, history, {"arch": "auto"}) == ["target"]


def test_a_wheel_reads_the_history_from_its_package(tmp_path: Path) -> None:
    template = tmp_path / "generator" / "_template"
    template.mkdir(parents=True)
    assert template_history(template) is None  # no git, nothing carried: a copy
    (template / COMMIT_FILE).write_text("b\n")
    assert template_history(template) is None  # a wheel from before wheels carried it
    (tmp_path / "generator" / HISTORY_FILE).write_text("b a\na\n")
    assert template_history(template) == "b a\na\n"


def test_each_added_answer_is_dated_by_the_commit_that_added_it() -> None:
    from generator.update.order import KEYS_ADDED

    repo = Path(__file__).resolve().parents[2]
    for key, commit in KEYS_ADDED.items():
        shown = [
            subprocess.run(
                ["git", "show", f"{at}:cookiecutter.json"], cwd=repo, capture_output=True, text=True
            )
            for at in (f"{commit}^", commit)
        ]
        if any(result.returncode for result in shown):
            skip_outside_ci("no git history here to date the answers by")
        before, after = (json.loads(result.stdout) for result in shown)
        assert key not in before and key in after
