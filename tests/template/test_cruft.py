"""The template with the cookiecutter tools people already use (issue 34, item 5): plain
cookiecutter and cruft render it with its own code, in a venv where an older train-template
is installed beside them, and cruft's update agrees with `gen update`'s.

The venv is a fresh one (``python -m venv --without-pip``) whose site-packages chains to
this project's venv by a .pth line, so that cookiecutter, cruft and their dependencies are
the versions pinned here, offline, but not this checkout (whose editable install puts the
repo root, and so its local_extensions.py, on sys.path). Into it pip installs a wheel of
this checkout changed to be "train-template 0.0.1", whose layout code also leaves a marker
file: an import of the installed package instead of the template's own shows in the
project's record or as that file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import NamedTuple

import pytest

from generator import __version__
from generator.render.options import Options
from generator.render.project import render
from tests.template import versions
from tests.template.versions import REPO, V2, V2_COMMENT, git

OLD = "0.0.1"
MARKER = "LAID-OUT-BY-THE-INSTALLED-GEN"
RECORD = ".train-template.json"
V3 = "0.1.2"
V3_FILTER = "v3_shout"
V3_FILE = "CHANGES.md"
V4_LINE = "# Template v4: a line in the recipe.\n"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv's python with cookiecutter, cruft and train-template 0.0.1 installed."""
    work = tmp_path_factory.mktemp("old-gen")
    old = versions.version_1(work / "source")
    init = old / "generator" / "__init__.py"
    init.write_text(init.read_text().replace(f'"{__version__}"', f'"{OLD}"'))
    with (old / "generator" / "render" / "layout.py").open("a", encoding="utf-8") as layout:
        layout.write(
            "\n\n_finalize = finalize\n\n\n"
            "def finalize(root, options):  # noqa: F811\n"
            f"    (root / {MARKER!r}).write_text('')\n"
            "    return _finalize(root, options)\n"
        )
    wheel = versions.build_wheel(old, work / "dist")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", work / "venv"], check=True)
    python = work / "venv" / "bin" / "python"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], work)
    ours = dict.fromkeys(sysconfig.get_path(name) for name in ("purelib", "platlib"))
    Path(purelib.stdout.strip(), "this-projects-venv.pth").write_text("\n".join(ours) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps"]
    subprocess.run([*pip, "--no-index", wheel], check=True)
    return python


def run(args: list[object], cwd: Path, *, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """``args`` in ``cwd``, with no stdin; with ``ok``, a failure shows its output."""
    done = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env={**os.environ, **versions.GIT_ENV, "PYTHONPATH": ""},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert not ok or done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


def record(project: Path) -> dict[str, str]:
    return dict(json.loads((project / RECORD).read_text(encoding="utf-8")))


def head() -> str:
    return git(REPO, "rev-parse", "HEAD").strip()


def test_the_venv_imports_the_installed_old_gen(venv: Path, tmp_path: Path) -> None:
    """What an ordinary ``import generator`` finds there: the premise of the tests below."""
    found = run([venv, "-c", "import generator; print(generator.__version__)"], tmp_path)
    assert found.stdout.strip() == OLD


def test_plain_cookiecutter_records_this_template_not_the_installed_gen(
    venv: Path, tmp_path: Path
) -> None:
    before = head()
    run([venv, "-m", "cookiecutter", "--no-input", "-o", tmp_path, REPO, "project=plain"], tmp_path)
    made = record(tmp_path / "plain")
    assert made["generator"] == f"train-template {__version__}"
    assert made["template_commit"].removesuffix("-dirty") in {before, head()}
    assert not (tmp_path / "plain" / MARKER).exists()  # the hooks ran the template's layout


def test_a_caller_holding_another_generator_keeps_it(venv: Path, tmp_path: Path) -> None:
    """A process that imported the installed gen, then renders the template in-process:
    the render uses the template's code, and the caller's modules are its own again."""
    script = (
        "import json, sys\n"
        "import generator, generator.render.options\n"
        "from cookiecutter.main import cookiecutter\n"
        f"cookiecutter({str(REPO)!r}, no_input=True, output_dir={str(tmp_path)!r},\n"
        "             extra_context={'project': 'inproc'})\n"
        "print(json.dumps([generator.__version__, sys.modules['generator'] is generator,\n"
        "                  sys.modules['generator.render.options'] is generator.render.options]))\n"
    )
    kept = json.loads(run([venv, "-c", script], tmp_path).stdout)
    assert kept == [OLD, True, True]
    assert record(tmp_path / "inproc")["generator"] == f"train-template {__version__}"
    assert not (tmp_path / "inproc" / MARKER).exists()


class History(NamedTuple):
    """The template's repository and its four versions' commits."""

    repo: Path
    v1: str
    v2: str
    v3: str
    v4: str


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """Version 1: this checkout. Version 2: tests/template/versions.py's change (script
    line, README line, file added, file deleted, mode, binary, generator's version) and a
    new config.yaml default; local_extensions.py as it was. Version 3: a new Jinja filter
    in local_extensions.py, used by a new file, and the next version number. Version 4:
    lines in train.py and a scaffold module, nothing else.

    cruft renders both commits of one clone in one process, the older first: the newer
    render must see version 2's generator package, version 3's extension, version 4's
    commit (neither code changed)."""
    repo = versions.version_1(tmp_path_factory.mktemp("template"))
    v1 = git(repo, "rev-parse", "HEAD").strip()
    _edit(repo / versions.TEMPLATE / "config.yaml", "\nlr: 0.01\n", "\nlr: 0.02\n")
    v2 = versions.version_2(repo)
    registered = "        driver_table=driver_table,\n"
    added = f"{registered}        {V3_FILTER}=str.upper,\n"
    _edit(repo / "local_extensions.py", registered, added)
    (repo / versions.TEMPLATE / V3_FILE).write_text(
        f"{{{{ cookiecutter.project | {V3_FILTER} }}}}\n"
    )
    _edit(repo / "generator" / "__init__.py", f'"{V2}"', f'"{V3}"')
    v3 = versions.commit_all(repo, "version 3")
    git(repo, "tag", f"v{V3}")
    for name in ("train.py", "src/scaffold/errors.py"):
        with (repo / versions.TEMPLATE / name).open("a", encoding="utf-8") as module:
            module.write(V4_LINE)
    v4 = versions.commit_all(repo, "version 4")
    return History(repo, v1, v2, v3, v4)


def _edit(path: Path, old: str, new: str) -> None:
    path.write_text(_replace(path.read_text(encoding="utf-8"), old, new), encoding="utf-8")


def _replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


@pytest.fixture(scope="module")
def created(venv: Path, history: History, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`cruft create` of version 1: a project to copy, not to change."""
    out = tmp_path_factory.mktemp("cruft")
    answers = json.dumps({"project": "crufty"})
    run([venv, "-m", "cruft", "create", history.repo, "--checkout", history.v1]
        + ["--output-dir", out, "--no-input", "--extra-context", answers], out)  # fmt: skip
    return out / "crufty"


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file but git's, with its bytes and mode."""
    return {
        str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mode)
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


def test_cruft_create_renders_what_gen_new_does_and_records_its_commit(
    created: Path, history: History, tmp_path: Path
) -> None:
    """Version 1 is this checkout: cruft's project is gen new's, but for .cruft.json and the
    commit in the record (the clone's commit; gen new here records this checkout's)."""
    made = record(created)
    assert (made["generator"], made["template_commit"]) == (
        f"train-template {__version__}",
        history.v1,
    )
    cruft = json.loads((created / ".cruft.json").read_text())
    assert (cruft["template"], cruft["commit"]) == (str(history.repo), history.v1)
    ours, theirs = tree(render(Options("crufty"), tmp_path)), tree(created)
    assert theirs.pop(".cruft.json") and theirs.keys() == ours.keys()
    assert {name for name in ours if ours[name] != theirs[name]} == {RECORD}
    assert json.loads(ours[RECORD][0]) | {"template_commit": history.v1} == made
    assert not (created / MARKER).exists()


def _two_copies(created: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The created project twice, as two users would have it: in git, with the same edits
    of their own (a file added, README's title and a config default changed)."""
    copies = []
    for name in ("cruft", "gen"):
        project = tmp_path / name / created.name
        shutil.copytree(created, project, symlinks=True)
        _edit(project / "README.md", "# crufty\n", "# crufty: my runs\n")
        _edit(project / "config.yaml", "\nbatch_size: 32\n", "\nbatch_size: 64\n")
        (project / "notes").mkdir()
        (project / "notes" / "mine.md").write_text("my notes\n")
        git(project, "init", "-q")
        versions.commit_all(project, "created, then edited")
        copies.append(project)
    return copies[0], copies[1]


def _update_both(
    venv: Path, sides: tuple[Path, Path], repo: Path, commit: str
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """cruft update on one copy, gen update (this checkout's) on the other, to ``commit``:
    cruft's output, gen's run."""
    cruft_side, gen_side = sides
    by_cruft = run(
        [venv, "-m", "cruft", "update", "--skip-apply-ask", "--checkout", commit], cruft_side
    )
    to = [sys.executable, "-m", "generator", "update", "--template", repo, "--to", commit]
    return by_cruft.stdout + by_cruft.stderr, run(to, gen_side, ok=False)


def test_cruft_update_takes_what_gen_update_takes(
    venv: Path, created: Path, history: History, tmp_path: Path
) -> None:
    """Version 1 to 2, 3 and 4 in turn, over the same edited project: the same files, bytes and
    modes each time (the binary, the deleted and added files, the mode change, the
    record, the pristine render the post-gen hook keeps), but for .cruft.json, cruft's own
    record, which gen keeps as a file of yours. cruft's newer render in each sees the
    newer code: version 2's generator package (its version and commit in the record),
    version 3's Jinja extension (its new filter), version 4's commit."""
    sides = _two_copies(created, tmp_path)
    for commit, version in ((history.v2, V2), (history.v3, V3), (history.v4, V3)):
        said_cruft, by_gen = _update_both(venv, sides, history.repo, commit)
        assert by_gen.returncode == 0, by_gen.stdout + by_gen.stderr
        mine, theirs = tree(sides[0]), tree(sides[1])
        assert json.loads(mine.pop(".cruft.json")[0])["commit"] == commit
        assert json.loads(theirs.pop(".cruft.json")[0])["commit"] == history.v1
        assert mine.keys() == theirs.keys(), said_cruft
        assert not [name for name in mine if mine[name] != theirs[name]], said_cruft
        made = record(sides[0])
        assert (made["generator"], made["template_commit"]) == (f"train-template {version}", commit)
        for project in sides:
            versions.commit_all(project, f"template {version}")
    cruft_side = sides[0]
    assert (cruft_side / V3_FILE).read_text() == "CRUFTY\n"
    assert (cruft_side / "train.py").read_text().endswith(V4_LINE)
    assert not (cruft_side / versions.DELETED_IN_V2).exists()
    readme = (cruft_side / "README.md").read_text()
    assert readme.startswith("# crufty: my runs\n") and versions.V2_README_LINE in readme
    config = (cruft_side / "config.yaml").read_text()
    assert "\nbatch_size: 64\n" in config and "\nlr: 0.02\n" in config


def test_a_conflict_cruft_rejects_the_hunk_where_gen_writes_markers(
    venv: Path, created: Path, history: History, tmp_path: Path
) -> None:
    """Both changed env.sh's second line (version 2 too). Every other file ends the same.

    The difference: cruft applies its diff with ``git apply -3``, which needs each changed
    file in git's index; projects ignore the template's digits data (``*-ubyte.gz``), which
    version 2 changes, so cruft falls back to ``git apply --reject``: env.sh keeps your
    text, the template's hunk goes to env.sh.rej, and cruft records the project as updated
    (.cruft.json and the template's record at version 2). (An update that changes no
    ignored file gets markers from ``git apply -3``, and is recorded as done all the same.)
    gen update writes both sides into env.sh between markers (with index stages for git
    mergetool) and records version 2 only after ``gen update --continue``: the record and
    .train-template/ (its pristine render, its pending merge) differ until then."""
    sides = cruft_side, gen_side = _two_copies(created, tmp_path)
    first = "# shellcheck shell=sh\n"
    for project in sides:
        _edit(project / "env.sh", first, f"{first}# mine: proxy settings\n")
        versions.commit_all(project, "mine")
    yours = (cruft_side / "env.sh").read_text()
    said_cruft, by_gen = _update_both(venv, sides, history.repo, history.v2)
    assert by_gen.returncode == 1, by_gen.stdout + by_gen.stderr
    assert "does not exist in index" in said_cruft, said_cruft

    assert (cruft_side / "env.sh").read_text() == yours
    assert f"+{V2_COMMENT}" in (cruft_side / "env.sh.rej").read_text()
    assert record(cruft_side)["template_commit"] == history.v2
    merged = (gen_side / "env.sh").read_text()
    assert "<<<<<<< yours\n# mine: proxy settings\n" in merged and V2_COMMENT in merged
    assert record(gen_side)["template_commit"] == history.v1

    mine, theirs = tree(cruft_side), tree(gen_side)
    apart = {".cruft.json", "env.sh", "env.sh.rej", RECORD}
    same = [name for name in mine if name not in apart and not name.startswith(".train-template/")]
    assert same and all(mine[name] == theirs.get(name) for name in same)
    only_gen = {name for name in theirs if name not in mine}
    assert all(name.startswith(".train-template/pending/") for name in only_gen), only_gen
