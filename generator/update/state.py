"""What an update with conflicts keeps for --continue and --abort, in .train-template/pending/:
state.json (the new record, the paths it changed and those in conflict, each archive's
digest), yours.tar.gz (each changed path that had a file, as it was) and pristine.tar.gz
(the new template's render, kept as the base once --continue records it).

Written whole or not at all: a temporary directory, renamed into place once complete.
Read back only once every part the command needs is checked, so that a damaged state
stops with one line saying what is damaged and how to recover, and nothing is touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from generator.errors import OptionError, UpdateError
from generator.git import Git
from generator.render import pristine
from generator.render.pristine import STATE_DIR, Entry

PENDING = f"{STATE_DIR}/pending"
STATE = "state.json"
YOURS = "yours.tar.gz"
THEIRS = "pristine.tar.gz"
FORMAT = 1
WHAT = {
    STATE: "the update's state",
    YOURS: "your files as they were before the update",
    THEIRS: "the new template's render, which --continue records",
}


class StateDamaged(UpdateError):
    """Raised when the pending update's state is missing a part, or a part is damaged."""


@dataclass(frozen=True)
class Pending:
    """A pending update, every part checked: the record --continue writes, the paths the
    update changed and those in conflict, and the archive the command needs."""

    record: bytes
    touched: list[str]
    conflicts: list[str]
    files: dict[str, Entry]


def exists(project_dir: Path) -> bool:
    return (project_dir / PENDING).exists()


def save(
    project_dir: Path,
    record: bytes,
    touched: list[str],
    conflicts: list[str],
    yours: dict[str, Entry],
    theirs: dict[str, Entry],
) -> None:
    """Keep what --continue records and what --abort puts back, all or nothing."""
    parent = project_dir / STATE_DIR
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".pending-", dir=parent))
    try:
        blobs = {YOURS: pristine.dumps(yours), THEIRS: pristine.dumps(theirs)}
        for name, blob in blobs.items():
            (tmp / name).write_bytes(blob)
        state = {
            "format": FORMAT,
            "record": record.decode("utf-8"),
            "touched": touched,
            "conflicts": conflicts,
            "saved": sorted(yours),
            "sha256": {name: hashlib.sha256(blob).hexdigest() for name, blob in blobs.items()},
        }
        (tmp / STATE).write_text(json.dumps(state, indent=1), encoding="utf-8")
        os.rename(tmp, project_dir / PENDING)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def drop(project_dir: Path) -> None:
    """Forget the pending update: renamed away first, so that it is there whole or not."""
    gone = Path(tempfile.mkdtemp(prefix=".done-", dir=project_dir / STATE_DIR))
    os.rename(project_dir / PENDING, gone / "pending")
    shutil.rmtree(gone)


def load(project_dir: Path, need: str) -> Pending:
    """The pending update with ``need`` (YOURS for --abort, THEIRS for --continue), every
    part checked first; StateDamaged names the first damaged one."""
    if not exists(project_dir):
        raise UpdateError(f"no update is waiting in {project_dir}; run gen update")
    state = _state(project_dir)
    files = _archive(project_dir, need, state["sha256"][need])
    if need == YOURS and sorted(files) != state["saved"]:
        raise _damaged(project_dir, YOURS, f"does not hold the files {STATE} lists")
    return Pending(state["record"].encode("utf-8"), state["touched"], state["conflicts"], files)


def check(project_dir: Path) -> None:
    """Refuse to start an update while one is pending: its line, or what is damaged."""
    _state(project_dir)
    raise OptionError(
        "update",
        "an update is waiting for its conflicts: resolve them, then gen update --continue "
        "(or gen update --abort)",
    )


def _state(project_dir: Path) -> dict:
    path = project_dir / PENDING / STATE
    if not path.is_file():
        raise _damaged(project_dir, STATE, "is missing")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise _damaged(project_dir, STATE, f"is not valid JSON ({err})") from err
    problem = _invalid(state)
    if problem:
        raise _damaged(project_dir, STATE, problem)
    return state


def _invalid(state: object) -> str | None:
    """What is wrong with a state.json's content, None when nothing is."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        return f"is not a format {FORMAT} state (written by another gen, or damaged)"
    for key in ("touched", "conflicts", "saved"):
        paths = state.get(key)
        if not isinstance(paths, list) or not all(_safe(p) for p in paths):
            return f"has no valid {key!r} list of relative paths"
    if not set(state["conflicts"]) | set(state["saved"]) <= set(state["touched"]):
        return "names conflicts or saved files the update did not change"
    digests = state.get("sha256")
    if not isinstance(digests, dict) or not all(
        isinstance(digests.get(n), str) for n in (YOURS, THEIRS)
    ):
        return "has no archive digests"
    try:
        if not isinstance(state.get("record"), str) or not isinstance(
            json.loads(state["record"]), dict
        ):
            return "has no valid record"
    except ValueError:
        return "has no valid record"
    return None


def _safe(path: object) -> bool:
    """A relative path inside the project, outside .git and gen's own state."""
    if not isinstance(path, str) or not path or "\\" in path:
        return False
    parts = PurePosixPath(path).parts
    return not (path.startswith("/") or ".." in parts or parts[0] in (".git", STATE_DIR))


def _archive(project_dir: Path, name: str, digest: str) -> dict[str, Entry]:
    path = project_dir / PENDING / name
    if not path.is_file():
        raise _damaged(project_dir, name, "is missing")
    blob = path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != digest:
        raise _damaged(project_dir, name, f"is not the archive {STATE} describes")
    try:
        return pristine.loads(blob)
    except pristine.Damaged as err:
        raise _damaged(project_dir, name, str(err)) from err


def _damaged(project_dir: Path, part: str, problem: str) -> StateDamaged:
    """One line: the damaged part, that nothing changed, and how to recover."""
    yours_ok = part != YOURS and _loads(project_dir / PENDING / YOURS)
    still = {
        YOURS: "gen update --continue still records the update once its conflicts are gone; or ",
        THEIRS: "gen update --abort still puts your files back; or " if yours_ok else "",
    }.get(part, "")
    sources = []
    if Git(project_dir).ok("rev-parse", "--show-prefix") is not None:
        sources.append("with git (git status lists them; git checkout HEAD -- FILE)")
    if yours_ok and part == STATE:
        sources.append(f"from {PENDING}/{YOURS} (its files/ folder)")
    restore = " or ".join(sources) or "from your own copy"
    return StateDamaged(
        f"{PENDING}/{part} ({WHAT[part]}) {problem}; nothing was changed: {still}put your "
        f"files back {restore}, then delete {PENDING}"
    )


def _loads(path: Path) -> bool:
    try:
        pristine.loads(path.read_bytes())
    except (OSError, pristine.Damaged):
        return False
    return True
