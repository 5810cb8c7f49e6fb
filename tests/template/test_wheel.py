"""The tool as users install it: a wheel in a fresh venv outside the checkout, pipx from a
path and from a git URL, and a project made by one wheel updated by a newer one."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

import pytest

from generator import __version__
from generator.render import options as opts
from generator.render.project import REPO_ROOT_MARKERS, template_dir
from generator.version import COMMIT_FILE, template_commit
from tests.template import versions

# Every combination of the options a project uses: the chip only where Ascend is a target,
# the MindSpore loop only for MindSpore (elsewhere they only change the record's copy of
# the answers). The node count alternates between one and two nodes.
COMBINATIONS = [
    (framework, target, platform, devices, loop, chip)
    for framework, target, platform, devices in itertools.product(
        opts.FRAMEWORKS, opts.TARGETS, opts.PLATFORMS, opts.DEVICES_PER_NODE
    )
    for loop in (opts.MS_TRAIN_LOOPS if framework == "mindspore" else opts.MS_TRAIN_LOOPS[:1])
    for chip in (opts.CHIPS if target != "cuda" else opts.CHIPS[:1])
    # 16 NPUs a node is refused on the first 910 (an Atlas training server holds 8).
    if not (devices == 16 and chip in opts.EIGHT_ONLY_CHIPS)
]


def _pairwise(combos: list[tuple]) -> list[tuple]:
    """Enough of ``combos`` that every two options' values found together in one are
    together in one chosen (greedy: the combination adding most new pairs, in turn)."""
    pairs = lambda combo: set(itertools.combinations(enumerate(combo), 2))  # noqa: E731
    left = set().union(*map(pairs, combos))
    chosen = []
    while left:
        best = max(combos, key=lambda combo: len(pairs(combo) & left))
        chosen.append(best)
        left -= pairs(best)
    return chosen


# The wheel holds every template file (the test below): that it renders as the checkout does
# is shown on each pair of option values (17 combinations making all 157 files the 297 make).
PAIRS = _pairwise(COMBINATIONS)

# Renders each combination and prints, as JSON, each file's mode and digest; run by the
# wheel's interpreter and by this checkout's, from a directory outside the checkout.
RENDER_ALL = """
import hashlib, json, shutil, sys, tempfile
from pathlib import Path
import generator
from generator.render.options import Options
from generator.render.project import render
out = {"module": generator.__file__}
with tempfile.TemporaryDirectory() as tmp:
    for i, combo in enumerate(json.loads(sys.argv[1])):
        created = render(Options("proj", *combo[:4], 1 + i % 2, *combo[4:]), Path(tmp))
        out["-".join(map(str, combo))] = {
            str(p.relative_to(created)): "%o %s" % (
                p.stat().st_mode & 0o777, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(created.rglob("*")) if p.is_file()
        }
        shutil.rmtree(created)
json.dump(out, sys.stdout)
"""


SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def run(*command: str | Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env={**os.environ, **versions.GIT_ENV, **env},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def fresh_venv(where: Path, *wheels: Path, deps: Path) -> Path:
    """A venv with ``wheels`` installed from local wheels only; its bin directory."""
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index"]
        + ["--find-links", str(deps), *map(str, wheels)],
        check=True,
    )
    return where / "bin"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """This checkout's wheel, and a directory holding it and every dependency's wheel."""
    deps = tmp_path_factory.mktemp("deps")
    wheel = versions.build_wheel(template_dir(), deps)
    # The dependencies once, from PyPI or pip's cache; every venv then installs offline.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "-w", str(deps), str(wheel)], check=True
    )
    return wheel, deps


@pytest.fixture(scope="module")
def wheel_bin(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheel, deps = built
    return fresh_venv(tmp_path_factory.mktemp("venv"), wheel, deps=deps)


def test_the_wheel_carries_the_template_and_its_commit(built: tuple[Path, Path]) -> None:
    wheel, _ = built
    repo = template_dir()
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        inside = {n.split("generator/_template/", 1)[1] for n in names if "_template/" in n}
        commit = archive.read(f"generator/_template/{COMMIT_FILE}").decode().strip()
    in_repo = {
        str(p.relative_to(repo))
        for marker in REPO_ROOT_MARKERS
        for p in ([repo / marker] if (repo / marker).is_file() else (repo / marker).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert inside == in_repo | {COMMIT_FILE}
    assert commit == template_commit(repo)


def test_each_pair_of_options_renders_from_the_wheel_as_from_the_checkout(
    wheel_bin: Path, tmp_path: Path
) -> None:
    combos = json.dumps(PAIRS)
    jobs = [
        subprocess.Popen(
            [str(python), "-c", RENDER_ALL, combos],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            text=True,
            # Memory, not disk, where there is one: 500 renders' files are opened, not kept.
            env={**os.environ, "PYTHONPATH": "", "TMPDIR": SCRATCH},
        )
        for python in (wheel_bin / "python", Path(sys.executable))
    ]
    from_wheel, from_checkout = (json.loads(job.communicate()[0]) for job in jobs)
    assert all(job.returncode == 0 for job in jobs)
    assert from_wheel.pop("module").startswith(str(wheel_bin.parent))
    assert from_checkout.pop("module") == str(template_dir() / "generator" / "__init__.py")
    assert len(COMBINATIONS) == 297 and len(from_wheel) == len(PAIRS) < 60
    differ = [combo for combo in from_checkout if from_wheel[combo] != from_checkout[combo]]
    assert not differ, differ[:5]


def test_gen_version_and_the_record_name_the_template_commit(
    wheel_bin: Path, tmp_path: Path
) -> None:
    commit = template_commit(template_dir())
    shown = run(wheel_bin / "gen", "--version", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout == f"gen {__version__} (template {commit})\n"
    here = run(sys.executable, "-m", "generator", "--version", cwd=tmp_path)
    assert here.stdout == shown.stdout
    made = run(wheel_bin / "gen", "new", "demo", "--no-input", "--target", "ascend", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    record = json.loads((tmp_path / "demo" / ".train-template.json").read_text())
    assert record["generator"] == f"train-template {__version__}"
    assert record["template_commit"] == commit


def test_a_project_from_the_wheel_is_updated_by_a_newer_wheel(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    old_wheel, deps = built
    repo = versions.version_1(tmp_path / "template")
    v2 = versions.version_2(repo)
    new_wheel = versions.build_wheel(repo, tmp_path / "new")
    bin_dir = fresh_venv(tmp_path / "venv", old_wheel, deps=deps)
    work = tmp_path / "work"
    work.mkdir()
    assert run(bin_dir / "gen", "new", "demo", "--no-input", cwd=work).returncode == 0
    project = work / "demo"
    versions.git(project, "init", "-q")
    versions.commit_all(project, "generated")
    # The upgrade a user makes: pip install -U of the newer wheel into the same venv.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q"]
        + ["--no-index", "--find-links", str(deps), str(new_wheel)],
        check=True,
    )
    shown = run(bin_dir / "gen", "--version", cwd=work)
    assert shown.stdout == f"gen {versions.V2} (template {v2})\n"
    done = run(bin_dir / "gen", "update", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "add       NOTES.md: new in the template" in done.stdout
    assert versions.V2_COMMENT in (project / "env.sh").read_text()
    record = json.loads((project / ".train-template.json").read_text())
    assert record["template_commit"] == v2
    versions.commit_all(project, "updated")
    again = run(bin_dir / "gen", "update", cwd=project)
    assert again.stdout == f"up to date with template {versions.V2} ({v2[:12]})\n"


@pytest.mark.parametrize("source", ["path", "git URL"])
def test_pipx_installs_gen(source: str, tmp_path: Path) -> None:
    pipx_home, bin_dir = tmp_path / "pipx", tmp_path / "bin"
    repo = versions.version_1(tmp_path / "template")
    spec = str(repo) if source == "path" else f"git+file://{repo}"
    env = {"PIPX_HOME": str(pipx_home), "PIPX_BIN_DIR": str(bin_dir), "PIPX_MAN_DIR": str(tmp_path)}
    installed = run(sys.executable, "-m", "pipx", "install", spec, cwd=tmp_path, **env)
    assert installed.returncode == 0, installed.stderr
    commit = versions.git(repo, "rev-parse", "HEAD").strip()
    shown = run(bin_dir / "gen", "--version", cwd=tmp_path)
    assert shown.stdout == f"gen {__version__} (template {commit})\n"
    made = run(bin_dir / "gen", "new", "demo", "--no-input", "--framework=mindspore", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "demo" / "train.py").is_file()
