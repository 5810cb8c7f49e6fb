"""What users get wrong: one line saying what and what is allowed, non-zero exit, nothing written.

Driven through the real `gen` command and through plain `cookiecutter`, whose
pre-generation hook runs the same checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from generator.render.project import template_dir
from tests.conftest import gen

BAD_PROJECTS = [
    "a b",
    "it's",
    '"q"',
    "$(touch pwned)",
    "`touch pwned`",
    "../escape",
    "-rf",
    "",
    "名字",
    "a/b",
]


def cookiecutter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cookiecutter", "--no-input", str(template_dir()), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def _assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for word in words:
        assert word in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def _entries(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


@pytest.mark.parametrize("project", BAD_PROJECTS)
def test_gen_new_rejects_bad_project_name(workdir: Path, project: str) -> None:
    before = _entries(workdir.parent)
    result = gen("new", "--no-input", "--", project, cwd=workdir)
    _assert_one_line_error(result, "project", "letters, digits")
    assert _entries(workdir.parent) == before


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--devices-per-node", "0"], ["devices", "'1', '2', '4', '8'"]),
        (["--devices-per-node", "3"], ["devices", "'1', '2', '4', '8'"]),
        (["--devices_per_node", "32"], ["devices", "'1', '2', '4', '8', '16'"]),
        (
            ["--target", "ascend", "--chip", "910", "--devices-per-node", "16"],
            ["devices_per_node: 16 is not allowed for chip 910", "holds 8 NPUs"],
        ),
        (["--framework", "tensorflow"], ["framework", "pytorch"]),
        (["--target", "rocm"], ["target", "cuda"]),
        (["--platform", "colab"], ["platform", "openi"]),
        (["--nnodes", "0"], ["nnodes", "1"]),
        (["--set", "devices_per_node=3"], ["devices_per_node", "1, 2, 4, 8"]),
        (["--set", "colour=blue"], ["colour", "known options"]),
        (["--set", "novalue"], ["--set", "KEY=VALUE"]),
        (["--set", "project=other"], ["'other' differs from the PROJECT argument 'demo'"]),
        (["--ms-train-loop", "custom"], ["ms_train_loop", "a pytorch project has none"]),
        (["--arch", "arm"], ["--arch", "aarch64"]),
        (["--task", "detect"], ["task", "'classify', 'lm'"]),
        # MindSpore's model of text takes Ascend's fused attention, which the 910 has not.
        (
            ["--task", "lm", "--framework", "mindspore", "--target", "ascend", "--chip", "910"],
            ["task: lm with MindSpore on chip 910", "--chip 910b or 910_93", "--target cuda"],
        ),
    ],
)
def test_gen_new_rejects_bad_options(workdir: Path, args: list[str], words: list[str]) -> None:
    result = gen("new", "demo", "--no-input", *args, cwd=workdir)
    _assert_one_line_error(result, *words)
    assert not (workdir / "demo").exists()


@pytest.mark.parametrize("where", ["under-a-file/out", "/proc/gen-out"])
def test_gen_new_into_a_directory_it_cannot_write_is_one_line(workdir: Path, where: str) -> None:
    (workdir / "under-a-file").write_text("a file, not a directory")
    result = gen("new", "demo", "--no-input", "--output-dir", where, cwd=workdir)
    _assert_one_line_error(result, "cannot write in", "choose another --output-dir")
    assert _entries(workdir) == {"under-a-file"}


def test_a_record_missing_an_answer_is_refused_naming_it(workdir: Path) -> None:
    """An Ascend project whose record lost `target` is not read as a CUDA one."""
    assert gen("new", "demo", "--no-input", "--target", "ascend", cwd=workdir).returncode == 0
    record = workdir / "demo" / ".train-template.json"
    data = json.loads(record.read_text())
    del data["target"]
    record.write_text(json.dumps(data))
    before = {p: p.read_bytes() for p in (workdir / "demo").rglob("*") if p.is_file()}
    for command in (["update", "--dry-run"], ["image", "build", "--target", "ascend", "--dry-run"]):
        result = gen(*command, cwd=workdir / "demo")
        _assert_one_line_error(result, "lacks target", "restore it from git")
    after = {p: p.read_bytes() for p in (workdir / "demo").rglob("*") if p.is_file()}
    assert after == before


def test_gen_new_leaves_an_existing_directory_untouched(workdir: Path) -> None:
    existing = workdir / "demo"
    existing.mkdir()
    (existing / "precious.txt").write_text("keep me")
    result = gen("new", "demo", "--no-input", cwd=workdir)
    _assert_one_line_error(result, "already exists")
    assert _entries(existing) == {"precious.txt"}
    assert (existing / "precious.txt").read_text() == "keep me"


def test_gen_new_creates_a_project(workdir: Path) -> None:
    result = gen("new", "demo", "--no-input", "--target", "both", "-o", "out", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert (workdir / "out" / "demo" / "train.py").is_file()
    assert "created" in result.stdout


@pytest.mark.parametrize("project", ["a b", "$(touch pwned)", "`touch pwned`", "../escape", "-rf"])
def test_plain_cookiecutter_hook_rejects_bad_project(workdir: Path, project: str) -> None:
    before = _entries(workdir.parent)
    result = cookiecutter(f"project={project}", cwd=workdir)
    assert result.returncode != 0
    assert "error: project: " in result.stderr
    assert _entries(workdir.parent) == before


@pytest.mark.parametrize(("option", "words"), [("nnodes=0", "nnodes: "), ("nnodes=x", "nnodes: ")])
def test_plain_cookiecutter_hook_rejects_bad_free_text(
    workdir: Path, option: str, words: str
) -> None:
    result = cookiecutter(option, cwd=workdir)
    assert result.returncode != 0
    assert f"error: {words}" in result.stderr
    assert list(workdir.iterdir()) == []


def test_plain_cookiecutter_renders_the_default_project(workdir: Path) -> None:
    result = cookiecutter(cwd=workdir)
    assert result.returncode == 0, result.stderr
    project = workdir / "mnist-lenet"
    assert (project / "train.py").is_file()
    assert not list(project.glob("_*"))
