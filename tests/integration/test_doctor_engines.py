"""`gen doctor`'s engine checks against real engines: a private dockerd offering an nvidia
runtime and holding the catalogue's base (everything ✓, exit 0), and the base image found
on the host, in a registry (with a login), or nowhere."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from generator import catalog, engine
from generator.doctor import host as doctor
from generator.render.options import Options
from generator.render.project import render
from generator.shipped.hostcheck import FAIL, OK
from tests.integration.conftest import STANDIN_BASE
from tests.integration.private_daemon import PrivateDaemon
from tests.integration.registry import LocalRegistry
from tests.unit.test_hostcheck import tree

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def gpu_engine(docker_engine: engine.Engine) -> Iterator[PrivateDaemon]:
    """A private dockerd that offers an `nvidia` runtime (runc under that name: doctor reads
    `docker info`, it starts nothing) and holds the stand-in as the catalogue's CUDA base.
    Its data root is a 64 GiB tmpfs: room for the image whatever this machine's disk holds."""
    daemon = PrivateDaemon(extra_args=("--add-runtime", "nvidia=/usr/sbin/runc"), data_size="64g")
    try:
        daemon.start().load(STANDIN_BASE)
        base = catalog.load().default("cuda", "pytorch").base
        daemon.docker("tag", STANDIN_BASE, base)
        yield daemon
    finally:
        daemon.destroy()


def test_a_host_that_can_run_the_job_passes_every_check(
    gpu_engine: PrivateDaemon, tmp_path: Path
) -> None:
    project = render(Options("demo"), tmp_path)
    root = tree(tmp_path / "host", {"proc/driver/nvidia/version": "nvidia-proc-version-open"})
    done = subprocess.run(
        [sys.executable, "-m", "generator", "doctor", "--root", root],
        cwd=project,
        env={**os.environ, **gpu_engine.env},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("✓ engine: Docker ")
    assert lines[1].startswith("✓ runtime: ") and "nvidia" in lines[1]
    assert lines[2].startswith("✓ disk: 64 GiB free in ")
    base = catalog.load().default("cuda", "pytorch").base
    assert lines[3] == f"✓ base image: {base} is on this host"
    assert "✓ NVIDIA driver: 565.57.01 >= 520.61.05 for CUDA 11.8" in lines
    assert lines[-2:] == [
        "– image base: demo:cuda-local is not built yet (gen image build --target cuda)",
        "– image CPU: this host's CPU is not read from --root",
    ]


def test_an_engine_without_room_for_the_image_fails_the_disk_check(tmp_path: Path) -> None:
    daemon = PrivateDaemon(data_size="2g")
    try:
        daemon.start()
        project = render(Options("demo"), tmp_path)
        done = subprocess.run(
            [sys.executable, "-m", "generator", "doctor"],
            cwd=project,
            env={**os.environ, **daemon.env},
            capture_output=True,
            text=True,
        )
    finally:
        daemon.destroy()
    assert done.returncode == 1, done.stdout + done.stderr
    # No base on it: the base's 10 GiB on top of the build's 20.
    disk = f"✗ disk: 2 GiB free in {daemon.root / 'data'}; needed: >= 30 GiB for the image; "
    assert disk + "fix: free space (docker system prune) or move the data root" in done.stdout


def test_the_runtime_a_target_needs_is_named(docker_engine: engine.Engine) -> None:
    info = docker_engine.info()
    for target, runtime in (("cuda", "nvidia"), ("ascend", "ascend")):
        result = doctor._runtime(target, info)
        assert result.status == FAIL and f"the {runtime} runtime" in result.needed


def test_the_base_image_here_in_a_registry_or_nowhere(
    docker_engine: engine.Engine, registry: LocalRegistry, tmp_path: Path
) -> None:
    assert doctor._base_image(docker_engine, STANDIN_BASE).status == OK
    remote = f"{registry.host}/doctor/base:1"
    subprocess.run(["docker", "tag", STANDIN_BASE, remote], check=True)
    login = ["docker", "login", "-u", registry.user, "--password-stdin", registry.host]
    subprocess.run(login, input=registry.password, text=True, check=True, capture_output=True)
    try:
        subprocess.run(["docker", "push", "-q", remote], check=True, capture_output=True)
    finally:
        subprocess.run(["docker", "rmi", remote], check=True, capture_output=True)
    # A client made after the login carries it, as gen does in a new process.
    fresh = engine.connect()
    pulled = doctor._base_image(fresh, remote)
    assert pulled.status == OK and "its registry has it" in pulled.found
    absent = f"{registry.host}/doctor/absent:1"
    nowhere = doctor._base_image(fresh, absent)
    # The registry's reason in a few words, not Docker's whole answer with its URLs.
    assert nowhere.status == FAIL and nowhere.found == (
        f"{absent} is neither here nor pullable (the registry has no such tag)"
    )
    assert registry.password not in nowhere.found
    unreachable = doctor._base_image(fresh, "127.0.0.1:1/doctor/base:1")
    assert unreachable.found == (
        "127.0.0.1:1/doctor/base:1 is neither here nor pullable (127.0.0.1:1 is not reachable)"
    )
