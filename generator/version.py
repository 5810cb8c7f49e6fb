"""Which tool and which template made a project: the version, and the template's commit.

Standard library only: the template's Jinja extension records both under plain
cookiecutter. A wheel carries the commit it was built from (hatch_build.py writes
TEMPLATE_COMMIT beside the template); a checkout asks git.
"""

from __future__ import annotations

import os
import subprocess
from functools import lru_cache
from pathlib import Path

from generator import __version__

COMMIT_FILE = "TEMPLATE_COMMIT"


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


def git_commit(root: Path) -> str | None:
    """HEAD of the git work tree at ``root`` (with ``-dirty``), None without git."""

    def git(*args: str) -> str | None:
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

    commit = git("rev-parse", "--verify", "HEAD")
    if not commit:
        return None
    # Untracked files (build output, a venv) are not part of the template.
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{commit}-dirty" if dirty else commit


def describe(template_root: Path) -> str:
    """One line: the tool's version and, when known, the template's commit."""
    commit = template_commit(template_root)
    return f"gen {__version__}" + (f" (template {commit})" if commit else "")
