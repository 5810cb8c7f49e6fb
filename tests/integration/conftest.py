"""A real Docker engine for the integration tests: started if none answers, never mocked.

Nothing can be pulled here, so the base image is a local stand-in (Debian 12 with
Python 3.11, built by tools/docker_up.sh) and the frameworks come from wheelhouses
made from the local torch and mindspore wheels. In CI these tests must run: a
missing engine fails them, it never skips them.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from generator import engine
from generator.image.build import KEY_LABEL
from generator.render.options import Options
from generator.render.project import render
from tests.conftest import gen
from tests.integration.gitservers import GitDaemon, GitHttp, bare_repo
from tests.integration.netns import Hosts, two_hosts
from tests.integration.registry import LocalRegistry

REPO = Path(__file__).resolve().parents[2]
STANDIN_BASE = os.environ.get("STANDIN_BASE", "train-template/standin-base:bookworm-py311")
CACHE = Path(os.environ.get("TRAIN_TEMPLATE_CACHE", "/var/tmp/train-template-cache"))
# What the tests install in images: the CPU wheels this machine has.
PINS = {"pytorch": "torch==2.13.0", "mindspore": "mindspore==2.10.0"}
# What each generated requirements.txt asks for (MindSpore's ops need NumPy 1.x).
NUMPY = {"pytorch": "numpy", "mindspore": "numpy<2"}
# What a project's requirements-sweep.txt adds (every project with sweep.py), and a PyTorch
# project's requirements-hf.txt when config.yaml uses Hugging Face models.
SWEEPS = ("optuna>=4",)
EXTRAS = {"pytorch": (*SWEEPS, "transformers>=5", "peft", "safetensors"), "mindspore": SWEEPS}


@pytest.fixture(scope="session")
def docker_engine() -> engine.Engine:
    """The engine, started by tools/docker_up.sh when nothing answers."""
    result = subprocess.run(
        ["bash", str(REPO / "tools" / "docker_up.sh")], capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0:
        pytest.fail(f"could not start a Docker engine:\n{result.stderr[-3000:]}")
    return engine.connect()


def wheelhouse_for(framework: str) -> Path:
    """Wheels for the framework pin and the project's requirements (numpy, pyyaml, pillow,
    tqdm; requirements-sweep.txt's, and PyTorch's requirements-hf.txt), so that the image
    builds offline; cached by what was asked for."""
    spec = [PINS[framework], NUMPY[framework], "pyyaml", "pillow", "tqdm", *EXTRAS[framework]]
    digest = hashlib.sha256(" ".join(spec).encode()).hexdigest()[:10]
    dest = CACHE / f"wheelhouse-{framework}-{digest}"
    done = dest / ".complete"
    if not done.exists():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(dest), *spec],
            check=True,
        )
        done.touch()
    return dest


@pytest.fixture(scope="session")
def wheelhouses() -> dict[str, Path]:
    """Per framework, a directory of wheels: the framework pin and the requirements."""
    return {framework: wheelhouse_for(framework) for framework in PINS}


@pytest.fixture(scope="session")
def shared_images(docker_engine: engine.Engine) -> Iterator[set[str]]:
    """Dependency images that tests build once and share (``share``). Like the wheelhouses,
    they are kept for the next run: gen names each by a key of what it is made of (base,
    Dockerfile, wheels, CPU), so a later run reuses one only while nothing in it changed,
    and still builds the code image and runs it. Dependency images this session did not use
    (a key that changed) are removed with the layers they were built from, not the base
    they began from."""
    kept: set[str] = set()
    yield kept
    found = [docker_engine.image(i) for i in docker_engine.image_ids()]
    stale = {i.id for i in found if i and KEY_LABEL in i.labels} - kept
    built = ancestry(docker_engine, stale) - ancestry(docker_engine, kept)
    # Not the images those builds began from (no parent: imported, as the stand-in bases
    # are, or pulled): a session that ran only the aarch64 build would take the x86_64
    # stand-in base away with the x86_64 dependency images it left unused.
    docker_engine.remove_images({i for i in built if _parent(docker_engine, i)})


def _parent(docker_engine: engine.Engine, image_id: str) -> str:
    image = docker_engine.image(image_id)
    return image.parent if image else ""


def ancestry(docker_engine: engine.Engine, ids: set[str]) -> set[str]:
    """The images ``ids`` and every local image a classic build made them from."""
    found = set()
    for image_id in ids:
        while image_id and image_id not in found:
            found.add(image_id)
            image_id = _parent(docker_engine, image_id)
    return found


def share(docker_engine: engine.Engine, shared_images: set[str], stdout: str) -> str:
    """Keep the dependency image a `gen image build` printed for later tests; its name."""
    ref = re.search(r"^dependency image (\S+):", stdout, re.M)
    assert ref, stdout[-2000:]
    image = docker_engine.require_image(ref.group(1), "gen image build printed it")
    shared_images.add(image.id)
    return ref.group(1)


@pytest.fixture
def created(docker_engine: engine.Engine, shared_images: set[str]) -> Iterator[None]:
    """Remove every image a test built (build-cache layers too) but the shared dependency
    images; check no container is left."""
    images, containers = docker_engine.image_ids(), docker_engine.container_ids()
    yield
    # `docker run --rm` returns when the container exits; the engine removes it just after.
    deadline = time.monotonic() + 30
    left = docker_engine.container_ids() - containers
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = docker_engine.container_ids() - containers
    kept = ancestry(docker_engine, shared_images)
    stuck = docker_engine.remove_images(docker_engine.image_ids() - images - kept)
    assert not left, f"containers left behind: {left}"
    assert not stuck, f"images the test could not remove: {stuck}"


def committed_project(options: Options, dest: Path) -> Path:
    """A generated project in a git repository with one commit, as users build it:
    the image tag and labels carry the commit."""
    project = render(options, dest)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    commit_all(project, "generated")
    return project


def commit_all(project: Path, message: str) -> None:
    for cmd in (
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message],
    ):
        subprocess.run(["git", *cmd], cwd=project, check=True)


def build_image(
    target: str, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`gen image build --target TARGET ARGS` in the project at cwd, env added."""
    return gen("image", "build", "--target", target, *args, cwd=cwd, env=env)


def build_args(framework: str, wheelhouse: Path, target: str = "cuda") -> list[str]:
    """Build the project's own Dockerfile on the stand-in base, offline; gen finds the
    stand-in's Python itself. A PyTorch Ascend image is built without torch_npu, on purpose
    (NO_NPU): there is none for the stand-in's CPU."""
    extra = NO_NPU if (framework, target) == ("pytorch", "ascend") else []
    return [*small_build_args(wheelhouse, PINS[framework]), *extra]


# An Ascend PyTorch image without torch_npu must be asked for: a failed install fails.
NO_NPU = ["--build-arg", "NPU_EXTRA="]


# A dependency image in seconds: two small wheels instead of a framework.
SMALL_PIN = "six"
SMALL_REQUIREMENTS = "pyyaml\n"


@pytest.fixture(scope="session")
def small_wheelhouse(
    wheelhouses: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """six, pyyaml and packaging, plus links to the torch and mindspore wheels, which
    nothing a small build asks for needs: they must never be sent."""
    dest = tmp_path_factory.mktemp("small-wheelhouse")
    for source in [*wheelhouses["mindspore"].glob("*.whl"), *wheelhouses["pytorch"].glob("*.whl")]:
        wanted = source.name.split("-")[0] in ("six", "pyyaml", "packaging", "torch", "mindspore")
        if wanted and not (dest / source.name).exists():
            (dest / source.name).symlink_to(source)
    return dest


def small_project(options: Options, dest: Path) -> Path:
    """A committed project whose image needs only the small wheelhouse: its requirements
    small, and no sweep.py (whose image would carry Optuna)."""
    project = committed_project(options, dest)
    (project / "requirements.txt").write_text(SMALL_REQUIREMENTS)
    (project / "sweep.py").unlink()
    commit_all(project, "small requirements, no sweeps")
    return project


def small_build_args(wheelhouse: Path, pin: str = SMALL_PIN) -> list[str]:
    """Build on the stand-in base, offline, with ``pin`` as the framework: for this host's
    x86_64 CPU (an Ascend project's images are for aarch64 unless told)."""
    return [
        "--arch",
        "x86_64",
        "--base-image",
        STANDIN_BASE,
        "--wheelhouse",
        str(wheelhouse),
        "--build-arg",
        f"FRAMEWORK={pin}",
    ]


# -- git servers and an image registry on 127.0.0.1, for gen push and gen image push --------
@dataclass
class GitServers:
    """A bare-repository root served twice: by git daemon and by smart HTTP with a token."""

    root: Path
    token: str
    daemon: GitDaemon
    http: GitHttp

    def bare(self, name: str) -> Path:
        return bare_repo(self.root, name)


@pytest.fixture
def git_servers(tmp_path: Path) -> Iterator[GitServers]:
    """Both servers, started for one test and stopped after it."""
    root = tmp_path / "served"
    root.mkdir()
    # 40 hex digits: a Gitea (OpenI) access token has that shape.
    token = secrets.token_hex(20)
    servers = GitServers(root, token, GitDaemon(root).start(), GitHttp(root, token).start())
    try:
        yield servers
    finally:
        servers.daemon.stop()
        servers.http.stop()


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    """A distribution registry on 127.0.0.1 demanding a login (tools/registry_up.sh installs it)."""
    result = subprocess.run(
        ["bash", str(REPO / "tools" / "registry_up.sh")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        pytest.fail(f"could not install docker-registry:\n{result.stderr[-3000:]}")
    binary = result.stdout.strip().splitlines()[-1]
    server = LocalRegistry(binary, tmp_path / "registry", "pusher", secrets.token_urlsafe(18))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    """Two network namespaces as two hosts (root only), removed after the test."""
    with two_hosts() as pair:
        yield pair
