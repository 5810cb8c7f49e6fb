"""A template repository with two versions, for gen update's tests.

Version 1 is this checkout as it is now (committed or not), so that `gen new` here
renders exactly version 1. Version 2 changes it the way template fixes do: a line in
a script, a new file, a deleted file, a new binary, a new version number.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from generator import __version__
from generator.render.project import REPO_ROOT_MARKERS

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = "{{cookiecutter.project}}"
# What building the tool needs beside the template.
TOOL_FILES = ("generator", "pyproject.toml", "hatch_build.py", "README.md")
V2 = "0.1.1"
V2_COMMENT = "# Template v2: sourced by every launcher."
V2_README_LINE = "Template v2 added this line at the end."
V2_NOTES = "# Notes added by template v2\n"
DELETED_IN_V2 = "checks/test_model.py"  # a PyTorch project's, from _pytorch/
BINARY = "data/test/t10k-labels-idx1-ubyte.gz"
MADE_EXECUTABLE = "scripts/report.py"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "LC_ALL": "C"}
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return result.stdout


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def version_1(dest: Path) -> Path:
    """This checkout's template and tool, as a new repository tagged v<version>."""
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    keep = (*REPO_ROOT_MARKERS, *TOOL_FILES)
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if name.split("/", 1)[0] in keep and source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "version 1")
    git(dest, "tag", f"v{__version__}")
    return dest


def version_2(repo: Path) -> str:
    """Version 2 on top of version 1, tagged v0.1.1; its commit."""
    template = repo / TEMPLATE
    env_sh = template / "env.sh"
    lines = env_sh.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(1, V2_COMMENT + "\n")
    env_sh.write_text("".join(lines), encoding="utf-8")
    with (template / "README.md").open("a", encoding="utf-8") as readme:
        readme.write(f"\n{V2_README_LINE}\n")
    (template / "NOTES.md").write_text(V2_NOTES, encoding="utf-8")
    (template / "_pytorch" / DELETED_IN_V2).unlink()
    (template / MADE_EXECUTABLE).chmod(0o755)
    with (template / BINARY).open("ab") as binary:
        binary.write(b"\0template v2\0")
    init = repo / "generator" / "__init__.py"
    init.write_text(
        init.read_text(encoding="utf-8").replace(f'"{__version__}"', f'"{V2}"'), encoding="utf-8"
    )
    commit = commit_all(repo, "version 2")
    git(repo, "tag", f"v{V2}")
    return commit


def build_wheel(source: Path, dest: Path) -> Path:
    """The wheel pip builds from ``source``, with this venv's hatchling."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(dest), str(source)],
        check=True,
    )
    (wheel,) = dest.glob("train_template-*.whl")
    return wheel
