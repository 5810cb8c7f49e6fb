"""Which of two templates is newer, and which answers a project's record must hold.

A template is named by its version (generator/__init__.py) and, where known, its commit.
The commits order it: template B is newer than A when A is one of B's ancestors. The
history that says so is git's (a --template repository, a checkout) or the one a wheel
carries (generator/version.py). Where the history cannot place the project's commit, the
versions decide; at one version, a commit outside the history is not taken to be older.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from generator import __version__
from generator.errors import UpdateError
from generator.render.pristine import RECORD
from generator.version import template_commit, template_history

# Answers added to the template after projects began to record theirs, with the commit
# that added each: a record from before it lacks the answer and takes its default; one
# from after it must hold it. (generator/render/project.py's read_record refuses any other key.)
KEYS_ADDED = {
    "arch": "20174255bf381cd58481687d629bc24b17c0be34",
    "task": "9d81056d1e70084c950f4e76da09ff47cc9850e5",
}


class Direction(str, Enum):
    SAME = "same"
    FORWARD = "forward"
    BACK = "back"
    UNKNOWN = "unknown"  # the same version, a commit the history does not hold


@dataclass(frozen=True)
class Identity:
    """A template: its version and commit (without ``-dirty``; None when unrecorded)."""

    version: str
    commit: str | None

    @classmethod
    def of_record(cls, record: Mapping[str, object]) -> Identity:
        version = str(record.get("generator", "train-template ?"))
        commit = str(record.get("template_commit") or "").removesuffix("-dirty")
        return cls(version.removeprefix("train-template "), commit or None)

    def __str__(self) -> str:
        return f"{self.version} ({self.commit[:12]})" if self.commit else self.version


class History:
    """Commits and their parents: who descends from whom."""

    def __init__(self, text: str) -> None:
        self.parents: dict[str, list[str]] = {}
        for line in text.splitlines():
            commit, *parents = line.split()
            self.parents[commit] = parents

    def is_ancestor(self, old: str, new: str) -> bool:
        """Whether ``old`` is ``new`` or one of its ancestors (False when either is unknown)."""
        seen, todo = set(), [new]
        while todo:
            commit = todo.pop()
            if commit == old:
                return True
            if commit not in seen:
                seen.add(commit)
                todo.extend(self.parents.get(commit, ()))
        return False


def installed(template_root: Path) -> tuple[Identity, History | None]:
    """The template installed with gen, and its history where one is known."""
    commit = (template_commit(template_root) or "").removesuffix("-dirty")
    text = template_history(template_root)
    return Identity(__version__, commit or None), History(text) if text else None


def version_in(init_py: str | None) -> str:
    """The version a generator/__init__.py's text names, ``?`` without one."""
    found = re.search(r'^__version__ = "([^"]+)"', init_py or "", re.M)
    return found.group(1) if found else "?"


def _numbers(version: str) -> tuple[int, ...] | None:
    found = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(part) for part in found.group(0).split(".")) if found else None


def direction(project: Identity, target: Identity, history: History | None) -> Direction:
    """Whether going from ``project`` to ``target`` moves forward, back, or nowhere."""
    if project.commit and project.commit == target.commit:
        return Direction.SAME
    if project.commit and target.commit and history is not None:
        if history.is_ancestor(project.commit, target.commit):
            return Direction.FORWARD
        if history.is_ancestor(target.commit, project.commit):
            return Direction.BACK
    ours, theirs = _numbers(project.version), _numbers(target.version)
    if ours and theirs and ours != theirs:
        return Direction.FORWARD if ours < theirs else Direction.BACK
    return Direction.UNKNOWN if project.commit else Direction.FORWARD


def check(
    project: Identity, target: Identity, history: History | None, where: str, explicit: str
) -> Direction:
    """Refuse to take the project back to an older template (or one whose place is not
    known): ``where`` names the target ({} for its version and commit), ``explicit`` is the
    --to that would allow it."""
    way = direction(project, target, history)
    where = where.replace("{}", str(target))
    if way is Direction.BACK:
        raise UpdateError(
            f"the project is at template {project}, newer than {where}: updating "
            f"would undo the newer template's changes; update gen (or pass --template with "
            f"the newer history), or pass --to {explicit} to go back to it"
        )
    if way is Direction.UNKNOWN:
        raise UpdateError(
            f"the project is at template {project}, which is not in the history of {where}: "
            "it may be newer, and updating would undo its changes; update gen "
            f"(or pass --template with its history), or pass --to {explicit} to take it anyway"
        )
    return way


def missing_keys(
    record: Mapping[str, object],
    keys: Iterable[str],
    history: History | None,
    given: Iterable[str] = (),
) -> list[str]:
    """The template's answers ``record`` lacks that the template which wrote it had: every
    key but those added later (KEYS_ADDED) that its commit does not descend from."""
    commit = Identity.of_record(record).commit
    missing = []
    for key in keys:
        if key in record or key in given:
            continue
        added = KEYS_ADDED.get(key)
        if added is None or (commit and history and history.is_ancestor(added, commit)):
            missing.append(key)
    return missing


def refuse_missing(missing: list[str], project: Identity) -> None:
    if missing:
        names = ", ".join(missing)
        raise UpdateError(
            f"{RECORD} lacks {names}, which template {project} records; gen update will not "
            f"guess an answer: put it back (git log -p {RECORD} shows it) or pass "
            + " ".join(f"--set {key}=VALUE" for key in missing)
        )
