"""The generated project's framework-free parts on a real Python 3.9 (Debian bullseye, as the
catalogue's 3.8/3.9 images are old): config, datasets, storage and uploads, the run record,
C2Net handling, the rank-table script, and the project's own framework-free tests.

The stand-in image is made as the bookworm one is (debootstrap, docker import) and kept in the
engine; the project is mounted read-only and run with networking off."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.render.project import render

IMAGE = os.environ.get("STANDIN_PY39", "train-template/standin-base:bullseye-py39-pil")
PACKAGES = "python3,python3-numpy,python3-yaml,python3-pytest,python3-pil"
# The project's tests that need no framework.
FRAMEWORK_FREE = (
    "test_config.py",
    "test_finder.py",
    "test_data.py",
    "test_once.py",
    "test_checkpoints.py",
    "test_uploads.py",
    "test_record.py",
    "test_sharding.py",
    "test_generate.py",
    "test_layout.py",
    "test_progress.py",
)


C2NET_MOUNT = """
import os, shutil
os.makedirs("/tmp/c/dataset")
shutil.make_archive("/tmp/c/dataset/MnistDataset", "zip", "data")
os.environ.update(DATA_DOWNLOAD_METHOD="MOUNT", LOCAL_DATASET_PATH="/tmp/c/dataset",
    DATASET_NEED_UNZIP="true", LOCAL_OUTPUT_PATH="/tmp/c/output", TRAIN_CACHE_DIR="/tmp/cache")
from src.scaffold import config
from src.scaffold.data import finder
from src.scaffold.data.readers import BUILTIN
from src.scaffold.storage import where as storage
from src.scaffold.backend import ProjectConfig
cfg = config.parse_config([], ProjectConfig)
where = storage.prepare(cfg.places())
splits = finder.splits(cfg.data, cfg.source(where.data), BUILTIN)
print(where.data, where.output, len(splits.train), os.path.isdir(where.data / "MnistDataset"))
"""


def _docker(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def bullseye(docker_engine) -> str:  # noqa: ANN001 (the engine fixture starts dockerd)
    """The Python 3.9 stand-in image, built once and kept in the engine."""
    if _docker("image", "inspect", IMAGE).returncode == 0:
        return IMAGE
    mirror = next(
        (
            line.split()[1]
            for p in Path("/etc/apt/sources.list.d").glob("*.sources")
            for line in p.read_text().splitlines()
            if line.startswith("URIs:")
        ),
        "http://deb.debian.org/debian",
    )
    with tempfile.TemporaryDirectory() as rootfs:
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={PACKAGES}",
                "bullseye",
                rootfs,
                mirror,
            ],
            check=True,
            capture_output=True,
            timeout=900,
        )
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            ["docker", "import", "-", IMAGE], stdin=tar.stdout, check=True, capture_output=True
        )
        assert tar.wait() == 0
    return IMAGE


def _run39(bullseye: str, project: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return _docker(
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        f"{project}:/p:ro",
        "-w",
        "/p",
        "-e",
        "PYTHONDONTWRITEBYTECODE=1",
        bullseye,
        *command,
    )


@pytest.mark.docker
@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_framework_free_parts_run_on_python_3_9(
    bullseye: str, tmp_path: Path, framework: str
) -> None:
    project = render(Options("demo", framework, "ascend", "openi"), tmp_path)
    imports = _run39(
        bullseye,
        project,
        "python3",
        "-c",
        "import sys; assert sys.version_info[:2] == (3, 9), sys.version\n"
        "from src import data\n"
        "from src.scaffold import config, Task\n"
        "from src.scaffold.data import finder, readers, sharding\n"
        "from src.scaffold.outputs import checkpoints, pretrained, record\n"
        "from src.scaffold.storage import c2net, obs, once, uploads, where\n"
        "from src.scaffold.backend import ProjectConfig\n"
        "argv = ['--data_url', 'data', '--train_url', '/tmp/out']\n"
        "cfg = config.parse_config(argv, ProjectConfig)\n"
        "splits = finder.splits(cfg.data, cfg.source(cfg.data_url), readers.BUILTIN)\n"
        "print(len(splits.train), len(splits.val), len(splits.test), cfg.epoch_size)",
    )
    assert imports.returncode == 0, imports.stderr[-3000:]
    assert imports.stdout.split() == ["1294", "144", "359", "12"]
    # A C2Net MOUNT job's staging without the c2net package: the zip unpacked in place.
    c2net = _run39(bullseye, project, "python3", "-c", C2NET_MOUNT)
    assert c2net.returncode == 0, c2net.stderr[-3000:]
    assert c2net.stdout.split() == ["/tmp/c/dataset", "/tmp/c/output", "1294", "True"]
    table = _run39(
        bullseye, project, "python3", "scripts/rank_table.py", "check", "rank_table_8p.json"
    )
    assert table.returncode == 0 and "8 rank(s)" in table.stdout, table.stderr
    tests = [f"checks/{name}" for name in FRAMEWORK_FREE]
    result = _run39(
        bullseye, project, "python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_an_older_python_gets_one_line(tmp_path: Path) -> None:
    # train.py's own check, as Python 3.7 would meet it: the version, not a SyntaxError.
    project = render(Options("demo"), tmp_path)
    code = "import sys; sys.version_info = (3, 7, 0); sys.version = '3.7.0'\n"
    code += "exec(open('train.py').read())"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "error: train.py needs Python 3.8 or newer; this is 3.7.0"
