"""`gen doctor` on host trees made of real files (tests/data/doctor), for generated projects.

The engine checks have their own test with a real engine (tests/integration/test_doctor_engines.py);
here DOCKER_HOST names no engine, so that line is always the same ✗.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from generator.options import Options
from generator.project import render
from tests.unit.test_hostcheck import DATA, tree


def doctor(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_HOST": f"unix://{cwd}/no-engine.sock"}
    return subprocess.run(
        [sys.executable, "-m", "generator", "doctor", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def ascend_host(root: Path, driver: str, npu_smi: str) -> Path:
    """An Ascend server's files: devices, the driver's version.info, npu-smi."""
    tree(root, {"usr/local/Ascend/driver/version.info": driver})
    (root / "dev").mkdir()
    for name in ("davinci0", "davinci1", "davinci_manager", "devmm_svm", "hisi_hdc"):
        (root / "dev" / name).touch()
    script = root / "usr/local/sbin/npu-smi"
    script.parent.mkdir(parents=True)
    # npu-smi as it printed on that server (the real binary needs the real driver).
    script.write_text(f"#!/bin/sh\ncat '{DATA / npu_smi}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return root


@pytest.mark.parametrize(
    ("fixture", "line"),
    [
        ("nvidia-proc-version-open", "✓ NVIDIA driver: 565.57.01 >= 520.61.05 for CUDA 11.8"),
        (
            "nvidia-proc-version-closed",
            "✗ NVIDIA driver: 375.74 is older than CUDA 11.8 needs; needed: >= 520.61.05 "
            "(>= 450.80.02 with minor-version compatibility); fix: upgrade the host driver, or "
            "build on an older CUDA (gen image build --catalog-entry)",
        ),
    ],
)
def test_a_cuda_project_on_a_host_tree(tmp_path: Path, fixture: str, line: str) -> None:
    project = render(Options("demo"), tmp_path)
    root = tree(tmp_path / "host", {"proc/driver/nvidia/version": fixture})
    done = doctor(project, "--root", root)
    assert done.returncode == 1  # the engine, at least, is missing
    lines = done.stdout.splitlines()
    assert line in lines
    assert lines[0].startswith("✗ engine: ")
    assert "– GPU architecture: checked inside the image at start-up (torch's arch list)" in lines
    assert (
        "✓ entry files: train.py, eval.py, predict.py, export.py, launch.py, env.sh, config.yaml, "
        "scripts/run_1p.sh, scripts/run_8p.sh" in lines
    )
    assert "– rank table: no rank table for this target" in lines
    data = json.loads(doctor(project, "--root", root, "--json").stdout)
    marks = {"ok": "✓", "fail": "✗", "n/a": "–"}
    assert [f"{marks[c['status']]} {c['name']}: {c['found']}" for c in data] == [
        text.split("; needed: ")[0] for text in lines
    ]


@pytest.mark.parametrize(
    ("npu_smi", "chip_line"),
    [
        ("npu-smi-info-910b.txt", "✓ Ascend chip: npu-smi shows 910b"),
        (
            "npu-smi-info-910-excerpt.txt",
            "✗ Ascend chip: npu-smi shows 910; needed: a 910b (the project's --chip); fix: run "
            "on 910b servers, or gen update --set chip=910",
        ),
    ],
)
def test_an_ascend_project_on_a_server_tree(tmp_path: Path, npu_smi: str, chip_line: str) -> None:
    project = render(Options("demo", target="ascend"), tmp_path)
    root = ascend_host(tmp_path / "host", "ascend-driver-version.info-25.3.rc1", npu_smi)
    done = doctor(project, "--root", str(root))
    lines = done.stdout.splitlines()
    assert "✓ Ascend devices: davinci0, davinci1 and davinci_manager, devmm_svm, hisi_hdc" in lines
    assert f"✓ npu-smi: {root}/usr/local/sbin/npu-smi" in lines
    assert chip_line in lines
    assert "✓ rank table: rank_table_8p.json: 8 ranks" in lines
    # The project's image is CANN 8.0.0 (innerversion C20): the driver lists C19..C23.
    assert "✓ Ascend driver: 25.3.rc1 (V100R001C23) lists CANN 8.0.0 (V100R001C20)" in lines
    # PROJECT_DIR named from another directory: the same checks (the engine line names the
    # socket, which is per directory here).
    named = doctor(tmp_path, str(project), "--root", str(root))
    assert named.stdout.splitlines()[1:] == lines[1:]


def test_a_driver_that_does_not_list_the_images_cann(tmp_path: Path) -> None:
    project = render(Options("demo", target="ascend"), tmp_path)
    root = ascend_host(tmp_path / "host", "ascend-driver-version.info", "npu-smi-info-910b.txt")
    done = doctor(project, "--root", str(root))
    assert done.returncode == 1
    line = next(line for line in done.stdout.splitlines() if " Ascend driver: " in line)
    assert line.startswith(
        "✗ Ascend driver: 23.0.7 accepts [V100R001C29],[V100R001C30],[V100R001C13],[V100R001C15]; "
        "needed: a driver whose compatible_version lists CANN 8.0.0 (V100R001C20)"
    )


def test_no_driver_no_devices(tmp_path: Path) -> None:
    project = render(Options("demo", target="ascend"), tmp_path)
    (tmp_path / "empty").mkdir()
    done = doctor(project, "--root", str(tmp_path / "empty"))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert any(line.startswith("✗ Ascend devices: no /dev/davinci*; missing") for line in lines)
    assert any(line.startswith("✗ npu-smi: not found") for line in lines)
    assert "– Ascend chip: npu-smi is missing" in lines


def test_outside_a_project_the_target_is_asked_for(tmp_path: Path) -> None:
    done = doctor(tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        "error: outside a project, say which image: --target cuda or --target ascend\n"
    )
    done = doctor(tmp_path, "--target", "cuda", "--root", str(tmp_path))
    assert "– project: not in a project (pass PROJECT_DIR)" in done.stdout.splitlines()
    assert "✗ NVIDIA driver: no NVIDIA driver (no /proc/driver/nvidia/version)" in (
        done.stdout.split("; needed")[0] + "\n" + done.stdout
    )
