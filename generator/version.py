"""Which tool and which template made a project: the version, the template's commit, and
the history that says which of two templates is newer.

Standard library only: the template's Jinja extension records the version and commit
under plain cookiecutter. A wheel or sdist carries the commit it was built from and that
commit's history (hatch_build.py writes TEMPLATE_COMMIT beside the template and
TEMPLATE_HISTORY in the package); a checkout asks git. A copy without either knows only
its version.
"""

from __future__ import annotations

import os
import subprocess
from functools import lru_cache
from pathlib import Path

from generator import __version__

COMMIT_FILE = "TEMPLATE_COMMIT"
# Every commit of the template's history up to its own, newest first, each followed by its
# parents: `git rev-list --parents HEAD`, 41 bytes a commit.
HISTORY_FILE = "TEMPLATE_HISTORY"


@lru_cache(maxsize=8)
def template_commit(template_root: Path) -> str | None:
    """The commit the template at ``template_root`` was taken from, ``-dirty`` when its
    tracked files have changed since; None when nobody knows (a copy without git)."""
    recorded = template_root / COMMIT_FILE
    if recorded.is_file():
        return recorded.read_text(encoding="utf-8").strip() or None
    if not (template_root / ".git").exists():
        return None
    return git_commit(template_root)


def template_history(template_root: Path) -> str | None:
    """The template's history as ``commit parent...`` lines (HISTORY_FILE's format), None
    when unknown: a copy without git, or a wheel built before wheels carried it."""
    places = [template_root / HISTORY_FILE]
    if template_root.name == "_template":  # a wheel: the package beside its template
        places.append(template_root.parent / HISTORY_FILE)
    for carried in places:
        if carried.is_file():
            return carried.read_text(encoding="utf-8")
    if (template_root / COMMIT_FILE).is_file() or not (template_root / ".git").exists():
        return None
    return _git(template_root, "rev-list", "--parents", "HEAD")


def _git(root: Path, *args: str) -> str | None:
    """git's stripped output in ``root``, None when git is missing or fails."""
    try:
        result = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "LC_ALL": "C"},
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def git_commit(root: Path) -> str | None:
    """HEAD of the git work tree at ``root`` (with ``-dirty``), None without git."""
    commit = _git(root, "rev-parse", "--verify", "HEAD")
    if not commit:
        return None
    # Untracked files (build output, a venv) are not part of the template.
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    return f"{commit}-dirty" if dirty else commit


def describe(template_root: Path) -> str:
    """One line: the tool's version and, when known, the template's commit."""
    commit = template_commit(template_root)
    return f"gen {__version__}" + (f" (template {commit})" if commit else "")
