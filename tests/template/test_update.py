"""`gen update`: a project made from template version 1 takes version 2 with a three-way
merge, with the real git and the real cookiecutter (rendering version 2 from its repo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.render.pristine import ARCHIVE, RECORD
from generator.render.project import render
from tests.template import versions
from tests.template.versions import (
    BINARY,
    DELETED_IN_V2,
    MADE_EXECUTABLE,
    V2_COMMENT,
    V2_README_LINE,
    git,
)


@pytest.fixture(scope="module")
def template_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The two-version template repository and version 2's commit."""
    repo = versions.version_1(tmp_path_factory.mktemp("template"))
    return repo, versions.version_2(repo)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A PyTorch project made by `gen new` from version 1, committed to its own git."""
    created = render(Options("demo"), tmp_path)
    git(created, "init", "-q")
    versions.commit_all(created, "generated")
    return created


def gen(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **versions.GIT_ENV}
    return subprocess.run(
        [sys.executable, "-m", "generator", "update", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def to_v2(project: Path, template: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return gen(project, "--template", str(template), "--to", versions.V2, *more)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def tree(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file with its bytes, mode and modification time (nanoseconds)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and ".git" not in path.relative_to(root).parts:
            info = path.stat()
            found[str(path.relative_to(root))] = (path.read_bytes(), info.st_mode, info.st_mtime_ns)
    return found


def test_clean_merge_takes_adds_and_deletes_and_a_second_run_changes_nothing(
    project: Path, template_repo: tuple[Path, str]
) -> None:
    template, v2 = template_repo
    edit(project / "README.md", "# demo\n", "# demo: my experiments\n")
    versions.commit_all(project, "my title")
    done = to_v2(project, template)
    assert done.returncode == 0, done.stderr
    plan = done.stdout.splitlines()
    for line in (
        "merge     README.md: changed by you and by the template",
        "take      env.sh: changed by the template only",
        "add       NOTES.md: new in the template",
        f"delete    {DELETED_IN_V2}: deleted by the template; you had not changed it",
        f"take      {BINARY}: changed by the template only",
        f"chmod     {MADE_EXECUTABLE}: the template changed its mode",
    ):
        assert line in plan
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# demo: my experiments\n") and V2_README_LINE in readme
    assert V2_COMMENT in (project / "env.sh").read_text(encoding="utf-8")
    assert (project / "NOTES.md").read_text(encoding="utf-8") == versions.V2_NOTES
    assert not (project / DELETED_IN_V2).exists()
    assert (project / BINARY).read_bytes().endswith(b"\0template v2\0")
    assert (project / MADE_EXECUTABLE).stat().st_mode & 0o777 == 0o755
    # Version 2 was rendered by cookiecutter with its hooks, leaving nothing in HOME.
    assert not list(Path(os.environ["HOME"]).iterdir())
    record = json.loads((project / RECORD).read_text(encoding="utf-8"))
    assert record["template_commit"] == v2 and record["generator"] == "train-template 0.1.1"
    updated = f"updated to template {versions.V2} ({v2[:12]})"
    assert plan[-1] == f"{updated}; review with git diff, then commit"

    versions.commit_all(project, "update")
    before = tree(project)
    again = to_v2(project, template)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"up to date with template {versions.V2} ({v2[:12]})\n"
    assert tree(project) == before
    assert git(project, "status", "--porcelain") == ""


def test_conflicts_get_markers_and_index_stages_and_continue_records_them(
    project: Path, template_repo: tuple[Path, str]
) -> None:
    template, v2 = template_repo
    env_sh = project / "env.sh"
    base = env_sh.read_bytes()
    edit(env_sh, "# shellcheck shell=sh\n", "# shellcheck shell=sh\n# mine: proxy settings\n")
    ours = env_sh.read_bytes()
    versions.commit_all(project, "mine")
    record_before = (project / RECORD).read_bytes()

    done = to_v2(project, template)
    assert done.returncode == 1
    assert "conflict  env.sh: changed by you and by the template" in done.stdout
    assert done.stderr.splitlines()[0] == "error: env.sh: conflict"
    text = env_sh.read_text(encoding="utf-8")
    v1_label = json.loads(record_before)["template_commit"][:12]
    assert (
        "<<<<<<< yours\n# mine: proxy settings\n"
        f"||||||| template 0.1.0 ({v1_label})\n=======\n{V2_COMMENT}\n"
        f">>>>>>> template {versions.V2} ({v2[:12]})\n"
    ) in text
    # git mergetool's three versions: 1 the old template's, 2 yours, 3 the new template's.
    stages = {}
    for line in git(project, "ls-files", "-u", "--", "env.sh").splitlines():
        meta, _path = line.split("\t")
        mode, blob, stage = meta.split()
        assert mode == "100755" or mode == "100644"
        stages[stage] = git(project, "cat-file", "blob", blob).encode()
    assert stages["1"] == base and stages["2"] == ours
    assert stages["3"].decode().splitlines()[1] == V2_COMMENT
    assert (project / RECORD).read_bytes() == record_before  # recorded only on success

    refused = gen(project)
    assert refused.returncode == 2 and "an update is waiting" in refused.stderr
    early = gen(project, "--continue")
    assert early.returncode == 1 and "env.sh: conflict markers remain" in early.stderr

    env_sh.write_bytes(ours.replace(b"# mine", V2_COMMENT.encode() + b"\n# mine"))
    git(project, "add", "env.sh")
    finished = gen(project, "--continue")
    assert finished.returncode == 0, finished.stderr
    assert json.loads((project / RECORD).read_text())["template_commit"] == v2
    assert not (project / ".train-template" / "pending").exists()
    versions.commit_all(project, "update")
    again = to_v2(project, template)
    assert again.returncode == 0 and again.stdout.startswith("up to date")


def test_deleted_files_stay_deleted_and_modified_ones_stay(
    project: Path, template_repo: tuple[Path, str]
) -> None:
    template, _ = template_repo
    (project / "env.sh").unlink()
    with (project / DELETED_IN_V2).open("a", encoding="utf-8") as test_file:
        test_file.write("\n# my own check follows\n")
    versions.commit_all(project, "mine")
    done = to_v2(project, template)
    assert done.returncode == 0, done.stderr
    assert "keep      env.sh: deleted by you, changed by the template: stays deleted" in done.stdout
    assert (
        f"keep      {DELETED_IN_V2}: deleted by the template, changed by you: kept" in done.stdout
    )
    assert not (project / "env.sh").exists()
    assert "my own check" in (project / DELETED_IN_V2).read_text(encoding="utf-8")


def test_a_binary_both_changed_gets_a_sidecar(
    project: Path, template_repo: tuple[Path, str]
) -> None:
    template, _ = template_repo
    mine = (project / BINARY).read_bytes() + b"\0mine\0"
    (project / BINARY).write_bytes(mine)
    done = to_v2(project, template)  # the data is not tracked by git: the tree is clean
    assert done.returncode == 1
    assert f"error: {BINARY}: conflict" in done.stderr.splitlines()
    assert (project / BINARY).read_bytes() == mine
    sidecar = project / f"{BINARY}.gen-new"
    assert sidecar.read_bytes().endswith(b"\0template v2\0")
    blocked = gen(project, "--continue")
    assert blocked.returncode == 1 and f"delete {Path(BINARY).name}.gen-new" in blocked.stderr
    sidecar.unlink()
    assert gen(project, "--continue").returncode == 0


def test_set_devices_per_node_rerenders_the_launch_scripts(project: Path) -> None:
    edit(project / "README.md", "# demo\n", "# demo (mine)\n")
    versions.commit_all(project, "mine")
    done = gen(project, "--set", "devices_per_node=4")
    assert done.returncode == 0, done.stderr
    assert "take      scripts/launch_lib.sh: changed by the template only" in done.stdout
    assert "default_devices=4 " in (project / "scripts/launch_lib.sh").read_text()
    fresh = render(Options("demo", devices_per_node=4), project.parent / "fresh")
    assert (project / "scripts/launch_lib.sh").read_bytes() == (
        fresh / "scripts/launch_lib.sh"
    ).read_bytes()
    assert json.loads((project / RECORD).read_text())["devices_per_node"] == "4"
    assert (project / "README.md").read_text().startswith("# demo (mine)\n")
    assert (project / ARCHIVE).read_bytes() == (fresh / ARCHIVE).read_bytes()


def test_set_task_is_refused_the_researchers_files_untouched(project: Path) -> None:
    """A classifier's src/model.py, src/data.py and src/step.py are the researcher's: gen update
    does not swap them for a language model's."""
    before = tree(project)
    refused = gen(project, "--set", "task=lm")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("error: task: this project's task is classify: ")
    assert "gen new --task lm" in refused.stderr
    assert tree(project) == before


def test_a_dirty_tree_is_refused_and_a_dry_run_changes_nothing(
    project: Path, template_repo: tuple[Path, str]
) -> None:
    template, _ = template_repo
    edit(project / "README.md", "# demo\n", "# demo (uncommitted)\n")
    before = tree(project)
    refused = to_v2(project, template)
    assert refused.returncode == 1
    assert refused.stderr == (
        f"error: {project} has uncommitted changes (git status); commit or stash them first, "
        "so that the update can be reviewed and undone\n"
    )
    dry = to_v2(project, template, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "add       NOTES.md: new in the template" in dry.stdout
    assert dry.stdout.splitlines()[-1].startswith("dry run: nothing changed")
    # PROJECT_DIR named from another directory plans the same.
    named = (str(project), "--template", str(template), "--to", versions.V2)
    refused_named = gen(project.parent, *named)
    assert refused_named.returncode == 1 and refused_named.stderr == refused.stderr
    dry_named = gen(project.parent, *named, "--dry-run")
    assert dry_named.returncode == 0 and dry_named.stdout == dry.stdout
    assert tree(project) == before


def test_without_its_pristine_render_the_base_comes_from_the_template_history(
    project: Path, template_repo: tuple[Path, str]
) -> None:
    template, v2 = template_repo
    # A project made from the template repository's version 1 (this checkout's files,
    # which may not be committed yet), before projects kept their pristine render.
    record = json.loads((project / RECORD).read_text(encoding="utf-8"))
    record["template_commit"] = git(template, "rev-parse", "v0.1.0^{commit}").strip()
    (project / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    git(project, "rm", "-q", "-r", ".train-template")
    versions.commit_all(project, "an older project")
    alone = gen(project)
    assert alone.returncode == 1
    assert "keeps no pristine render" in alone.stderr and "--template" in alone.stderr
    # The history by URL, as a user names a template's repository (PATH is the other tests').
    done = gen(project, "--template", f"file://{template}", "--to", versions.V2)
    assert done.returncode == 0, done.stderr
    assert "take      env.sh: changed by the template only" in done.stdout
    assert (project / ARCHIVE).is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--to", "9.9"), "error: --to 9.9: this gen is 0.1.0; install train-template 9.9"),
        (("--set", "colour=red"), "error: colour: unknown option; known options are project"),
        (("--set", "project=other"), "error: project: is the project directory's name"),
        (("--set", "devices_per_node=3"), "error: devices_per_node: 3 is not allowed"),
        (("--continue",), "error: no update is waiting in"),
    ],
)
def test_bad_input_is_one_line(project: Path, args: tuple[str, ...], message: str) -> None:
    before = tree(project)
    done = gen(project, *args)
    assert done.returncode != 0
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(message), done.stderr
    assert tree(project) == before


def test_an_unknown_ref_and_a_directory_that_is_no_project(
    project: Path, template_repo: tuple[Path, str], tmp_path: Path
) -> None:
    template, _ = template_repo
    done = gen(project, "--template", str(template), "--to", "v7")
    assert done.returncode == 1
    assert done.stderr.startswith("error: --to v7: no such commit, tag or branch in")
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    done = gen(elsewhere)
    assert done.returncode == 1 and "is not a project generated by train-template" in done.stderr
