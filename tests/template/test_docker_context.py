"""The build contexts stay small however much data sits in the project: the code build
gets the code alone, the dependency build requirements.txt and the wheels it needs; and
`gen image build --dry-run` shows both steps without an engine."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from generator import catalog
from generator.image.context import code_files, deps_files, pack
from generator.image.requirements import image_requirements
from tests.conftest import RenderProject

GB = 1 << 30


def _sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)


def test_code_context_stays_under_a_megabyte_with_gigabytes_of_data_and_wheels(
    render_project: RenderProject,
) -> None:
    project = render_project(target="both")
    _sparse(project / "data" / "train" / "huge.bin", GB)
    _sparse(project / "output" / "lenet_epoch9.pt", GB // 4)
    _sparse(project / "logs" / "rank_0" / "train.log", GB // 4)
    _sparse(project / "wheelhouse" / "torch-2.0-cp311-cp311-linux_x86_64.whl", GB)
    (project / "src" / "__pycache__").mkdir()
    (project / "src" / "__pycache__" / "x.pyc").write_bytes(b"0" * 1000)
    context = pack("FROM scratch\n", code_files(project))
    assert context.size < 1_000_000
    names = tarfile.open(fileobj=context.fileobj).getnames()
    assert names[0] == context.dockerfile == "Dockerfile"
    assert "train.py" in names and "src/model.py" in names and "scripts/run_8p.sh" in names
    assert not [
        n
        for n in names
        if n.startswith(("data", "output", "logs", "wheelhouse", "Dockerfile.")) or "pycache" in n
    ]


def test_dependency_context_holds_the_requirements_and_the_wheels_given(
    render_project: RenderProject, tmp_path: Path
) -> None:
    project = render_project(target="cuda")
    wheels = tmp_path / "elsewhere"
    wheels.mkdir()
    (wheels / "torch-0-py3-none-any.whl").write_bytes(b"wheel")
    (wheels / "numpy-0-py3-none-any.whl").write_bytes(b"wheel")
    link = tmp_path / "link-to-torch.whl"
    link.symlink_to(wheels / "torch-0-py3-none-any.whl")
    files = deps_files(image_requirements(project), (link,))
    archive = tarfile.open(fileobj=pack("FROM scratch\n", files).fileobj)
    assert archive.getnames() == ["Dockerfile", "requirements.txt", "wheelhouse/link-to-torch.whl"]
    sent = archive.extractfile("requirements.txt").read()
    # requirements.txt, and requirements-sweep.txt's Optuna: the project has sweep.py.
    assert sent == image_requirements(project).encode()
    assert sent.startswith((project / "requirements.txt").read_bytes().rstrip(b"\n"))
    assert sent.endswith((project / "requirements-sweep.txt").read_bytes())
    # A link in a wheelhouse sends the wheel itself.
    member = archive.getmember("wheelhouse/link-to-torch.whl")
    assert member.isfile() and archive.extractfile(member).read() == b"wheel"


def test_dry_run_shows_both_steps_without_an_engine(
    render_project: RenderProject, tmp_path: Path
) -> None:
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
    out = result.stdout
    assert out.startswith("# step 1 of 2: dependency image (key unknown)\n")
    assert "# dependency key: unknown: it hashes the base image's id, and no Docker engine" in out
    entry = catalog.load().default("ascend", "mindspore")
    python = f"python{entry.python} {entry.python}"
    assert f"# python: {python} (catalogue entry {entry.id})" in out
    deps, code = out.split(
        "# step 2 of 2: code image demo:ascend-local, FROM the dependency image\n"
    )
    assert "# build arg: FRAMEWORK=mindspore==2.10.0" in deps
    assert "# build arg: PIP_INDEX_URL=https://mirror/simple" in deps
    assert "# Training image for demo: MindSpore on Ascend NPUs." in deps
    assert "FROM python AS runtime" in deps and "COPY --chown" not in deps
    assert code.startswith("# build arg: REVISION=unknown\n# build arg: SOURCE=unknown\n")
    assert "FROM <dependency image>\n" in code and "rank_table_8p.json ./" in code
    assert not (project / "logs").exists()
