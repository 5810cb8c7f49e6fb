"""`gen image push` to a real registry on 127.0.0.1: one image built, pushed, pulled back,
and the reference recorded for the commands that use it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from generator import engine
from generator.render.options import Options
from tests.conftest import gen
from tests.integration.conftest import build_image, small_build_args, small_project
from tests.integration.gitservers import free_port
from tests.integration.registry import LocalRegistry

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _committed_project(tmp_path: Path) -> Path:
    # The small dependency image: pushing a framework's gigabyte tests nothing more.
    return small_project(Options("pushimg", framework="pytorch", target="cuda"), tmp_path)


def test_push_then_pull_back_by_digest(
    tmp_path: Path,
    docker_engine: engine.Engine,
    small_wheelhouse: Path,
    created: None,
    registry: LocalRegistry,
) -> None:
    project = _committed_project(tmp_path)
    namespace = f"{registry.host}/team"
    record = project / "logs" / "image-cuda.pushed"

    def push(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        result = gen("image", "push", "--target", "cuda", *args, cwd=project, env=env)
        assert registry.password not in result.stdout + result.stderr
        return result

    # Bad --registry values: one line, exit 2, before the engine is asked anything.
    for bad, why in [
        ("http://127.0.0.1:5000/team", "leave out the scheme"),
        ("127.0.0.1:5000", "is not HOST[:PORT]/NAMESPACE"),
        ("myteam/project", "needs a dot or a port"),
        ("bob@127.0.0.1:5000/team", "leave out the user"),
        ("127.0.0.1:5000/Team", "lowercase namespace"),
    ]:
        result = push("--registry", bad)
        assert result.returncode == 2 and why in result.stderr, (bad, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1

    result = push("--registry", namespace, env=registry.login)
    assert result.returncode == 1
    assert "build it first: gen image build --target cuda" in result.stderr

    built = build_image(
        "cuda",
        *small_build_args(small_wheelhouse),
        cwd=project,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    local_tag = re.search(r"^built (\S+) ", built.stdout, re.M).group(1)
    tag_part = local_tag.split(":", 1)[1]
    repository = f"{namespace}/pushimg"

    wrong = {**registry.login, "GEN_REGISTRY_PASSWORD": "not-the-password-4711"}
    result = push("--registry", namespace, env=wrong)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: the registry {registry.host} refused the credentials")
    assert "not-the-password-4711" not in result.stdout + result.stderr
    result = push("--registry", namespace)  # no login at all (HOME has no docker config)
    assert result.returncode == 1 and "refused the credentials" in result.stderr

    nowhere = f"127.0.0.1:{free_port()}/team"
    result = push("--registry", nowhere, env=registry.login)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: the registry {nowhere.split('/')[0]} does not answer")
    # Failed pushes leave no registry tag behind, and record nothing.
    assert docker_engine.image(f"{repository}:{tag_part}") is None
    assert not record.exists()

    result = push("--registry", namespace, env=registry.login)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    name = re.escape(repository)
    match = re.search(
        rf"^pushed {name}:{tag_part} as {name}@(sha256:[0-9a-f]{{64}})$", result.stdout, re.M
    )
    assert match, result.stdout[-2000:]
    assert "Pushed" in result.stdout
    # What gen job render takes as its default --image: the reference printed, one line.
    assert record.read_text() == f"{repository}:{tag_part}\n"
    assert f"recorded in {record}" in result.stdout
    assert not [p for p in record.parent.iterdir() if p.name.startswith(".")]

    # Gone from the host, back by digest: the very same image.
    original = docker_engine.image(local_tag)
    assert original is not None
    docker_engine.remove_images({original.id})
    assert docker_engine.image(local_tag) is None
    auth = {"username": registry.user, "password": registry.password}
    pulled = docker_engine.pull(
        f"{repository}@{match.group(1)}", auth=auth, on_progress=lambda _: None
    )
    assert pulled == original.id
