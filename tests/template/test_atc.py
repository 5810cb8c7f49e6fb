"""scripts/atc.py names the chip as CANN's --soc_version rule says, from npu-smi's own output
as servers print it (recorded in tests/data/doctor, PROVENANCE.md): Ascend + the name on an
Atlas A2 (910B3, 910B4-1), the board's Chip Name and NPU Name on an Atlas A3 (9382, 9392).
An AIR file gets no --input_shape (its shapes and input names are its own); a chip it
cannot read is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import RenderProject

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"


def npu_smi(folder: Path, table: str, board: str | None = None) -> dict[str, str]:
    """PATH with an npu-smi that prints the recorded outputs: the device table for `info`,
    the board's for `info -t board -i N -c M`."""
    folder.mkdir(parents=True, exist_ok=True)
    board_text = f"cat '{DATA / board}'" if board else "echo 'Error: board info unsupported'"
    (folder / "npu-smi").write_text(
        "#!/bin/sh\n"
        f'if [ "$2" = "-t" ]; then echo "$@" > \'{folder}/asked\'; {board_text}; '
        f"else cat '{DATA / table}'; fi\n"
    )
    (folder / "npu-smi").chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}


def exported(folder: Path, suffix: str, name: str = "x") -> Path:
    """An exported model file and the sidecar export.py writes beside it."""
    model = folder / f"lenet_epoch2{suffix}"
    model.write_bytes(b"model")
    sidecar = {"file": model.name, "input": {"name": name, "shape": [1, 1, 28, 28]}}
    model.with_name(model.name + ".json").write_text(json.dumps(sidecar))
    return model


def atc(project: Path, *args: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "scripts/atc.py", *args],
        cwd=project,
        env=env or {**os.environ, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    ("table", "board", "soc"),
    [
        ("npu-smi-info-910b3.txt", None, "Ascend910B3"),
        ("npu-smi-info-910b4-1.txt", None, "Ascend910B4-1"),
        ("npu-smi-info-910b.txt", None, "Ascend910B2C"),
        ("npu-smi-info-a3-excerpt.txt", "npu-smi-board-a3-9382.txt", "Ascend910_9382"),
        ("npu-smi-info-a3-excerpt.txt", "npu-smi-board-a3-9392.txt", "Ascend910_9392"),
    ],
)
def test_the_soc_version_is_the_servers_own_by_canns_rule(
    render_project: RenderProject, tmp_path: Path, table: str, board: str | None, soc: str
) -> None:
    project = render_project(framework="mindspore", target="ascend", chip="910_93")
    air = exported(tmp_path, ".air")
    done = atc(project, str(air), env=npu_smi(tmp_path / "bin", table, board))
    assert done.returncode == 0, done.stderr
    # AIR: fixed shapes and the network's own input names, so no --input_shape.
    assert done.stdout == (
        f"atc --model={air} --framework=1 --output={tmp_path / 'lenet_epoch2'} "
        f"--soc_version={soc}\n"
    )
    assert done.stderr.startswith("note: AIR is deprecated in MindSpore")
    asked = tmp_path / "bin" / "asked"
    # An A3 (npu-smi info says only Ascend910) is asked for its first NPU's board.
    assert (asked.read_text().split() if board else None) == (
        ["info", "-t", "board", "-i", "0", "-c", "0"] if board else None
    )


def test_a_chip_it_cannot_read_is_one_line_never_a_guess(
    render_project: RenderProject, tmp_path: Path
) -> None:
    project = render_project(target="ascend")
    onnx = exported(tmp_path, ".onnx", "input")
    # The table of an A3 whose board query says nothing of its part.
    blank = atc(project, str(onnx), env=npu_smi(tmp_path / "a3", "npu-smi-info-a3-excerpt.txt"))
    assert blank.returncode == 2 and blank.stdout == ""
    assert blank.stderr == (
        "error: npu-smi info -t board -i 0 shows no Chip Name and NPU Name (an Atlas A3's "
        "Ascend910 and 93xx): give --soc_version, Chip Name_NPU Name (CANN's rule)\n"
    )
    (tmp_path / "odd.txt").write_text("| 0     XPU-7   | OK |\n")
    odd = atc(project, str(onnx), env=npu_smi(tmp_path / "odd", str(tmp_path / "odd.txt")))
    assert odd.returncode == 2 and odd.stderr == (
        "error: npu-smi info shows no NPU this script can read: give --soc_version\n"
    )
    air = exported(tmp_path, ".air")
    given = atc(project, str(air), "--soc_version", "Ascend910B4-1")
    assert given.returncode == 0 and given.stdout.endswith(" --soc_version=Ascend910B4-1\n")
    wrong = atc(project, str(air), "--soc_version", "910B4")
    assert wrong.returncode == 2 and "is not a chip name CANN takes" in wrong.stderr
    # An ONNX file onnx cannot read: one line, not onnx's traceback.
    broken = atc(project, str(onnx), "--soc_version", "Ascend910B3")
    assert broken.returncode == 2 and broken.stderr.startswith(
        f"error: {onnx} is not an ONNX model onnx can read ("
    )


def test_away_from_the_server_the_usual_name_is_printed_with_a_note_and_run_needs_the_name(
    render_project: RenderProject, tmp_path: Path
) -> None:
    project = render_project(framework="pytorch", target="ascend", chip="910_93")
    air = exported(tmp_path, ".air")
    printed = atc(project, str(air))
    assert printed.returncode == 0 and printed.stdout.endswith("--soc_version=Ascend910_9392\n")
    assert "note: no npu-smi here: --soc_version=Ascend910_9392 is" in printed.stderr
    run = atc(project, str(air), "--run")
    assert run.returncode == 2 and run.stderr.startswith(
        "error: no npu-smi here to read the chip's name: give --soc_version"
    )
