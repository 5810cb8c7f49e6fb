"""Carry out `gen update`'s steps: three-way merges with git merge-file, files written
whole, and unmerged index stages so that `git mergetool` sees all three versions."""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from generator.errors import UpdateError
from generator.git import Git
from generator.render.pristine import Entry
from generator.update.plan import Action, Step

SIDECAR = ".gen-new"


@dataclass(frozen=True)
class Labels:
    """The names conflict markers carry: yours, the old template, the new one."""

    ours: str
    base: str
    theirs: str


@dataclass(frozen=True)
class Result:
    """A step carried out in memory: the bytes the path gets, and whether they conflict."""

    step: Step
    data: bytes | None
    conflicted: bool


def merge_text(ours: bytes, base: bytes, theirs: bytes, labels: Labels) -> tuple[bytes, bool]:
    """``git merge-file --diff3``: the merged bytes and whether conflicts remain in them."""
    with tempfile.TemporaryDirectory(prefix="gen-merge-") as tmp:
        paths = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_bytes(data)
            paths.append(str(path))
        command = ["git", "merge-file", "-p", "--diff3"]
        for label in (labels.ours, labels.base, labels.theirs):
            command += ["-L", label]
        try:
            result = subprocess.run(command + paths, capture_output=True, stdin=subprocess.DEVNULL)
        except OSError as err:
            raise UpdateError(f"could not run git merge-file: {err}; install git") from err
    # Its exit status is the number of conflicts; negative (or >127) is an error.
    if not 0 <= result.returncode < 128:
        raise UpdateError(f"git merge-file failed: {result.stderr.decode(errors='replace')}")
    return result.stdout, result.returncode > 0


def carry_out(step: Step, base: Entry | None, ours: Entry | None, labels: Labels) -> Result:
    """What ``step`` makes of the path, in memory: nothing is written here."""
    theirs = step.theirs
    if step.action is Action.MERGE:
        assert theirs is not None and ours is not None
        merged, conflicted = merge_text(
            ours.data or b"", (base.data if base else None) or b"", theirs.data or b"", labels
        )
        return Result(step, merged, conflicted)
    if step.action is Action.SIDECAR:
        return Result(step, None, True)
    return Result(step, theirs.data if theirs else None, False)


def write(project_dir: Path, result: Result, theirs_bytes: bytes | None) -> None:
    """Put one carried-out step on disk."""
    step = result.step
    path = project_dir / step.path
    if step.action is Action.DELETE:
        path.unlink()
    elif step.action is Action.SIDECAR:
        assert theirs_bytes is not None and step.theirs is not None
        _write(path.with_name(path.name + SIDECAR), theirs_bytes, step.theirs.mode)
    elif step.action is Action.CHMOD:
        assert step.theirs is not None
        path.chmod(step.theirs.mode)
    elif step.action in (Action.TAKE, Action.ADD):
        assert theirs_bytes is not None and step.theirs is not None
        _write(path, theirs_bytes, step.theirs.mode)
    elif step.action is Action.MERGE:
        assert result.data is not None
        _write(path, result.data, path.stat().st_mode & 0o777)


def restore(path: Path, entry: Entry) -> None:
    """Put a kept version of a file back."""
    _write(path, entry.data or b"", entry.mode)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write whole or not at all: a temporary file beside it, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def stage_conflicts(
    git: Git, prefix: str, conflicts: list[tuple[str, Entry | None, Entry, Entry]]
) -> None:
    """Record each conflicted path as unmerged in the index: stage 1 the old template's
    version, 2 yours, 3 the new template's, as `git merge` leaves them."""
    if not conflicts:
        return
    lines = []
    for path, base, ours, theirs in conflicts:
        name = prefix + path
        lines.append(f"0 {'0' * 40}\t{name}")
        for stage, version in ((1, base), (2, ours), (3, theirs)):
            if version is not None and version.data is not None:
                blob = git("hash-object", "-w", "--stdin", stdin=_text(version.data)).strip()
                lines.append(f"{0o100000 | version.mode:o} {blob} {stage}\t{name}")
    git("update-index", "--index-info", stdin="\n".join(lines) + "\n")


def _text(data: bytes) -> str:
    # Git's runner speaks text; surrogateescape carries any byte through unchanged.
    return data.decode("utf-8", errors="surrogateescape")
