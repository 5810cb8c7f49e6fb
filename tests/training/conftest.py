"""Fixtures for the training tests: the digits on disk, rendered PyTorch and MindSpore projects."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.render.sample_data import write_sample_dataset
from tests.conftest import render_once
from tests.training.runs import train


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample digits as uncompressed idx files in OpenI's train/ and test/ layout.

    Uncompressed on purpose: the shipped copy (.gz) is what pytorch_project reads.
    """
    root = tmp_path_factory.mktemp("digits")
    write_sample_dataset(root, gz=False)
    return root


@pytest.fixture(scope="session")
def pytorch_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PyTorch project for a generic machine, rendered once: its ./data holds the digits.

    Tests share it read-only: each run writes into its own --train_url.
    """
    return render_once(
        tmp_path_factory, Options(project="demo", framework="pytorch", platform="generic")
    )


@pytest.fixture(scope="session")
def mindspore_projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A MindSpore project per training loop ("model", "custom"), generic machine, rendered once.

    Like pytorch_project: ./data holds the digits, tests share them read-only.
    """
    return {
        loop: render_once(
            tmp_path_factory,
            Options(
                project=f"ms_{loop}",
                framework="mindspore",
                target="ascend",
                platform="generic",
                ms_train_loop=loop,
            ),
        )
        for loop in ("model", "custom")
    }


@pytest.fixture(scope="session")
def full_run(
    pytorch_project: Path, mindspore_projects: dict[str, Path], tmp_path_factory
) -> Callable[[str], Path]:
    """``full_run(name)``: the output of one run of the shipped config (12 epochs on the
    project's ./data, every checkpoint kept) for "pytorch", "model" or "custom" (MindSpore's
    loops); each is run once, when first asked for, and shared."""
    projects = {"pytorch": pytorch_project, **mindspore_projects}
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            output = tmp_path_factory.mktemp(f"full-{name}")
            # More than the shipped 12 epochs: the tests compare and hash every epoch's.
            done[name] = train(projects[name], output, "--keep_checkpoints", "100")
        return done[name]

    return get


@pytest.fixture(scope="session")
def imagefolder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits as RGB 32x32 PNGs, one folder per class, in train/ and test/."""
    from tests.training.byo import write_imagefolder

    return write_imagefolder(tmp_path_factory.mktemp("imagefolder"))


@pytest.fixture(scope="session")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits' 64 features and label as train.csv and test.csv."""
    from tests.training.byo import write_csv

    return write_csv(tmp_path_factory.mktemp("table"))


@pytest.fixture(scope="session")
def numpy2_site() -> Path:
    """A directory holding NumPy 2 (pip install --target), to put before this environment's
    NumPy 1 on PYTHONPATH: what a MindSpore project meets in PyTorch's environment. Made once
    a machine, kept in the cache the dependency images use."""
    cache = Path(os.environ.get("TRAIN_TEMPLATE_CACHE", "/var/tmp/train-template-cache"))
    site = cache / "numpy2-site"
    if not any(site.glob("numpy-2.*.dist-info")):
        tmp = cache / f".numpy2-site.{os.getpid()}"
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "--no-deps", "--target", str(tmp), "numpy>=2,<3"], check=True)
        if site.exists():
            import shutil

            shutil.rmtree(site)
        os.replace(tmp, site)
    return site
