"""An engine or a registry that goes away mid-operation: every engine call, a build and a
push each end in one `error:` line and a non-zero exit, with nothing left behind.

The engine stopped here is a private dockerd (tests/integration/private_daemon.py),
never the shared one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from generator import engine
from generator.errors import EngineUnavailable
from generator.image.context import pack
from generator.render.options import Options
from tests.integration.conftest import STANDIN_BASE, commit_all, committed_project
from tests.integration.private_daemon import PrivateDaemon
from tests.integration.registry import LocalRegistry

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def private(docker_engine: engine.Engine) -> Iterator[PrivateDaemon]:
    """A private dockerd holding the stand-in base; removed with all it kept."""
    daemon = PrivateDaemon()
    try:
        daemon.start().load(STANDIN_BASE)
        yield daemon
    finally:
        daemon.destroy()


@pytest.fixture
def running(private: PrivateDaemon) -> PrivateDaemon:
    return private.start()


def _gen(project: Path, daemon: PrivateDaemon, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "generator", *args],
        cwd=project,
        env={**os.environ, **daemon.env, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _quiet(*_: object) -> None:
    """Progress nobody reads."""


def _one_error(process: subprocess.Popen, timeout_s: float) -> str:
    """The one `error:` line a failed gen printed first on stderr; what follows it is
    indented detail (what the server said), never a traceback or a second error."""
    out, err = process.communicate(timeout=timeout_s)
    assert process.returncode == 1, out[-2000:] + err[-2000:]
    first, *rest = err.strip().splitlines()
    assert first.startswith("error: ") and all(line.startswith("  ") for line in rest), err
    return first


def test_every_engine_call_turns_a_stopped_daemon_into_one_error(
    running: PrivateDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", running.host)
    docker = engine.connect()
    assert docker.image(STANDIN_BASE) is not None
    running.stop()
    log = (tmp_path / "build.log").open("w")
    calls: dict[str, Callable[[], object]] = {
        "image": lambda: docker.image(STANDIN_BASE),
        "require_image": lambda: docker.require_image(STANDIN_BASE, ""),
        "image_ids": docker.image_ids,
        "container_ids": docker.container_ids,
        "remove_images": lambda: docker.remove_images({"nosuch:1"}),
        "tag": lambda: docker.tag(STANDIN_BASE, "x/y", "z"),
        "runtimes": docker.runtimes,
        "build": lambda: docker.build(
            pack("FROM scratch\n", {}), engine.BuildSpec("x:y"), log, _quiet
        ),
        "run": lambda: docker.run(
            engine.ContainerSpec(STANDIN_BASE, ["true"]), timeout_s=5, on_line=_quiet
        ),
        "push": lambda: docker.push(STANDIN_BASE, "127.0.0.1:9/x:y", auth=None, on_progress=_quiet),
        "pull": lambda: docker.pull("127.0.0.1:9/x:y", auth=None, on_progress=_quiet),
    }
    for name, call in calls.items():
        with pytest.raises(
            EngineUnavailable, match="^lost the Docker engine (while|during)"
        ) as caught:
            call()
        assert "\n" not in str(caught.value), name


def test_daemon_stopped_mid_build(running: PrivateDaemon, tmp_path: Path) -> None:
    project = committed_project(Options("midbuild", target="cuda"), tmp_path)
    dockerfile = project / "Dockerfile.cuda"
    # A step that lasts: the daemon is stopped while it runs.
    text = dockerfile.read_text().replace(
        "FROM python AS deps\n", "FROM python AS deps\nRUN sleep 300\n"
    )
    dockerfile.write_text(text)
    commit_all(project, "a slow step")
    log = project / "logs" / "image-cuda.log"
    build = _gen(
        project, running, "image", "build", "--target", "cuda", "--base-image", STANDIN_BASE
    )
    _wait_for(lambda: log.is_file() and "RUN sleep 300" in log.read_text(), 120, "the slow step")
    running.stop()
    line = _one_error(build, timeout_s=60)
    assert line.startswith("error: lost the Docker engine during the build, at Step "), line
    assert ": RUN sleep 300: start dockerd again" in line
    # Started again, the engine runs no container and holds no new name from that build
    # (the steps that completed stay as untagged build cache, as after any docker build).
    # The interrupted step's own container is the classic builder's to remove as it shuts
    # down: on a loaded machine dockerd may exit first and keep it, stopped.
    running.start()
    assert running.docker("ps", "-q").stdout.strip() == b""
    for kept in running.docker("ps", "-aq").stdout.split():
        state = running.docker("inspect", "-f", "{{.State.Status}}", kept.decode())
        assert state.stdout.strip() in (b"exited", b"created", b"dead"), state.stdout
    tags = running.docker("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    assert [tag for tag in tags if tag != b"<none>:<none>"] == [STANDIN_BASE.encode()]


def test_registry_gone_mid_push(
    running: PrivateDaemon, tmp_path: Path, registry: LocalRegistry
) -> None:
    project = committed_project(Options("midpush", target="cuda"), tmp_path)
    commit = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=project, capture_output=True, text=True
    ).stdout.strip()
    # The image to push: any image under the tag gen image build would have made.
    running.docker("tag", STANDIN_BASE, f"midpush:cuda-{commit}")
    push = _gen(
        project,
        running,
        *("image", "push", "--target", "cuda", "--registry", f"{registry.host}/team"),
        **registry.login,
    )
    uploads = registry.root / "storage" / "docker" / "registry" / "v2" / "repositories"
    _wait_for(lambda: any(uploads.rglob("_uploads/*")), 60, "the first layer upload")
    registry.stop()
    line = _one_error(push, timeout_s=180)
    assert line.startswith(f"error: the registry {registry.host} does not answer"), line
    # No registry tag, no record: the push left nothing behind.
    tags = running.docker("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.decode()
    assert registry.host not in tags
    assert not (project / "logs" / "image-cuda.pushed").exists()
