"""The built wheel carries the template, so `gen new` works outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from generator.project import REPO_ROOT_MARKERS, template_dir


def test_wheel_carries_the_template_and_gen_new_works_from_it(tmp_path: Path) -> None:
    repo = template_dir()
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(repo),
        ],
        check=True,
    )
    (wheel,) = wheels.glob("train_template-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
    for marker in REPO_ROOT_MARKERS:
        assert any(n.startswith(f"generator/_template/{marker}") for n in names), marker
    in_wheel = {n.split("generator/_template/", 1)[1] for n in names if "_template/" in n}
    in_repo = {
        str(p.relative_to(repo))
        for marker in REPO_ROOT_MARKERS
        for p in ([repo / marker] if (repo / marker).is_file() else (repo / marker).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert in_wheel == in_repo

    work = tmp_path / "work"
    work.mkdir()
    # Only the unpacked wheel on the path: the checkout must not be what is found.
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-c", "import generator.project as p; print(p.template_dir())"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == str(site / "generator" / "_template")
    result = subprocess.run(
        [sys.executable, "-m", "generator", "new", "demo", "--no-input", "--target", "ascend"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (work / "demo" / "train.py").is_file()
