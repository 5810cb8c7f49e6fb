"""What `gen update` does to each file: a decision from three versions of it.

Base is the pristine render the project was made from, theirs the new render, ours
the file in the project now. Pure: nothing here touches the disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from generator.render.pristine import Entry


class Action(str, Enum):
    """What happens to one path. The value is what --dry-run prints."""

    TAKE = "take"  # theirs replaces an unmodified file
    ADD = "add"  # new in the template
    DELETE = "delete"  # deleted by the template, unmodified here
    MERGE = "merge"  # both changed: a three-way merge
    SIDECAR = "sidecar"  # both changed a binary file: theirs goes to PATH.gen-new
    CHMOD = "chmod"  # only the template changed the executable bit
    KEEP = "keep"  # reported, left as it is


@dataclass(frozen=True)
class Step:
    path: str
    action: Action
    reason: str
    theirs: Entry | None = None


def decide(path: str, base: Entry | None, theirs: Entry | None, ours: Entry | None) -> Step | None:
    """The step for one path; None when nothing needs doing or saying."""
    if theirs is None and base is None:
        return None  # the user's own file
    if theirs is not None and theirs.same(base):
        # Unchanged in the template: yours stays, deleted or not, and nothing is said (a
        # file you deleted would otherwise be reported on every update).
        return None
    if base is None:
        return _added(path, theirs, ours)
    if theirs is None:
        if ours is None:
            return None
        if ours.digest == base.digest:
            return Step(path, Action.DELETE, "deleted by the template; you had not changed it")
        return Step(path, Action.KEEP, "deleted by the template, changed by you: kept")
    if ours is None:
        return Step(path, Action.KEEP, "deleted by you, changed by the template: stays deleted")
    if ours.digest == theirs.digest or theirs.digest == base.digest:
        # The content is settled; at most the template changed the executable bit.
        if theirs.mode != base.mode and ours.mode == base.mode and ours.mode != theirs.mode:
            return Step(path, Action.CHMOD, "the template changed its mode", theirs)
        return None
    if ours.digest == base.digest:
        return Step(path, Action.TAKE, "changed by the template only", theirs)
    if theirs.binary or ours.binary or base.binary:
        return Step(path, Action.SIDECAR, "a binary file both changed", theirs)
    return Step(path, Action.MERGE, "changed by you and by the template", theirs)


def _added(path: str, theirs: Entry | None, ours: Entry | None) -> Step | None:
    assert theirs is not None
    if ours is None:
        return Step(path, Action.ADD, "new in the template", theirs)
    if ours.digest == theirs.digest:
        return None
    if theirs.binary or ours.binary:
        return Step(path, Action.SIDECAR, "added by you and by the template", theirs)
    return Step(path, Action.MERGE, "added by you and by the template", theirs)
