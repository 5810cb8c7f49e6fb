"""Shared fixtures: an isolated HOME for every test, and project rendering helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.render.project import render
from tests.golden import UPDATE_FLAG, Golden

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        UPDATE_FLAG,
        action="store_true",
        help="rewrite the golden files from what the code renders now (then review the diff)",
    )


def pytest_itemcollected(item: pytest.Item) -> None:
    """How the suite runs side by side (pytest-xdist, ``-n 2 --dist loadgroup``, as
    tools/test.sh runs it): one worker takes a whole group, in order. Every test on the Docker
    engine is one group (they share the dependency images, and each removes what appeared
    during it); the tests sharing the full 12-epoch runs are one; every other file is its own
    (its module fixtures are made once). Marked as each test is collected: pytest-xdist reads
    the groups when collection ends."""
    if item.get_closest_marker("docker"):
        group = "engine"
    elif "full_run" in getattr(item, "fixturenames", ()):
        group = "full_run"
    else:
        group = item.nodeid.split("::", 1)[0]
    item.add_marker(pytest.mark.xdist_group(group))


# The order the groups are handed out in (tools/test.sh turns off pytest-xdist's own, by test
# count): the longest first, so that no worker starts a long group while the other runs out of
# work. The engine's group is the longest (the images, built in turn), then the directories by
# what their tests cost.
BY_COST = ("tests/training/", "tests/integration/", "tests/template/", "tests/golden/")


def _cost_rank(item: pytest.Item) -> int:
    if item.get_closest_marker("docker"):
        return 0
    ranks = (rank for rank, prefix in enumerate(BY_COST, 1) if item.nodeid.startswith(prefix))
    return next(ranks, len(BY_COST) + 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest groups first (a stable sort: each file's tests keep their order)."""
    items.sort(key=_cost_rank)


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """The requesting module's golden files (its GOLDEN_CASES): ``golden.check(case, text)``."""
    module = request.module
    return Golden(
        suite=module.__name__.rpartition(".")[2],
        cases=tuple(module.GOLDEN_CASES),
        update=bool(request.config.getoption(UPDATE_FLAG)),
    )


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Cookiecutter writes replay files and reads config under HOME: keep the user's out of it."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("COOKIECUTTER_CONFIG", raising=False)
    return home


def skip_outside_ci(reason: str) -> None:
    """Skip a test that needs what this checkout lacks (git history); in CI (CI=true), where
    the checkout is a full clone, fail instead: CI runs every test."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI runs every test: clone the repository with its history)")
    pytest.skip(reason)


RenderProject = Callable[..., Path]


def render_once(factory: pytest.TempPathFactory, options: Options) -> Path:
    """Render a project for a module- or session-scoped fixture, whose tests share it (each run
    writes into its own output): the autouse isolated HOME does not apply there yet."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(factory.mktemp("home")))
        patch.delenv("COOKIECUTTER_CONFIG", raising=False)
        return render(options, factory.mktemp(options.project))


@pytest.fixture
def render_project(tmp_path: Path) -> RenderProject:
    """Render a project with `gen new`'s library call: ``render_project(framework=...)``."""

    def _render(project: str = "demo", **options: object) -> Path:
        return render(Options(project=project, **options), tmp_path)  # type: ignore[arg-type]

    return _render


def gen(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real `gen` command, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
