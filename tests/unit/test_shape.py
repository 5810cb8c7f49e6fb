"""The code's shape, checked rather than eyeballed: small modules, short functions, short
launch scripts, one module importing the docker SDK, and few repeated runs of lines.

The repeated-runs count is a small stand-in for a duplicate finder (see shared_pairs).
Run this file with a checkout's path to list its pairs:
``python tests/unit/test_shape.py /tmp/base`` after ``git worktree add /tmp/base e1a7ded``.
"""

from __future__ import annotations

import ast
import keyword
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "{{cookiecutter.project}}"
MAX_MODULE_LINES = 350
MAX_FUNCTION_LINES = 60
MAX_SCRIPT_LINES = 180
MIN_RUN = 6
# File pairs sharing a run at e1a7ded, before the scaffold was unified (issue 9): 17, where
# `duplicates` counted 19, mostly the same (the frameworks' train.py, loops, tests and
# launchers). At most half now; and the two a language-model project adds by design, as the
# classifier's files do: its model written in each framework, and its step.py's train_step, the
# classifier's (each project's step.py is whole, the researcher's to read and change).
MAX_SHARED_PAIRS = 10


def _tracked(*patterns: str, repo: Path = REPO) -> list[Path]:
    """Files git tracks, or would track (untracked but not ignored), matching the patterns."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return sorted({repo / name for name in listed if name and (repo / name).is_file()})


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


# The generator's root holds the CLI's entry, the error tree and a few shared helpers; the
# rest is packages by concern (issue 46: 13 loose modules before).
MAX_ROOT_MODULES = 6


def test_the_generators_root_is_packages_and_few_modules() -> None:
    loose = [
        p.name
        for p in _tracked("generator/*.py")
        if p.parent == REPO / "generator" and p.name not in ("__init__.py", "__main__.py")
    ]
    assert len(loose) <= MAX_ROOT_MODULES, loose


def test_package_inits_hold_no_logic() -> None:
    """A package's __init__ names and re-exports; what it does lives in a module beside it."""
    busy = []
    for path in _tracked("generator/*/__init__.py", "generator/*/*/__init__.py"):
        for node in _parse(path).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                busy.append(f"{path.relative_to(REPO)}:{node.name}")
    assert not busy, busy


# --- repeated runs ---------------------------------------------------------------------------
# Lines that carry no logic of their own: comments, imports, decorators, lone brackets.
SKIP = re.compile(r"^(#|//|import |from \S+ import |@|[\]\[(){}:,;]+$)")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STRING = re.compile(r"\"[^\"]*\"|'[^']*'")
NUMBER = re.compile(r"\b\d+(\.\d+)?\b")
WORDS = {*keyword.kwlist, "self", "then", "fi", "do", "done", "esac", "local", "printf"}
SUBSTANTIAL = 20  # characters: a line this long says something
MOST_FILES = 8  # a run in more files is boilerplate of a kind (argument parsing, fixtures)


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, line with its spaces squeezed) of the lines that are code, not prose
    (docstrings and other triple-quoted text) nor SKIP."""
    kept, prose = [], False
    for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
        line = " ".join(raw.split())
        quotes = line.count('"' * 3) + line.count("'" * 3)
        if prose or quotes:
            prose ^= quotes % 2 == 1
        elif line and not SKIP.match(line):
            kept.append((number, line))
    return kept


def _renamed(lines: list[str]) -> str:
    """The lines with strings and numbers folded and names numbered in order of appearance:
    two runs match when one is the other with names consistently renamed."""
    names: dict[str, str] = {}

    def name(match: re.Match[str]) -> str:
        word = match.group()
        return word if word in WORDS else names.setdefault(word, f"N{len(names)}")

    return "\n".join(NAME.sub(name, NUMBER.sub("0", STRING.sub("S", line))) for line in lines)


def _runs(path: Path) -> list[tuple[int, str]]:
    """(first line, renamed text) of each run of MIN_RUN code lines that is logic: at least
    three substantial lines and four different shapes (not a table of data)."""
    kept = _code_lines(path)
    found = []
    for start in range(len(kept) - MIN_RUN + 1):
        lines = [line for _, line in kept[start : start + MIN_RUN]]
        if sum(len(line) >= SUBSTANTIAL for line in lines) < 3:
            continue
        if len({NAME.sub("N", STRING.sub("S", line)) for line in lines}) < 4:
            continue
        found.append((kept[start][0], _renamed(lines)))
    return found


def shared_pairs(repo: Path = REPO) -> list[tuple[str, str]]:
    """Pairs of files (a file with itself too) that share a run of MIN_RUN code lines, the
    same or with names consistently renamed, at places that do not overlap."""
    where: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for path in _tracked("*.py", "*.sh", repo=repo):
        for start, run in _runs(path):
            where[run].append((str(path.relative_to(repo)), start))
    pairs = set()
    for places in where.values():
        if len({name for name, _ in places}) > MOST_FILES:
            continue
        for i, (name_a, start_a) in enumerate(places):
            for name_b, start_b in places[i + 1 :]:
                if name_a != name_b or abs(start_a - start_b) >= MIN_RUN:
                    pairs.add(tuple(sorted((name_a, name_b))))
    return sorted(pairs)  # type: ignore[arg-type]


def test_few_repeated_runs() -> None:
    pairs = shared_pairs()
    assert len(pairs) <= MAX_SHARED_PAIRS, "\n".join(f"{a} ~ {b}" for a, b in pairs)


def test_the_finder_finds_a_renamed_copy(tmp_path: Path) -> None:
    body = (
        "def scale(values, factor):\n"
        "    total = sum(values) * factor\n"
        "    if total > 100:\n"
        "        raise ValueError(f'too large: {total}')\n"
        "    result = [value * factor for value in values]\n"
        "    return result, total / len(values)\n"
    )
    renamed = body.replace("values", "items").replace("factor", "k").replace("100", "7")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.py").write_text(body)
    (tmp_path / "b.py").write_text(renamed)
    (tmp_path / "c.py").write_text(body.replace("total > 100", "total < 100 - total"))
    assert shared_pairs(tmp_path) == [("a.py", "b.py")]


# The researcher's rooms at the top of src/; the platform floor below it, in src/scaffold/.
RESEARCHER_FILES = {"__init__.py", "model.py", "data.py", "step.py"}


def _project_names() -> set[str]:
    """Every file and folder name a generated project can hold (both frameworks' overlays
    as they land), by stem: model.py -> model."""
    names: set[str] = set()
    for path in _tracked(f"{TEMPLATE.name}/*"):
        parts = path.relative_to(TEMPLATE).parts
        if parts[0] in ("_pytorch", "_mindspore"):
            parts = parts[1:]
        names.update(part if part.startswith(".") else part.split(".")[0] for part in parts)
    return names


def _one_letter_apart(a: str, b: str) -> bool:
    """a and b differ by one letter: changed, added or dropped (run_1p/run_8p differ by a
    digit, which reads as a number, not as a typo)."""
    if len(a) == len(b):
        diff = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
        return len(diff) == 1 and diff[0][0].isalpha() and diff[0][1].isalpha()
    short, long = sorted((a, b), key=len)
    if len(long) - len(short) != 1:
        return False
    return any(long[:i] + long[i + 1 :] == short and long[i].isalpha() for i in range(len(long)))


def test_no_two_project_names_differ_by_one_letter() -> None:
    names = sorted(_project_names())
    close = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if _one_letter_apart(a, b)]
    assert not close, f"names one letter apart (dataset/datasets, test/tests): {close}"
    assert _one_letter_apart("dataset", "datasets") and _one_letter_apart("test", "tests")
    assert not _one_letter_apart("run_1p", "run_8p")


def test_src_has_two_storeys() -> None:
    """src/ holds the files a researcher edits and the scaffold package; nothing else."""
    for overlay in ("", "_pytorch/", "_mindspore/"):
        top = {
            p.relative_to(TEMPLATE / f"{overlay}src").parts[0]
            for p in _tracked(f"{TEMPLATE.name}/{overlay}src/*")
        }
        assert top - {"scaffold"} <= RESEARCHER_FILES, (overlay, top)
    shared = {p.name for p in _tracked(f"{TEMPLATE.name}/src/*") if p.parent.name == "src"}
    framework = {
        p.name for p in _tracked(f"{TEMPLATE.name}/_pytorch/src/*") if p.parent.name == "src"
    }
    assert shared | framework == RESEARCHER_FILES


if __name__ == "__main__":
    for a, b in shared_pairs(Path(sys.argv[1]).resolve() if sys.argv[1:] else REPO):
        print(f"{a} ~ {b}")
