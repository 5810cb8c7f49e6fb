"""Images for the servers' CPU. Ascend servers run aarch64: a project's Ascend image is built
for aarch64 by default, here on x86_64 with the docker SDK under QEMU emulation (binfmt_misc,
qemu-user-static), smoke-tested the same way, and its CPU read back from the image.

The aarch64 stand-in base (Debian 12 made by debootstrap under emulation) and the aarch64
wheels (MindSpore publishes them on PyPI; torch's aarch64 wheels there are CUDA builds of
several GB) are made once and kept, as the x86_64 ones are. The dependency image is kept as every
shared one is (tests/integration/conftest.py, shared_images): its key names it, so a later run
rebuilds it only when what it is made of changes, and builds the code image and runs the smoke
test under emulation every time.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from generator import engine
from generator.doctor import project as doctor
from generator.doctor.subject import subject as doctor_subject
from generator.render.options import Options
from generator.render.project import read_record
from generator.shipped.hostcheck import FAIL
from tests.conftest import gen
from tests.integration.conftest import (
    CACHE,
    REPO,
    STANDIN_BASE,
    SWEEPS,
    committed_project,
    share,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ARM64_BASE = os.environ.get("STANDIN_ARM64", "train-template/standin-base:bookworm-py311-arm64")
BINFMT = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
PIN = "mindspore==2.10.0"
# pip download for another machine: binary wheels only, for CPython 3.11 on aarch64 Linux.
AARCH64 = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp"]
for tag in ("manylinux_2_28_aarch64", "manylinux2014_aarch64", "linux_aarch64"):
    AARCH64 += ["--platform", tag]


@pytest.fixture(scope="module")
def arm64_base(docker_engine: engine.Engine) -> str:
    """The emulator registered and the aarch64 stand-in base loaded (tools/standin_arm64.sh)."""
    script = REPO / "tools" / "standin_arm64.sh"
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=1200)
    if result.returncode != 0:
        pytest.fail(f"could not make the aarch64 stand-in:\n{result.stderr[-3000:]}")
    return ARM64_BASE


@pytest.fixture(scope="module")
def arm64_wheelhouse() -> Path:
    """MindSpore and a project's requirements as aarch64 wheels, cached by what was asked."""
    spec = [PIN, "numpy<2", "pyyaml", "pillow", "tqdm", *SWEEPS]
    digest = hashlib.sha256(" ".join(spec + AARCH64).encode()).hexdigest()[:10]
    dest = CACHE / f"wheelhouse-mindspore-aarch64-{digest}"
    if not (dest / ".complete").exists():
        dest.mkdir(parents=True, exist_ok=True)
        download = [sys.executable, "-m", "pip", "download", "--quiet", *AARCH64, "--dest"]
        subprocess.run([*download, str(dest), *spec], check=True)
        (dest / ".complete").touch()
    return dest


@pytest.fixture
def emulator_restored() -> Iterator[None]:
    """Whatever a test does to qemu-aarch64's registration, it is back afterwards."""
    yield
    if not BINFMT.exists():
        subprocess.run(["update-binfmts", "--enable", "qemu-aarch64"], check=True)
    BINFMT.write_text("1")
    assert BINFMT.read_text().startswith("enabled")


def _tag(project: Path) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=project, capture_output=True, text=True
    ).stdout.strip()
    return f"{project.name}:ascend-{commit}"


def test_an_ascend_image_is_built_for_aarch64_and_smoke_tested_by_emulation(
    tmp_path: Path,
    docker_engine: engine.Engine,
    arm64_base: str,
    arm64_wheelhouse: Path,
    shared_images: set[str],
    created: None,
) -> None:
    """`created` removes what the build left besides the shared dependency image: the
    classic builder keeps the pip stage's image (1.5 GB here) as an untagged image."""
    project = committed_project(
        Options("armtest", framework="mindspore", target="ascend"), tmp_path
    )
    assert read_record(project).image_arch("ascend") == "aarch64"  # the default, not asked for
    tag = _tag(project)
    try:
        result = gen(
            *("image", "build", "--target", "ascend", "--base-image", arm64_base),
            *("--wheelhouse", str(arm64_wheelhouse), "--build-arg", f"FRAMEWORK={PIN}"),
            cwd=project,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        share(docker_engine, shared_images, result.stdout)
        assert "building for aarch64 on a x86_64 host, by qemu-aarch64" in result.stdout
        image = docker_engine.image(tag)
        assert image is not None
        # The engine's record and gen's label both say aarch64 (Docker calls it arm64).
        assert image.architecture == "arm64"
        assert image.labels["io.train-template.arch"] == "aarch64"
        machine = docker_engine.run(
            engine.ContainerSpec(
                tag, ["python", "-c", "import platform; print(platform.machine())"]
            ),
            timeout_s=300,
            on_line=lambda line: None,
        )
        assert machine.exit_code == 0 and machine.log[-1] == "aarch64", machine.log[-5:]

        result = gen("image", "smoke", "--target", "ascend", "--timeout", "900", cwd=project)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert f"{tag} is an aarch64 image: it runs here by qemu-aarch64" in result.stdout
        assert "env: python 3.11" in result.stdout and "mindspore 2.10.0" in result.stdout
        outputs = project / "output" / "smoke-ascend"
        assert len((outputs / "predictions.jsonl").read_text().splitlines()) == 10

        # gen doctor on this x86_64 host: the image is not for its CPU.
        subject = doctor_subject(project, read_record(project), "ascend", "/")
        found = doctor.image_cpu(subject)
        assert found.status == FAIL
        assert found.found == f"{tag} is built for aarch64; this host is x86_64"
        assert found.fix.startswith("gen image build --target ascend --arch x86_64")
    finally:
        assert not docker_engine.remove_images({tag}), "the code image must go"


def test_without_an_emulator_or_with_a_base_of_another_cpu_the_build_stops_at_once(
    tmp_path: Path, docker_engine: engine.Engine, arm64_base: str, emulator_restored: None
) -> None:
    """One line each, exit 1, before anything is built or logged."""
    project = committed_project(Options("noemu", framework="mindspore", target="ascend"), tmp_path)
    images = docker_engine.image_ids()
    build = ("image", "build", "--target", "ascend", "--base-image")

    result = gen(*build, STANDIN_BASE, cwd=project)
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"error: {STANDIN_BASE} is an image for x86_64, and this build is for aarch64: "
        f"pull the aarch64 one (docker pull --platform linux/arm64 {STANDIN_BASE})"
    )
    assert result.stderr.count("\n") == 1

    BINFMT.write_text("0")  # registered, disabled
    result = gen(*build, arm64_base, cwd=project)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {BINFMT} is registered disabled")
    assert "update-binfmts --enable qemu-aarch64" in result.stderr

    BINFMT.write_text("-1")  # not registered at all
    result = gen(*build, arm64_base, cwd=project)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "error: an aarch64 image needs aarch64 programs run on this x86_64 host, and no "
        f"emulator is registered ({BINFMT} is missing): apt-get install -y qemu-user-static "
        "binfmt-support"
    )
    assert "or pass --arch x86_64" in result.stderr
    assert not (project / "logs").exists() and docker_engine.image_ids() == images
