"""A damaged run directory never blocks recovery, in both frameworks: a truncated, empty or
altered newest checkpoint gives way to the newest intact one (one WARNING) and the run ends with
the weights of an unbroken one; none intact, or a damaged --resume PATH, is one line; a full
disk is one line, the earlier checkpoints intact, and the run resumes once there is space; under
two ranks the launcher's line names the rank and its reason."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from generator.render.options import Options
from tests.conftest import render_once
from tests.training.runs import (
    assert_one_line_exit_2,
    assert_same_weights,
    checkpoint,
    clean_env,
    free_port,
    ok,
    run,
    weights,
)

FRAMEWORKS = ("pytorch", "mindspore")
# Two epochs of two steps (--smoke): the fewest that leave a checkpoint to fall back to.
ARGS = ("--device_target", "cpu", "--epoch_size", "2", "--smoke", "--no_tensorboard")
LAUNCHED = {"capture_output": True, "text": True, "timeout": 300}


def _flip(path: Path) -> None:
    """One bit in the middle of the file: inside a tensor's bytes, so the file still loads."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "bit-flipped": _flip,
}


@pytest.fixture(scope="module")
def projects(pytorch_project: Path, mindspore_projects: dict[str, Path]) -> dict[str, Path]:
    return {"pytorch": pytorch_project, "mindspore": mindspore_projects["model"]}


def parameters(stdout: str) -> str:
    """The digest of the weights a run ended with (its last line)."""
    found = re.findall(r"finished, parameters (\w+)", stdout)
    assert len(found) == 1, stdout[-3000:]
    return found[0]


@pytest.fixture(scope="module")
def unbroken(projects, tmp_path_factory) -> Callable[[str], tuple[Path, str]]:
    """``unbroken(framework)``: the output of ARGS's run, never stopped, and its digest."""
    done: dict[str, tuple[Path, str]] = {}

    def get(framework: str) -> tuple[Path, str]:
        if framework not in done:
            output = tmp_path_factory.mktemp(f"unbroken-{framework}")
            result = run(projects[framework], "train.py", "--train_url", str(output), *ARGS)
            done[framework] = output, parameters(ok(result))
        return done[framework]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_newest_checkpoint_gives_way_to_the_newest_intact(
    projects, unbroken, tmp_path: Path, framework: str, kind: str
) -> None:
    output, digest = unbroken(framework)
    where = shutil.copytree(output, tmp_path / "run")
    newest, older = checkpoint(where, 2, framework), checkpoint(where, 1, framework)
    size = newest.stat().st_size
    why = {
        "truncated": f"truncated: {size // 2:,} of {size:,} bytes",
        "empty": "empty",
        "bit-flipped": f"checksum mismatch ({newest.name}.sha256)",
    }[kind]
    DAMAGE[kind](newest)
    if kind == "bit-flipped":  # what only a checksum catches: it loads, with other weights
        flipped, written = weights(newest), weights(checkpoint(output, 2, framework))
        assert flipped.keys() == written.keys()
        assert any(not np.array_equal(value, flipped[key]) for key, value in written.items())
    # The same command again, as a platform's restart reruns it.
    again = run(projects[framework], "train.py", "--train_url", str(where), *ARGS)
    stdout = ok(again)
    said = [line for line in stdout.splitlines() if "skipped the damaged" in line]
    assert len(said) == 1, stdout[-3000:]
    assert said[0].endswith(
        f" WARNING skipped the damaged {newest} ({why}): resuming from {older.name}, the newest "
        "intact"
    ), said
    assert f"resumed from {older} after epoch 1" in stdout
    assert parameters(stdout) == digest
    assert again.stderr == "", again.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_with_no_intact_checkpoint_a_resume_is_one_line(
    projects, unbroken, tmp_path: Path, framework: str
) -> None:
    where = shutil.copytree(unbroken(framework)[0], tmp_path / "run")
    newest, older = checkpoint(where, 2, framework), checkpoint(where, 1, framework)
    DAMAGE["truncated"](newest)
    DAMAGE["bit-flipped"](older)
    again = run(projects[framework], "train.py", "--train_url", str(where), *ARGS)
    assert_one_line_exit_2(
        again,
        f"error: no intact checkpoint to resume from: {newest} (truncated: ",
        f"; {older} (checksum mismatch ({older.name}.sha256))",
    )
    # A damaged checkpoint named by hand: one line too.
    argv = ("train.py", "--train_url", str(tmp_path / "new"), *ARGS, "--resume", str(older))
    assert_one_line_exit_2(
        run(projects[framework], *argv),
        f"--resume {older} is damaged (checksum mismatch ({older.name}.sha256))",
    )


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at path (made) while the block runs."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def first_intact(where: Path, framework: str) -> Path:
    """Epoch 1's checkpoint, its checksum matching, latest.json naming it."""
    first = checkpoint(where, 1, framework)
    sidecar = json.loads(first.with_name(first.name + ".sha256").read_text())
    assert sidecar["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    assert json.loads((where / "latest.json").read_text())["latest"] == first.name
    return first


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_full_disk_is_one_line_and_the_run_resumes_once_there_is_space(
    projects, unbroken, tmp_path: Path, framework: str
) -> None:
    output, digest = unbroken(framework)
    # Room for the record and one checkpoint (about 490 KB in either framework), not two.
    with small_disk(tmp_path / "disk", "800k") as disk:
        where = disk / "run"
        argv = ("train.py", "--train_url", str(where), *ARGS)
        full = run(projects[framework], *argv)
        assert_one_line_exit_2(
            full,
            f"error: no space left on the device for {checkpoint(where, 2, framework)}: about ",
            " free; the earlier checkpoints and latest.json are intact: free some space and run "
            "the same command again to resume from them",
        )
        said = re.search(r"about ([\d,]+) bytes needed, ([\d,]+) free", full.stderr)
        needed, free = (int(n.replace(",", "")) for n in said.groups())
        # The tensors' bytes: the file adds its names and layout, a few percent.
        size = checkpoint(output, 2, framework).stat().st_size
        assert 0.95 * size < needed <= size and free < needed, (needed, free, size)
        # The first epoch's checkpoint as it was written, latest.json naming it, no temporaries.
        first = first_intact(where, framework)
        assert_same_weights(first, checkpoint(output, 1, framework))
        assert [p.name for p in where.iterdir() if p.name.startswith(".")] == []
        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
        again = ok(run(projects[framework], *argv))
        assert f"resumed from {first} after epoch 1" in again
        assert parameters(again) == digest


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A project a framework whose run_8p.sh starts the ranks with torchrun or msrun."""
    return {
        framework: render_once(
            tmp_path_factory,
            Options(project="demo", framework=framework, target="cuda", platform="generic"),
        )
        for framework in FRAMEWORKS
    }


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_full_disk_under_two_ranks_names_rank_0_and_its_reason_and_the_rerun_resumes(
    launched: dict[str, Path], tmp_path: Path, framework: str
) -> None:
    """Two ranks on a full disk, the ranks' logs on it too: the launcher's one line names
    rank 0 and its reason, restarts nothing (the peer, its collective broken, exits 1 as well),
    and the same command continues from the intact checkpoint once there is room."""
    # Room for the record, the ranks' logs (about 70 KB) and one checkpoint, not two.
    with small_disk(tmp_path / "disk", "850k") as disk:
        where = disk / "run"
        script = str(launched[framework] / "scripts" / "run_8p.sh")
        argv = [script, "--nproc", "2", "--master-port", str(free_port()), "--output", str(where)]
        argv += ["--", *ARGS]
        full = subprocess.run(argv, env=clean_env(PYTHON=sys.executable), **LAUNCHED)
        assert full.returncode == 1, full.stdout[-3000:] + full.stderr[-3000:]
        (line,) = [line for line in full.stderr.splitlines() if line.startswith("error: ")]
        second = checkpoint(where, 2, framework)
        assert line.startswith(
            f"error: rank 0 exited with status 2: no space left on the device for {second}: "
        ), line
        assert "the earlier checkpoints and latest.json are intact" in line
        assert "(a configuration error: not restarted)" in line
        assert "starts the ranks" not in full.stderr, "no attempt restarted"
        first = first_intact(where, framework)
        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
        again = subprocess.run(argv, env=clean_env(PYTHON=sys.executable), **LAUNCHED)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert f"resumed from {first} after epoch 1" in again.stdout
        assert second.is_file()
