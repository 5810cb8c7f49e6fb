"""The reviewer's `gen update` scenario with the real git and the real cookiecutter: a clone
of this repository whose second commit changes the template as template fixes do, a
project with its own edits, then update, conflicts, --continue, --abort, a downgrade
refused and taken with --to, and each bad input with its one line and nothing written.

The second commit keeps the version (0.1.0 on both sides, as in the report): only the
commits, by their ancestry, say which template is newer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from generator import __version__
from generator.render.pristine import ARCHIVE, RECORD
from generator.render.project import template_dir
from generator.update import order
from generator.version import COMMIT_FILE, HISTORY_FILE
from tests.conftest import skip_outside_ci
from tests.template import versions
from tests.template.test_update import edit, gen, tree
from tests.template.versions import BINARY, git

REPO = Path(__file__).resolve().parents[2]
PROJECT = "{{cookiecutter.project}}"
MODULE = "src/scaffold/retry.py"  # added by v2
V2_TRAIN = "# template v2: train.py logs its options first."
MINE_TRAIN = "# mine: my own logging."
V2_SCAFFOLD = "# template v2: a scaffold fix."
V2_README = "Template v2 added this line at the end."
# gen update's code and the build hook, copied from this checkout into the clone's commits.
UPDATE_CODE = (
    "hatch_build.py",
    "generator/version.py",
    "generator/render/pristine.py",
    "generator/cli/update.py",
    *(str(p.relative_to(REPO)) for p in sorted((REPO / "generator/update").glob("*.py"))),
)


@dataclass(frozen=True)
class Template:
    root: Path
    v1: str  # this repository's HEAD
    v2: str  # branch next: the template's second commit
    deleted: str  # a file v2 deletes
    yours_deleted: str  # a file the user deletes, which v2 does not change


def _second_commit(root: Path) -> tuple[str, str]:
    """v2 on branch next: train.py, a scaffold module, README, a config.yaml default, a
    file deleted, a module added, a binary changed; and this checkout's update code and
    build hook, so that its wheel carries the history. The files v2 deletes and the user
    deletes."""
    template = root / PROJECT
    with (template / "train.py").open("a", encoding="utf-8") as train:
        train.write(f"{V2_TRAIN}\n")
    with (template / "src/scaffold/errors.py").open("a", encoding="utf-8") as module:
        module.write(f"\n{V2_SCAFFOLD}\n")
    with (template / "README.md").open("a", encoding="utf-8") as readme:
        readme.write(f"\n{V2_README}\n")
    # The classifier's batch_size (a language model's has its own, in another branch).
    per_device = "\n# Per device: with N devices a step trains on N x batch_size samples.\n"
    edit(template / "config.yaml", f"{per_device}batch_size: 32\n", f"{per_device}batch_size: 64\n")
    checks = sorted((template / "checks").glob("test_*.py"))
    checks[0].unlink()
    (template / MODULE).write_text('"""Retries, new in template v2."""\n', encoding="utf-8")
    with (template / BINARY).open("ab") as binary:
        binary.write(b"\0template v2\0")
    for name in UPDATE_CODE:
        shutil.copy2(REPO / name, root / name)
    return checks[0].name, checks[1].name


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("clone") / "template"
    git(REPO, "clone", "-q", str(REPO), str(root))
    main = git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()
    v1 = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "-b", "next")
    deleted, yours = _second_commit(root)
    v2 = versions.commit_all(root, "template v2")
    git(root, "checkout", "-q", main)  # its HEAD stays v1: next is the newer line
    # A commit from before the template existed: nothing in it.
    nothing = git(root, "hash-object", "-t", "tree", "-w", "/dev/null").strip()
    empty = git(root, "commit-tree", nothing, "-m", "empty")
    git(root, "branch", "empty", empty.strip())
    return Template(root, v1, v2, f"checks/{deleted}", f"checks/{yours}")


@pytest.fixture(scope="module")
def project(template: Template, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project rendered by plain cookiecutter from the clone at v1, with its own edits
    committed: a line at the end of train.py (where v2 adds one), another data_url, its
    own title, a check deleted."""
    work = tmp_path_factory.mktemp("project")
    config = work / "cookiecutter.yaml"
    config.write_text(f"replay_dir: {work / 'replay'}\n", encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "cookiecutter", "--no-input", "-o", str(work), ".", "project=demo"],
        cwd=template.root,
        env={**os.environ, "COOKIECUTTER_CONFIG": str(config), "PYTHONPATH": ""},
        check=True,
        capture_output=True,
    )
    created = work / "demo"
    assert json.loads((created / RECORD).read_text())["template_commit"] == template.v1
    git(created, "init", "-q")
    versions.commit_all(created, "generated")
    with (created / "train.py").open("a", encoding="utf-8") as train:
        train.write(f"{MINE_TRAIN}\n")
    edit(created / "config.yaml", "data_url: auto\n", "data_url: /my/data\n")
    readme = created / "README.md"
    readme.write_text("# demo: my experiments\n" + readme.read_text().split("\n", 1)[1])
    (created / template.yours_deleted).unlink()
    versions.commit_all(created, "mine")
    return created


@pytest.fixture(scope="module")
def v1_wheel(template: Template, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gen installed from a wheel of v1 (unpacked: PYTHONPATH=it runs its generator package)."""
    work = tmp_path_factory.mktemp("wheel")
    git(template.root, "clone", "-q", str(template.root), str(work / "v1"))
    for name in UPDATE_CODE:  # this checkout's, committed or not
        shutil.copy2(REPO / name, work / "v1" / name)
    with zipfile.ZipFile(versions.build_wheel(work / "v1", work)) as archive:
        archive.extractall(work / "site")
    return work / "site"


@pytest.fixture(scope="module")
def conflicted(project: Path, template: Template, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project after `gen update --template CLONE --to next`: train.py in conflict."""
    copy = tmp_path_factory.mktemp("conflicted") / "demo"
    shutil.copytree(project, copy, symlinks=True)
    done = gen(copy, "--template", str(template.root), "--to", "next")
    assert done.returncode == 1, done.stderr
    return copy


def copy_of(source: Path, tmp_path: Path) -> Path:
    shutil.copytree(source, tmp_path / "demo", symlinks=True)
    return tmp_path / "demo"


def test_update_merges_conflicts_continue_then_a_downgrade_needs_to(
    project: Path, template: Template, v1_wheel: Path, tmp_path: Path
) -> None:
    demo = copy_of(project, tmp_path)
    before = tree(demo)
    dry = gen(demo, "--template", str(template.root), "--to", "next", "--dry-run")
    assert dry.returncode == 1
    assert dry.stderr == "error: dry run: 1 file would conflict (train.py)\n"
    assert tree(demo) == before
    done = gen(demo, "--template", str(template.root), "--to", "next")
    assert done.returncode == 1
    plan = done.stdout.splitlines()
    for line in (
        "conflict  train.py: changed by you and by the template",
        "merge     config.yaml: changed by you and by the template",
        "merge     README.md: changed by you and by the template",
        "take      src/scaffold/errors.py: changed by the template only",
        f"add       {MODULE}: new in the template",
        f"delete    {template.deleted}: deleted by the template; you had not changed it",
        f"take      {BINARY}: changed by the template only",
    ):
        assert line in plan
    assert not any(template.yours_deleted in line for line in plan)  # yours, unchanged there
    assert done.stderr.splitlines()[0] == "error: train.py: conflict"
    assert "git mergetool" in done.stderr
    config = (demo / "config.yaml").read_text()
    assert "data_url: /my/data\n" in config and "\nbatch_size: 64\n" in config
    readme = (demo / "README.md").read_text()
    assert readme.startswith("# demo: my experiments\n") and V2_README in readme
    assert V2_SCAFFOLD in (demo / "src/scaffold/errors.py").read_text()
    assert (demo / MODULE).is_file() and not (demo / template.deleted).exists()
    assert (demo / BINARY).read_bytes().endswith(b"\0template v2\0")
    train = (demo / "train.py").read_text()
    assert f"<<<<<<< yours\n{MINE_TRAIN}\n" in train and f"=======\n{V2_TRAIN}\n" in train

    merged = train.split("<<<<<<< yours\n")[0] + f"{MINE_TRAIN}\n{V2_TRAIN}\n"
    (demo / "train.py").write_text(merged)
    git(demo, "add", "train.py")
    finished = gen(demo, "--continue")
    assert finished.returncode == 0, finished.stderr
    record = json.loads((demo / RECORD).read_text())
    assert record["template_commit"] == template.v2 and record["generator"].endswith(__version__)
    versions.commit_all(demo, "template v2")

    # This gen's template (this checkout) does not hold v2 in its history: not taken.
    updated = tree(demo)
    installed = gen(demo)
    assert installed.returncode == 1
    v2, v1 = f"{__version__} ({template.v2[:12]})", f"{__version__} ("
    assert installed.stderr.startswith(
        f"error: the project is at template {v2}, which is not in the history of this gen's "
        f"template {v1}"
    )
    assert installed.stderr.count("\n") == 1 and f"--to {__version__}" in installed.stderr
    # So does a gen installed from v1's wheel, which knows v1's history from the wheel alone.
    command = [sys.executable, "-m", "generator", "update"]
    wheel_env = {**os.environ, "PYTHONPATH": str(v1_wheel)}
    from_wheel = subprocess.run(command, cwd=demo, env=wheel_env, capture_output=True, text=True)
    assert from_wheel.returncode == 1 and from_wheel.stderr == (
        f"error: the project is at template {v2}, which is not in the history of this gen's "
        f"template {__version__} ({template.v1[:12]}): it may be newer, and updating would "
        f"undo its changes; update gen (or pass --template with its history), or pass --to "
        f"{__version__} to take it anyway\n"
    )
    # The clone's HEAD is v1, an ancestor of v2: going back, refused.
    back = gen(demo, "--template", str(template.root))
    assert back.returncode == 1 and back.stderr.count("\n") == 1
    assert back.stderr == (
        f"error: the project is at template {v2}, newer than template {__version__} "
        f"({template.v1[:12]}) at the HEAD of {template.root}: updating would undo the newer "
        "template's changes; update gen (or pass --template with the newer history), or "
        f"pass --to {template.v1[:12]} to go back to it\n"
    )
    assert tree(demo) == updated
    # Named by --to, it is taken: v2's module goes, the check it deleted comes back.
    named = gen(demo, "--template", str(template.root), "--to", template.v1[:12], "--dry-run")
    assert f"going back to the older template {__version__} ({template.v1[:12]})" in named.stdout
    assert f"delete    {MODULE}: deleted by the template; you had not changed it" in named.stdout
    assert f"add       {template.deleted}: new in the template" in named.stdout
    assert tree(demo) == updated


def test_abort_puts_back_every_file_byte_for_byte(
    project: Path, conflicted: Path, tmp_path: Path
) -> None:
    demo = copy_of(conflicted, tmp_path)
    aborted = gen(demo, "--abort")
    assert aborted.returncode == 0, aborted.stderr
    assert aborted.stdout == "update aborted: your files are back\n"
    assert {k: v[:2] for k, v in tree(demo).items()} == {k: v[:2] for k, v in tree(project).items()}
    assert git(demo, "status", "--porcelain") == "" and git(demo, "ls-files", "-u") == ""


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def _state(**change: object) -> object:
    def damage(path: Path) -> None:
        state = json.loads(path.read_text())
        state.update(change)
        path.write_text(json.dumps(state))

    return damage


PENDING = ".train-template/pending"
NOTHING = "; nothing was changed: "


@pytest.mark.parametrize(
    ("part", "damage", "commands", "said"),
    [
        ("state.json", Path.unlink, ("--abort", "--continue", ""), "is missing"),
        ("state.json", lambda p: _write(p, b'{"touched": ['), ("--abort", ""), "is not valid JSON"),
        ("state.json", _state(touched=["../../x"]), ("--abort",), "has no valid 'touched' list"),
        ("state.json", _state(format=0), ("--continue",), "is not a format 1 state"),
        ("yours.tar.gz", Path.unlink, ("--abort",), "is missing"),
        ("yours.tar.gz", _truncate, ("--abort",), "is not the archive state.json describes"),
        ("pristine.tar.gz", Path.unlink, ("--continue",), "is missing"),
        ("pristine.tar.gz", lambda p: _write(p, b"garbage"), ("--continue",), "is not the archive"),
    ],
)
def test_a_damaged_state_is_one_line_and_touches_nothing(
    conflicted: Path, tmp_path: Path, part: str, damage, commands: tuple[str, ...], said: str
) -> None:
    demo = copy_of(conflicted, tmp_path)
    damage(demo / PENDING / part)
    before = tree(demo)
    for command in commands:
        done = gen(demo, *filter(None, [command]))
        assert done.returncode == 1, (command, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"error: {PENDING}/{part} (") and said in done.stderr
        assert NOTHING in done.stderr and done.stderr.endswith(f"then delete {PENDING}\n")
        assert "git checkout HEAD -- FILE" in done.stderr
        assert tree(demo) == before


def test_the_wheel_carries_the_history_that_orders_templates(
    template: Template, v1_wheel: Path
) -> None:
    installed = v1_wheel / "generator" / "_template"
    assert (installed / COMMIT_FILE).read_text().startswith(template.v1)
    assert not (installed / HISTORY_FILE).exists()  # the template's copy is the template
    target, history = order.installed(installed)
    assert target == order.Identity(__version__, template.v1) and history is not None
    parent = git(template.root, "rev-parse", f"{template.v1}^").strip()
    assert history.is_ancestor(parent, template.v1)
    assert not history.is_ancestor(template.v1, parent)
    older = order.Identity(__version__, parent)
    assert order.direction(older, target, history) is order.Direction.FORWARD
    assert order.direction(target, older, history) is order.Direction.BACK
    newer = order.Identity(__version__, template.v2)  # not in v1's history
    assert order.direction(newer, target, history) is order.Direction.UNKNOWN


def _committed(demo: Path, path: str, data: bytes) -> None:
    (demo / path).write_bytes(data)
    versions.commit_all(demo, f"changed {path}")


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"garbage", f"error: {ARCHIVE} is not a gzip'd tar archive (not a gzip file); "),
        (None, f"error: {ARCHIVE} is cut short (Compressed file ended before the end-of-stream"),
    ],
)
def test_a_damaged_pristine_render_is_one_line(
    project: Path, tmp_path: Path, data: bytes | None, line: str
) -> None:
    demo = copy_of(project, tmp_path)
    _committed(demo, ARCHIVE, data or (demo / ARCHIVE).read_bytes()[:3000])
    before = tree(demo)
    done = gen(demo, "--dry-run")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(line), done.stderr
    assert done.stderr.endswith(
        "it is the render this project was made from, the base of the merge; nothing was "
        f"changed: restore it (git checkout HEAD -- {ARCHIVE}), or delete it and pass "
        "--template PATH|URL of the template's history to render the base again\n"
    )
    assert tree(demo) == before


def test_to_a_commit_before_the_template_or_its_record_is_one_line(
    project: Path, template: Template, tmp_path: Path
) -> None:
    demo = copy_of(project, tmp_path)
    before = tree(demo)
    empty = git(template.root, "rev-parse", "empty").strip()
    done = gen(demo, "--template", str(template.root), "--to", "empty")
    assert done.returncode == 1 and done.stderr == (
        f"error: --to empty: {template.root} at {empty[:12]} has no template (no "
        "cookiecutter.json): the commit is from before the template existed\n"
    )
    first = git(template.root, "rev-list", "--max-parents=0", "HEAD").strip()
    done = gen(demo, "--template", str(template.root), "--to", first[:7])
    assert done.returncode == 1 and done.stderr == (
        f"error: --to {first[:7]}: the template at {first[:12]} makes projects without "
        f"{RECORD}: it is from before gen update could follow a template; pick a later commit\n"
    )
    assert tree(demo) == before


def test_a_record_missing_an_answer_is_refused_naming_it(
    render_project: Callable[..., Path],
) -> None:
    """An Ascend project's record without target: refused, not planned as CUDA."""
    demo = render_project("asc", target="ascend")
    git(demo, "init", "-q")
    versions.commit_all(demo, "generated")
    record = json.loads((demo / RECORD).read_text())
    no_target = {k: v for k, v in record.items() if k != "target"}
    _committed(demo, RECORD, json.dumps(no_target, indent=2).encode())
    before = tree(demo)
    done = gen(demo, "--dry-run")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {demo}/{RECORD} lacks target: ")  # read_record's
    assert tree(demo) == before
    _, history = order.installed(template_dir())
    if history is None:
        skip_outside_ci("this checkout has no git history: arch's age cannot be told")
    # arch came after the first records: a record from before it takes its default...
    older = {k: v for k, v in record.items() if k != "arch"}
    older["template_commit"] = git(REPO, "rev-parse", f"{order.KEYS_ADDED['arch']}^").strip()
    _committed(demo, RECORD, json.dumps(older, indent=2).encode())
    assert gen(demo, "--dry-run").returncode == 0
    # ...one written by a template that had it must hold it.
    newer = {**older, "template_commit": record["template_commit"]}
    _committed(demo, RECORD, json.dumps(newer, indent=2).encode())
    before = tree(demo)
    done = gen(demo)
    assert done.returncode == 1 and done.stderr == (
        f"error: {RECORD} lacks arch, which template {order.Identity.of_record(record)} "
        f"records; gen update will not guess an answer: put it back (git log -p {RECORD} "
        "shows it) or pass --set arch=VALUE\n"
    )
    assert tree(demo) == before
    assert gen(demo, "--dry-run", "--set", "arch=auto").returncode == 0


def test_conflicts_outside_git_say_how_to_resolve_without_it(
    project: Path, template: Template, tmp_path: Path
) -> None:
    demo = copy_of(project, tmp_path)
    shutil.rmtree(demo / ".git")
    done = gen(demo, "--template", str(template.root), "--to", "next")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: train.py: conflict",
        "resolve them: edit each file until no <<<<<<< yours / ||||||| / ======= / >>>>>>> "
        "marker is left (PATH.gen-new is the template's binary: keep yours or move it over "
        "yours), then: gen update --continue",
        "or put everything back with: gen update --abort",
    ]
    early = gen(demo, "--continue")
    assert early.returncode == 1 and "git" not in early.stderr
    train = (demo / "train.py").read_text()
    (demo / "train.py").write_text(train.split("<<<<<<< yours\n")[0] + f"{V2_TRAIN}\n")
    assert gen(demo, "--continue").returncode == 0
