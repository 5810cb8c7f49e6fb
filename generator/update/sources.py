"""The renders `gen update` merges: this tool's template, or any commit of a template
repository. Each render happens in a temporary directory: the hooks check the answers
and lay the files out there, and nothing outside it changes (no replay file, no docker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from generator import __version__
from generator.errors import GenError, UpdateError
from generator.git import Git
from generator.render.options import Options
from generator.render.pristine import RECORD, Entry, snapshot
from generator.update.order import History, Identity, version_in


@dataclass(frozen=True)
class Render:
    """One render: its files (binary ones with their bytes) and its record's bytes."""

    files: dict[str, Entry]
    record: bytes

    @property
    def label(self) -> str:
        return label(json.loads(self.record))


def label(record: dict[str, object]) -> str:
    """How conflict markers and messages name the template a record came from."""
    version = str(record.get("generator", "train-template ?")).removeprefix("train-template ")
    commit = str(record.get("template_commit") or "")
    return f"template {version}" + (f" ({commit[:12]})" if commit else "")


def _read(created: Path) -> Render:
    return Render(snapshot(created, keep_binary=True), (created / RECORD).read_bytes())


def own(options: Options) -> Render:
    """This tool's template rendered with ``options``."""
    from generator.render.project import render

    with tempfile.TemporaryDirectory(prefix="gen-update-") as tmp:
        return _read(render(options, Path(tmp)))


class TemplateRepo:
    """A template's git history (a path or URL), cloned into ``workdir``."""

    def __init__(self, source: str, workdir: Path) -> None:
        self.source = source
        self.root = workdir / "template"
        self.workdir = workdir
        local = Path(source).expanduser()
        where = str(local.resolve()) if local.exists() else source
        try:
            Git(workdir)("clone", "--quiet", "--no-checkout", where, str(self.root))
        except GenError as err:
            raise UpdateError(
                f"--template {source}: not a git repository gen can clone ({err})"
            ) from err
        self.git = Git(self.root)

    def resolve(self, ref: str) -> str:
        """The commit a ref, tag, branch or version (``1.2`` finds ``v1.2``) names."""
        for name in (ref, f"v{ref}", f"origin/{ref}"):
            commit = self.git.ok("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
            if commit:
                return commit
        raise UpdateError(
            f"--to {ref}: no such commit, tag or branch in {self.source} "
            "(give a commit, a tag such as v0.2.0, a version such as 0.2.0, or a branch)"
        )

    def history(self) -> History:
        """Every commit the repository's branches and tags reach, with its parents."""
        return History(self.git("rev-list", "--parents", "--all"))

    def identity(self, commit: str) -> Identity:
        """The template at ``commit``: the version its generator/__init__.py names."""
        return Identity(version_in(self.git.ok("show", f"{commit}:generator/__init__.py")), commit)

    def render(self, commit: str, options: Options, what: str = "the template") -> Render:
        """The template as of ``commit``, rendered by the real cookiecutter with its hooks;
        ``what`` starts the line that says it has no template to render."""
        if self.git.ok("cat-file", "-e", f"{commit}:cookiecutter.json") is None:
            raise UpdateError(
                f"{what}: {self.source} at {commit[:12]} has no template (no cookiecutter.json): "
                "the commit is from before the template existed"
            )
        self.git("checkout", "--quiet", "--force", "--detach", commit)
        out = Path(tempfile.mkdtemp(prefix="render-", dir=self.workdir))
        config = self.workdir / "cookiecutter.yaml"
        # A config of our own: the user's default_context must not change the answers,
        # and the replay file goes to the temporary directory, not to ~.
        config.write_text(
            f"cookiecutters_dir: {self.workdir / 'cookiecutters'}\n"
            f"replay_dir: {self.workdir / 'replay'}\n",
            encoding="utf-8",
        )
        answers = [f"{key}={value}" for key, value in options.as_context().items()]
        # Run from the template's root, named absolutely, so that its own generator
        # package is imported, not this tool's: by the Jinja extension (the root is
        # sys.path[0]) and by the hooks of early templates, which put _repo_dir first on
        # their path in the new project's directory (a "." there is not the template).
        result = subprocess.run(
            [sys.executable, "-m", "cookiecutter", "--no-input", "-o", str(out), str(self.root)]
            + answers,
            cwd=self.root,
            env={**os.environ, "COOKIECUTTER_CONFIG": str(config), "PYTHONPATH": ""},
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            said = (result.stderr.strip().splitlines() or ["(nothing)"])[-1]
            raise UpdateError(f"the template at {commit[:12]} failed to render: {said}")
        created = out / options.project
        if not (created / RECORD).is_file():
            raise UpdateError(
                f"{what}: the template at {commit[:12]} makes projects without {RECORD}: "
                "it is from before gen update could follow a template; pick a later commit"
            )
        return _with_commit(_read(created), commit)


def _with_commit(rendered: Render, commit: str) -> Render:
    """Older templates do not record their commit; the render says which it was."""
    record = json.loads(rendered.record)
    if record.get("template_commit") == commit:
        return rendered
    record["template_commit"] = commit
    end = "\n" if rendered.record.endswith(b"\n") else ""
    return Render(rendered.files, (json.dumps(record, indent=2) + end).encode())


def this_version(to: str | None) -> None:
    """Without --template only this tool's own template can be rendered."""
    if to is not None and to.removeprefix("v") != __version__:
        raise UpdateError(
            f"--to {to}: this gen is {__version__}; install train-template {to} "
            "(pip install -U / pipx upgrade), or pass --template PATH|URL with its git history"
        )
