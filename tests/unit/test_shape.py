"""The code's shape, checked rather than eyeballed: small modules, short functions, short
launch scripts, one module importing the docker SDK, and few repeated runs of lines.

The repeated-runs count is a small stand-in for a duplicate finder: runs of
MIN_RUN lines that two files share, compared after blank lines, comments, imports
and lone punctuation are dropped and names, strings and numbers are folded.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections import defaultdict
from itertools import combinations
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "{{cookiecutter.project}}"
MAX_MODULE_LINES = 350
MAX_FUNCTION_LINES = 60
MAX_SCRIPT_LINES = 180
MIN_RUN = 6
# File pairs sharing a run before the scaffold was unified (issue 9): 9 identical, 39 of the
# same shape. At most half of each now.
MAX_IDENTICAL_PAIRS = 4
MAX_SAME_SHAPE_PAIRS = 19


def _tracked(*patterns: str) -> list[Path]:
    """Files git tracks, or would track (untracked but not ignored), matching the patterns."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return sorted({REPO / name for name in listed if name and (REPO / name).is_file()})


def _our_python() -> list[Path]:
    """The generator package and the template's Python (hooks, extension, project)."""
    return _tracked("generator/*.py", "hooks/*.py", "local_extensions.py", f"{TEMPLATE.name}/*.py")


def _parse(path: Path) -> ast.Module:
    # Template Python is copied unrendered or holds Jinja only in strings and
    # {%- if %} lines: drop those lines to parse it.
    text = path.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("{%")]
    return ast.parse("\n".join(lines), filename=str(path))


def test_no_module_is_too_long() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in _our_python()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_is_too_long() -> None:
    long = {}
    for path in _our_python():
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(REPO)}:{node.name}"] = size
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_launch_script_is_too_long() -> None:
    scripts = _tracked(f"{TEMPLATE.name}/*.sh")
    assert scripts
    long = {
        str(p.relative_to(REPO)): n
        for p in scripts
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_SCRIPT_LINES
    }
    assert not long, f"template scripts over {MAX_SCRIPT_LINES} lines: {long}"


def test_one_module_imports_the_docker_sdk() -> None:
    importers = [
        str(p.relative_to(REPO))
        for p in _tracked("generator/*.py")
        if re.search(r"^\s*(import docker|from docker\b)", p.read_text(), re.M)
    ]
    assert len(importers) == 1, importers


# --- repeated runs ---------------------------------------------------------------------------
SKIP = re.compile(r"^(#|//|import |from \S+ import |[\]\[(){}:,;]+$|\"\"\"|''')")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STRING = re.compile(r"\"[^\"]*\"|'[^']*'")
NUMBER = re.compile(r"\b\d+(\.\d+)?\b")


def _shape(line: str) -> str:
    return NAME.sub("N", NUMBER.sub("0", STRING.sub("S", line)))


def _runs(path: Path, fold: bool) -> set[str]:
    kept = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = " ".join(raw.split())
        if line and not SKIP.match(line):
            kept.append(_shape(line) if fold else line)
    return {"\n".join(kept[i : i + MIN_RUN]) for i in range(len(kept) - MIN_RUN + 1)}


def shared_pairs(files: list[Path], fold: bool) -> list[tuple[str, str]]:
    """Pairs of files that share at least one run of MIN_RUN lines: identical ones, or with
    ``fold`` lines of the same shape.

    A run found in more than eight files is boilerplate of a kind (argument
    parsing, fixtures) and is not counted, as a duplicate finder would not list it.
    """
    where: dict[str, set[str]] = defaultdict(set)
    for path in files:
        for run in _runs(path, fold):
            where[run].add(str(path.relative_to(REPO)))
    pairs = set()
    for names in where.values():
        if 2 <= len(names) <= 8:
            pairs.update(combinations(sorted(names), 2))
    return sorted(pairs)


def test_few_repeated_runs() -> None:
    files = _tracked("*.py", "*.sh")
    for fold, most in ((False, MAX_IDENTICAL_PAIRS), (True, MAX_SAME_SHAPE_PAIRS)):
        pairs = shared_pairs(files, fold)
        assert len(pairs) <= most, "\n".join(f"{a} ~ {b}" for a, b in pairs)
