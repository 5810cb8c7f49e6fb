"""The build context stays small however much data sits in the project, and
`gen image build --dry-run` shows the Dockerfile and build args without an engine."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from generator.engine import build_context
from tests.conftest import RenderProject

GB = 1 << 30


def _sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)


def test_context_stays_under_a_megabyte_with_a_gigabyte_of_data(
    render_project: RenderProject,
) -> None:
    project = render_project(target="both")
    _sparse(project / "data" / "train" / "huge.bin", GB)
    _sparse(project / "output" / "lenet_epoch9.pt", GB // 4)
    _sparse(project / "logs" / "rank_0" / "train.log", GB // 4)
    (project / "src" / "__pycache__").mkdir()
    (project / "src" / "__pycache__" / "x.pyc").write_bytes(b"0" * 1000)
    context = build_context(project, "Dockerfile.cuda", {})
    size = context.seek(0, 2)
    context.seek(0)
    assert size < 1_000_000
    names = tarfile.open(fileobj=context).getnames()
    assert "train.py" in names and "src/model.py" in names and "Dockerfile.cuda" in names
    assert not [n for n in names if n.startswith(("data", "output", "logs")) or "pycache" in n]


def test_wheelhouse_joins_the_context_under_its_name(
    render_project: RenderProject, tmp_path: Path
) -> None:
    project = render_project(target="cuda")
    wheels = tmp_path / "elsewhere"
    wheels.mkdir()
    (wheels / "torch-0-py3-none-any.whl").write_bytes(b"wheel")
    names = tarfile.open(fileobj=build_context(project, "Dockerfile.cuda", {"wheelhouse": wheels}))
    assert "wheelhouse/torch-0-py3-none-any.whl" in names.getnames()


def test_dry_run_needs_no_engine(render_project: RenderProject, tmp_path: Path) -> None:
    project = render_project(framework="mindspore", target="ascend")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "generator",
            "image",
            "build",
            "--target",
            "ascend",
            "--dry-run",
            "--build-arg",
            "FRAMEWORK=mindspore==2.10.0",
            "--pip-index-url",
            "https://mirror/simple",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Training image for demo: MindSpore on Ascend NPUs.")
    assert "# build arg: FRAMEWORK=mindspore==2.10.0" in result.stdout
    assert "# build arg: PIP_INDEX_URL=https://mirror/simple" in result.stdout
    assert "# tag: demo:ascend-local" in result.stdout
