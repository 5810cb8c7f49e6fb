"""Every valid option combination renders through the real cookiecutter and lints clean.

Rendering is cheap; linting is batched (one shellcheck and one ruff run over the
whole matrix) so that the full matrix stays fast.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator.render.options import (
    DEVICES_PER_NODE,
    FRAMEWORKS,
    MS_TRAIN_LOOPS,
    PLATFORMS,
    TARGETS,
    Options,
)
from generator.render.project import render
from generator.shipped.ranktable import tables as ranktable

BIN = Path(sys.executable).parent
COMBINATIONS = [
    Options(f"p{i}", framework, target, platform, devices, nnodes, loop)
    for i, (framework, target, platform, devices, nnodes, loop) in enumerate(
        itertools.product(FRAMEWORKS, TARGETS, PLATFORMS, DEVICES_PER_NODE, (1, 2), MS_TRAIN_LOOPS)
    )
    # The loop option means nothing to PyTorch projects: render them once.
    if framework == "mindspore" or loop == MS_TRAIN_LOOPS[0]
]
# Language-model projects (gen new --task lm) on every framework, target and platform: their own
# src/ and data/ over the same floor, which the combinations above cover in full.
LM_COMBINATIONS = [
    Options(f"lm{i}", framework, target, platform, task="lm")
    for i, (framework, target, platform) in enumerate(
        itertools.product(FRAMEWORKS, TARGETS, PLATFORMS)
    )
]
COMBINATIONS += LM_COMBINATIONS
LEFTOVER = re.compile(r"\{\{|\{%|\{#|cookiecutter\.")


def _tool(name: str) -> str:
    path = BIN / name
    return str(path) if path.exists() else name


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[Options, Path]:
    root = tmp_path_factory.mktemp("matrix")
    return {options: render(options, root) for options in COMBINATIONS}


def _text_files(project: Path) -> list[Path]:
    """The rendered files: not the demo data (a language model's text quotes Jinja's {%)."""
    return [
        p
        for p in project.rglob("*")
        if p.is_file() and p.suffix not in (".gz", ".png") and p.parent != project / "data"
    ]


def test_matrix_covers_every_combination(matrix: dict[Options, Path]) -> None:
    per_framework = len(TARGETS) * len(PLATFORMS) * len(DEVICES_PER_NODE) * 2
    lm = len(FRAMEWORKS) * len(TARGETS) * len(PLATFORMS)
    assert len(matrix) == per_framework * (1 + len(MS_TRAIN_LOOPS)) + lm


@pytest.mark.parametrize("options", COMBINATIONS, ids=lambda o: "-".join(o.as_context().values()))
def test_rendered_cleanly(matrix: dict[Options, Path], options: Options) -> None:
    project = matrix[options]
    assert not list(project.glob("_*")), "framework overlays must be gone"
    for path in _text_files(project):
        text = path.read_text(encoding="utf-8")
        assert not LEFTOVER.search(text), f"unrendered template text in {path}"
        if path.suffix == ".json":
            json.loads(text)
        if path.suffix in (".yaml", ".yml"):
            yaml.safe_load(text)
    assert (project / "train.py").is_file()
    assert (project / ".gitignore").is_file() and not (project / "gitignore").exists()
    assert (project / "scripts" / "run_1p.sh").is_file()
    assert (project / "scripts" / "run_8p.sh").is_file()
    assert os.access(project / "scripts" / "run_8p.sh", os.X_OK)
    table_file = project / "rank_table_8p.json"
    assert table_file.exists() == (options.target != "cuda")
    if table_file.exists():
        table = ranktable.load(table_file)
        assert table.rank_size == options.devices_per_node * options.nnodes


# What every generated README must tell, and what only some platforms and targets need.
README_ALWAYS = ("## Several devices, several nodes", "--join-timeout", "**Interface.**")
README_ALWAYS += ("## Run on a Kubernetes cluster", "gen job render --kind")
# Watching a run: TensorBoard, the report, MLflow; and one output directory per run.
README_ALWAYS += ("## Watching a run", "tensorboard --logdir", "python scripts/report.py")
README_ALWAYS += ("MLFLOW_TRACKING_URI", "**One output directory, one run.**", "--resume auto")
# The record gen update merges from, and how to take a newer template.
README_ALWAYS += ("## Keep it up to date", "render as it was: commit both", "gen update --dry-run")
README_BY_PLATFORM = {
    # OpenI's training form and what its C2Net tasks do (its docs, 云脑 → 训练任务, and the
    # task code: /tmp/code, /tmp/dataset, /tmp/output; run parameters as --name=value).
    "openi": (
        "### OpenI (启智)",
        "**C2Net (智算网络) jobs**",
        "upload_output()",
        "项目 → 云脑 → 训练任务 → 新建训练任务",
        "启动文件 `launch.py`",
        "passed as `--name=value`",
        "`requirements.txt` is not run",
        "`/tmp/dataset/<archive name>/`",
        "the outputs go to `/tmp/output`",
    ),
    # The job through ModelArts' API, instead of the console (gen submit).
    "modelarts": ("### ModelArts", "train_url", "gen submit modelarts --flavor", "--dry-run"),
    "generic": ("### Your own nodes",),
}
README_ASCEND = ("**Rank tables.**", "HWHIAI_UID", "`ascendjob`", "### Ascend ModelZoo scripts")
README_ALWAYS += ("### Run the image", "docker run --rm", "IMAGE bash scripts/run_8p.sh")
README_ASCEND += ("--device=/dev/davinci0", "--device=/dev/davinci_manager", "/usr/local/dcmi")
README_CUDA = ("--gpus all",)


@pytest.mark.parametrize(
    "options",
    COMBINATIONS[:: len(DEVICES_PER_NODE)],
    ids=lambda o: "-".join(o.as_context().values()),
)
def test_readme_says_how_to_submit_and_run_on_several_nodes(
    matrix: dict[Options, Path], options: Options
) -> None:
    project = matrix[options]
    readme = (project / "README.md").read_text(encoding="utf-8")
    ascend = options.target in ("ascend", "both")
    cuda = options.target in ("cuda", "both")
    wanted = README_ALWAYS + README_BY_PLATFORM[options.platform] + README_ASCEND * ascend
    wanted += README_CUDA * cuda
    assert [text for text in wanted if text not in readme] == []
    if not ascend:
        assert "HWHIAI_UID" not in readme and "`ascendjob`" not in readme
        assert "/dev/davinci" not in readme
    if not cuda:
        assert "--gpus" not in readme
    # C2Net's client is an optional requirement of OpenI projects only.
    requirements = (project / "requirements.txt").read_text(encoding="utf-8")
    assert ("# c2net==0.2.0" in requirements) == (options.platform == "openi")


def test_template_readme_draws_the_layout_and_the_platforms() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for heading in ("## Two commands", "## Layout", "## Where a project runs", "## Rank tables"):
        assert heading in readme
    assert "## Run on a Kubernetes cluster" in readme and "backend/api.py" in readme
    assert "never imports the rooms" in readme and "task.py" in readme
    assert "## Runs you can watch and never lose" in readme and "gen report" in readme
    for heading in ("## Install", "## Keep a project up to date", "## Check a host"):
        assert heading in readme
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "pipx install git+" in install and "pip install git+" in install
    assert "## Submit to ModelArts" in readme and "gen submit modelarts" in readme


def _unique(matrix: dict[Options, Path], pattern: str) -> list[str]:
    """One path per distinct (name, text) among the projects' files: most combinations
    render the same scripts, and linting each copy once keeps the matrix fast."""
    seen: dict[tuple[str, str], str] = {}
    for project in matrix.values():
        for path in sorted(project.rglob(pattern)):
            key = (str(path.relative_to(project)), path.read_text(encoding="utf-8"))
            seen.setdefault(key, str(path))
    return sorted(seen.values())


def test_every_script_passes_shellcheck(matrix: dict[Options, Path]) -> None:
    scripts = _unique(matrix, "*.sh")
    assert scripts
    result = subprocess.run(
        [_tool("shellcheck"), "--severity=style", "--external-sources", *scripts],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:]


def test_every_python_file_passes_ruff(matrix: dict[Options, Path]) -> None:
    # Each file is checked with its project's pyproject.toml settings (Python 3.8 on).
    files = _unique(matrix, "*.py")
    result = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "--quiet", *files], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-4000:]


def test_every_python_file_parses_as_python_3_8(matrix: dict[Options, Path]) -> None:
    # The oldest Python the catalogue's images carry; tests/integration runs 3.9 for real.
    for path in _unique(matrix, "*.py"):
        ast.parse(Path(path).read_text(encoding="utf-8"), path, feature_version=(3, 8))


def test_every_dockerfile_passes_hadolint(matrix: dict[Options, Path]) -> None:
    dockerfiles = sorted(
        str(p) for project in matrix.values() for p in project.glob("Dockerfile.*")
    )
    assert len(dockerfiles) == sum(2 if o.target == "both" else 1 for o in matrix)
    # Ignores are few and documented inline in the Dockerfiles themselves. Each distinct
    # Dockerfile is linted once, as the scripts are.
    unique = _unique(matrix, "Dockerfile.*")
    result = subprocess.run([_tool("hadolint"), *unique], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:]


def test_dockerfiles_are_classic_builder_compatible(matrix: dict[Options, Path]) -> None:
    for project in matrix.values():
        for dockerfile in project.glob("Dockerfile.*"):
            lines = dockerfile.read_text().splitlines()
            assert not [line for line in lines if line.startswith("# syntax=")]
            instructions = [line for line in lines if not line.lstrip().startswith("#")]
            assert not [line for line in instructions if "--mount" in line or "<<" in line]
