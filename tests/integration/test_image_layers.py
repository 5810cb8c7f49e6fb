"""The dependency image on a real engine: reused across code edits, rebuilt when the
requirements change, sent only the wheels it needs; the Python found in the base before
the build; the Ascend user's ids from build arguments; the davinci_manager group."""

from __future__ import annotations

import io
import os
import re
import secrets
import subprocess
import tarfile
from pathlib import Path

import pytest

from generator import engine
from generator.devices.host import detect
from generator.image.build import KEY_LABEL
from generator.render.options import Options
from tests.conftest import gen
from tests.integration.conftest import (
    NO_NPU,
    STANDIN_BASE,
    build_image,
    commit_all,
    small_build_args,
    small_project,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]
MB = 1e6


def _build(project: Path, wheels: Path, target: str, *extra: str) -> subprocess.CompletedProcess:
    result = gen(
        "image", "build", "--target", target, *small_build_args(wheels), *extra, cwd=project
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


def _built(stdout: str) -> tuple[str, str, str]:
    """(dependency image, how it came about, code image tag) from gen's output."""
    deps = re.search(r"^dependency image (\S+): (.+)$", stdout, re.M)
    code = re.search(r"^built (\S+) ", stdout, re.M)
    assert deps and code, stdout
    return deps.group(1), deps.group(2), code.group(1)


def _mb(text: str) -> float:
    """The first size gen printed after "context" in ``text``, in MB."""
    number, unit = re.search(r"context ([\d.]+) (kB|MB)", text).groups()
    return float(number) / (1000 if unit == "kB" else 1)


def _run(docker_engine: engine.Engine, tag: str, *command: str) -> str:
    """What ``command`` prints in the image, one line (env.sh's notes on stderr aside)."""
    result = docker_engine.run(
        engine.ContainerSpec(tag, list(command)), timeout_s=120, on_line=lambda _: None
    )
    assert result.exit_code == 0, result.log
    (line,) = [line for line in result.log if not line.startswith("env.sh: ")]
    return line


def test_code_edits_reuse_the_dependency_image_and_requirement_edits_rebuild_it(
    tmp_path: Path, docker_engine: engine.Engine, small_wheelhouse: Path, created: None
) -> None:
    project = small_project(Options("layers", target="cuda"), tmp_path)
    wheelhouse_mb = sum(p.stat().st_size for p in small_wheelhouse.iterdir()) / MB
    assert wheelhouse_mb > 900  # the torch and mindspore wheels, which nothing here needs

    dry = build_image(
        "cuda",
        *small_build_args(small_wheelhouse),
        "--dry-run",
        cwd=project,
    )
    assert dry.returncode == 0, dry.stderr
    key = re.search(r"^# dependency key: ([0-9a-f]{64})$", dry.stdout, re.M).group(1)
    assert f"# python: python3 3.11 (python3 in {STANDIN_BASE})" in dry.stdout
    assert ": sends 2 file(s)," in dry.stdout  # six and pyyaml, of five
    assert "# step 2 of 2: code image layers:cuda-" in dry.stdout
    assert not (project / "logs").exists()

    cold = _build(project, small_wheelhouse, "cuda")
    deps_ref, how, first_tag = _built(cold.stdout)
    assert deps_ref == f"train-template/deps:{key[:16]}" and how.startswith("built in ")
    assert _mb(how) < 5  # not the 1 GB wheelhouse
    deps = docker_engine.require_image(deps_ref, "just built")
    assert deps.labels[KEY_LABEL] == key
    assert _run(docker_engine, first_tag, "python", "-c", "import six, yaml; print('ok')") == "ok"

    # A code edit: the dependency image is reused, the code build sends kilobytes.
    train = project / "train.py"
    train.write_text(train.read_text() + "\n# tuned\n")
    commit_all(project, "tune")
    warm = _build(project, small_wheelhouse, "cuda")
    assert _built(warm.stdout)[:2] == (deps_ref, "reused")
    assert _mb(warm.stdout.split("\nbuilt ", 1)[1]) < 1  # about 0.5 MB: the code alone
    second_tag = _built(warm.stdout)[2]
    assert docker_engine.require_image(deps_ref, "reused").id == deps.id
    assert docker_engine.require_image(second_tag, "built").id != docker_engine.image(first_tag).id
    log = (project / "logs" / "image-cuda.log").read_text()
    assert "pip install" not in log and f"FROM {deps_ref}" in log
    assert _run(docker_engine, second_tag, "tail", "-n", "1", "/app/train.py") == "# tuned"

    # A requirements edit: a new key, a new dependency image with the new package.
    (project / "requirements.txt").write_text("pyyaml\npackaging\n")
    commit_all(project, "more requirements")
    edited = _build(project, small_wheelhouse, "cuda")
    new_ref, how, third_tag = _built(edited.stdout)
    assert new_ref != deps_ref and how.startswith("built in ")
    assert _run(docker_engine, third_tag, "python", "-c", "import packaging; print('ok')") == "ok"


def test_plain_docker_build_builds_the_whole_dockerfile_without_gen(
    tmp_path: Path, docker_engine: engine.Engine, small_wheelhouse: Path, created: None
) -> None:
    project = small_project(Options("plain", target="cuda"), tmp_path)
    # What a user without gen has: the project, its wheelhouse/ and the docker CLI.
    (project / "wheelhouse").mkdir()
    for wheel in small_wheelhouse.iterdir():
        if wheel.name.startswith(("six-", "pyyaml-")):
            (project / "wheelhouse" / wheel.name).write_bytes(wheel.read_bytes())
    args = [f"BASE_IMAGE={STANDIN_BASE}", "PYTHON=python3", "FRAMEWORK=six", "PIP_NO_INDEX=1"]
    result = subprocess.run(
        ["docker", "build", "-q", "-f", "Dockerfile.cuda", "-t", "plain:docker", "."]
        + [word for arg in args for word in ("--build-arg", arg)],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        _run(docker_engine, "plain:docker", "python", "-c", "import six, yaml; print('ok')") == "ok"
    )
    listing = _run(
        docker_engine,
        "plain:docker",
        "python",
        "-c",
        "import os; print(sorted(os.listdir('/app')))",
    )
    # output/: the launchers' default, made the run-as user's before the code arrives.
    # eval.py, predict.py and export.py beside train.py; samples/ for the smoke's predict.py;
    # sweep.yaml, and no sweep.py: this project has none (the Dockerfile's wildcard).
    assert listing == str(
        [
            *("config.yaml", "env.sh", "eval.py", "export.py", "launch.py", "output"),
            "predict.py",
            *("requirements.txt", "samples", "scripts", "src", "sweep.yaml", "train.py"),
        ]
    )
    image = docker_engine.require_image("plain:docker", "just built")
    assert image.labels["org.opencontainers.image.title"] == "plain" and not image.runs_as_root


def test_ascend_user_takes_its_ids_from_build_arguments(
    tmp_path: Path, docker_engine: engine.Engine, small_wheelhouse: Path, created: None
) -> None:
    project = small_project(Options("ids", target="ascend"), tmp_path)
    # torch_npu is not in the wheelhouse: the build fails rather than leave it out.
    failed = gen(
        "image", "build", "--target", "ascend", *small_build_args(small_wheelhouse), cwd=project
    )
    first = failed.stderr.splitlines()[0]
    assert failed.returncode == 1 and first.startswith("error: build failed at Step "), first
    assert "$NPU_EXTRA" in first and "torch_npu==" in failed.stderr
    default = _built(_build(project, small_wheelhouse, "ascend", *NO_NPU).stdout)[2]
    expected = "uid=1000(HwHiAiUser) gid=1000(HwHiAiUser) groups=1000(HwHiAiUser)"
    assert _run(docker_engine, default, "id", "HwHiAiUser") == expected
    ids = ("--build-arg", "HWHIAI_UID=1234", "--build-arg", "HWHIAI_GID=2345", "--tag", "ids:own")
    _build(project, small_wheelhouse, "ascend", *NO_NPU, *ids)
    expected = "uid=1234(HwHiAiUser) gid=2345(HwHiAiUser) groups=2345(HwHiAiUser)"
    assert _run(docker_engine, "ids:own", "id", "HwHiAiUser") == expected
    assert _run(docker_engine, "ids:own", "id", "-un") == "HwHiAiUser"


@pytest.mark.parametrize("target", ["cuda", "ascend"])
def test_a_modelarts_image_runs_as_ma_user_in_its_home(
    tmp_path: Path,
    docker_engine: engine.Engine,
    small_wheelhouse: Path,
    created: None,
    target: str,
) -> None:
    """ModelArts runs a custom image's command as ma-user (uid 1000) of ma-group (gid 100),
    in /home/ma-user: the launcher runs from there by its full path, writing /app/output."""
    options = Options("ma", target=target, platform="modelarts")
    project = small_project(options, tmp_path)
    extra = NO_NPU if target == "ascend" else []
    tag = _built(_build(project, small_wheelhouse, target, *extra).stdout)[2]
    assert (
        _run(docker_engine, tag, "id") == "uid=1000(ma-user) gid=100(ma-group) groups=100(ma-group)"
    )
    home = "cd && pwd && echo $HOME && stat -c %U:%G . /app /app/output"
    assert _lines(docker_engine, tag, home) == [
        *("/home/ma-user", "/home/ma-user"),
        *(["ma-user:ma-group"] * 3),
    ]
    dry = "cd && bash /app/scripts/run_8p.sh --dry-run --nproc 1 && touch /app/output/x"
    assert any("train.py" in line for line in _lines(docker_engine, tag, dry))


def _lines(docker_engine: engine.Engine, tag: str, script: str) -> list[str]:
    """What ``script`` prints in the image (env.sh's notes aside)."""
    result = docker_engine.run(
        engine.ContainerSpec(tag, ["bash", "-c", script]), timeout_s=120, on_line=lambda _: None
    )
    assert result.exit_code == 0, result.log
    return [line for line in result.log if not line.startswith("env.sh: ")]


def test_the_davinci_manager_group_joins_the_container(
    tmp_path: Path, docker_engine: engine.Engine, created: None
) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    manager = dev / "davinci_manager"
    manager.touch()
    os.chown(manager, -1, 4242)
    accelerators = detect(set(), dev)
    assert accelerators.groups == ["4242"] and accelerators.devices == []
    spec = accelerators.container(STANDIN_BASE, ["id", "-G"], volumes={}, user="1000:1000")
    result = docker_engine.run(spec, timeout_s=60, on_line=lambda _: None)
    assert result.exit_code == 0 and "4242" in result.log[0].split(), result.log


def test_a_base_without_python_stops_before_the_build(
    tmp_path: Path, docker_engine: engine.Engine, small_wheelhouse: Path, created: None
) -> None:
    # An image with one file and no interpreter at all.
    rootfs = io.BytesIO()
    with tarfile.open(fileobj=rootfs, mode="w") as archive:
        info = tarfile.TarInfo("etc/os-release")
        info.size = 9
        archive.addfile(info, io.BytesIO(b"ID=empty\n"))
    bare = f"train-template-test/nopython:{secrets.token_hex(4)}"
    subprocess.run(
        ["docker", "import", "-", bare], input=rootfs.getvalue(), check=True, capture_output=True
    )
    project = small_project(Options("nopy", target="cuda"), tmp_path)
    images, containers = docker_engine.image_ids(), docker_engine.container_ids()

    result = build_image(
        "cuda",
        *small_build_args(small_wheelhouse),
        "--base-image",
        bare,
        cwd=project,
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {bare} has no python3 to build with (python3 --version: ")
    assert "--build-arg PYTHON=python3.X" in line and "--catalog-entry" in line
    # Nothing was started: no log, no layer, no container.
    assert not (project / "logs").exists()
    assert docker_engine.image_ids() == images and docker_engine.container_ids() == containers
