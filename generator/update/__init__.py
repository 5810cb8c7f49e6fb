"""`gen update`: bring a newer template into an existing project, file by file.

Base: the pristine render the project keeps (.train-template/pristine.tar.gz), else
the recorded commit of --template rendered again. Theirs: the new render. Ours: the
work tree. generator/update/plan.py decides each path; merge.py carries it out.
Everything is decided and merged in memory before the first byte is written.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from generator import pristine
from generator.errors import OptionError, UpdateConflicts, UpdateError
from generator.git import Git
from generator.options import Options, validate
from generator.project import read_record, template_variables
from generator.update import merge, sources
from generator.update.merge import Labels, Result
from generator.update.plan import Action, decide

PENDING = f"{pristine.STATE_DIR}/pending"


@dataclass(frozen=True)
class Plan:
    """Every step, carried out in memory, and the state to record once it is on disk."""

    results: list[Result]
    base: dict[str, pristine.Entry]
    theirs: sources.Render
    changes_state: bool

    @property
    def changes(self) -> list[Result]:
        return [r for r in self.results if r.step.action is not Action.KEEP]

    @property
    def conflicts(self) -> list[str]:
        return [r.step.path for r in self.results if r.conflicted]


def new_options(old: Options, sets: Mapping[str, str]) -> Options:
    """The recorded answers with ``--set`` applied, validated as gen new does."""
    if "project" in sets:
        raise OptionError("project", "is the project directory's name; gen update keeps it")
    known = template_variables()
    for key in sets:
        if key not in known:
            raise OptionError(key, f"unknown option; known options are {', '.join(known)}")
    return validate({**old.as_context(), **sets})


def prepare(
    project_dir: Path,
    *,
    to: str | None = None,
    template: str | None = None,
    sets: Mapping[str, str] | None = None,
) -> Plan:
    """Render base and theirs, decide and merge every path; write nothing."""
    old = read_record(project_dir)
    record = json.loads((project_dir / pristine.RECORD).read_text(encoding="utf-8"))
    options = new_options(old, sets or {})
    if template is None:
        sources.this_version(to)
    with tempfile.TemporaryDirectory(prefix="gen-update-") as tmp:
        repo = sources.TemplateRepo(template, Path(tmp)) if template else None
        base = pristine.load(project_dir)
        if base is None:
            base = _base_from_history(repo, record, old)
        if repo is None:
            theirs = sources.own(options)
        else:
            theirs = repo.render(repo.resolve(to or "HEAD"), options)
    labels = Labels("yours", sources.label(record), theirs.label)
    if labels.theirs == labels.base:
        # The same template with other answers: say which.
        changed = [f"{k}={v}" for k, v in options.as_context().items() if old.as_context()[k] != v]
        labels = replace(labels, theirs=f"{labels.theirs} with {' '.join(changed)}")
    results = []
    for path in pristine.names(base, theirs.files):
        ours = pristine.read_file(project_dir / path)
        step = decide(path, base.get(path), theirs.files.get(path), ours)
        if step is not None:
            results.append(merge.carry_out(step, base.get(path), ours, labels))
    kept = project_dir / pristine.ARCHIVE
    changes_state = (project_dir / pristine.RECORD).read_bytes() != theirs.record or (
        not kept.is_file() or kept.read_bytes() != pristine.dumps(theirs.files)
    )
    return Plan(results, base, theirs, changes_state)


def _base_from_history(
    repo: sources.TemplateRepo | None, record: dict[str, object], old: Options
) -> dict[str, pristine.Entry]:
    commit = str(record.get("template_commit") or "")
    if not commit or commit.endswith("-dirty"):
        raise UpdateError(
            f"this project keeps no pristine render ({pristine.ARCHIVE}) and records no clean "
            "template commit to make one from; regenerate it with gen new and copy your "
            "changes over"
        )
    if repo is None:
        raise UpdateError(
            f"this project keeps no pristine render ({pristine.ARCHIVE}); pass --template "
            f"PATH|URL of the template's git history to render its commit {commit[:12]}"
        )
    return repo.render(repo.resolve(commit), old).files


def check_clean(project_dir: Path) -> Git | None:
    """The project's git, None outside one; a tree with uncommitted changes is refused."""
    git = Git(project_dir)
    if git.ok("rev-parse", "--show-prefix") is None:
        return None
    if git("status", "--porcelain", "--untracked-files=no", "--", "."):
        raise UpdateError(
            f"{project_dir} has uncommitted changes (git status); commit or stash them first, "
            "so that the update can be reviewed and undone"
        )
    return git


def apply(project_dir: Path, plan: Plan, git: Git | None) -> None:
    """Write the plan's results; record the new template on success, else keep it pending
    and raise UpdateConflicts naming each conflicted path."""
    for result in plan.changes:
        path = project_dir / result.step.path
        if result.step.action is Action.ADD and (path.exists() or path.is_symlink()):
            raise UpdateError(f"{result.step.path}: the template adds a file where you have one")
    conflicts = plan.conflicts
    if conflicts:
        _save_pending(project_dir, plan)
    for result in plan.changes:
        theirs = result.step.theirs
        merge.write(project_dir, result, theirs.data if theirs else None)
    if conflicts and git is not None:
        _stage(project_dir, plan, git)
    if conflicts:
        raise UpdateConflicts([f"{path}: conflict" for path in conflicts])
    _record(project_dir, plan.theirs.record, plan.theirs.files)


def _record(project_dir: Path, record: bytes, files: dict[str, pristine.Entry]) -> None:
    pristine.save(project_dir, files)
    (project_dir / pristine.RECORD).write_bytes(record)


def _stage(project_dir: Path, plan: Plan, git: Git) -> None:
    prefix = git.ok("rev-parse", "--show-prefix") or ""
    staged = []
    yours = _pending_yours(project_dir)
    for result in plan.results:
        step = result.step
        if result.conflicted and step.action is Action.MERGE and step.theirs is not None:
            ours = yours.get(step.path)
            if ours is not None:
                staged.append((step.path, plan.base.get(step.path), ours, step.theirs))
    merge.stage_conflicts(git, prefix, staged)


def _save_pending(project_dir: Path, plan: Plan) -> None:
    """Keep what --continue records and what --abort puts back."""
    where = project_dir / PENDING
    where.mkdir(parents=True, exist_ok=True)
    yours = {}
    for result in plan.changes:
        path = result.step.path
        found = pristine.read_file(project_dir / path, keep_binary=True)
        if found is not None:
            yours[path] = replace(found, binary=False)
    pristine.save(project_dir, yours, f"{PENDING}/yours.tar.gz")
    pristine.save(project_dir, plan.theirs.files, f"{PENDING}/pristine.tar.gz")
    state = {
        "record": plan.theirs.record.decode("utf-8"),
        "touched": [r.step.path for r in plan.changes],
        "conflicts": plan.conflicts,
    }
    (where / "state.json").write_text(json.dumps(state, indent=1), encoding="utf-8")


def _pending_yours(project_dir: Path) -> dict[str, pristine.Entry]:
    return pristine.load(project_dir, f"{PENDING}/yours.tar.gz") or {}


def pending(project_dir: Path) -> dict[str, object] | None:
    """The update waiting for its conflicts to be resolved, None when there is none."""
    path = project_dir / PENDING / "state.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def finish(project_dir: Path) -> None:
    """--continue: record the pending template once no conflict is left."""
    state = _require_pending(project_dir)
    left = []
    for path in state["conflicts"]:
        target = project_dir / path
        sidecar = target.with_name(target.name + merge.SIDECAR)
        if sidecar.exists():
            left.append(f"{path}: delete {sidecar.name} once {path} is as you want it")
        elif target.is_file() and b"\n<<<<<<< yours" in b"\n" + target.read_bytes():
            left.append(f"{path}: conflict markers remain")
    git = Git(project_dir)
    if git.ok("rev-parse", "--show-prefix") is not None:
        unmerged = git("ls-files", "-u", "--", *state["conflicts"])
        if unmerged and not left:
            left.append("git still lists unmerged paths: git add them once resolved")
    if left:
        raise UpdateConflicts(left)
    files = pristine.load(project_dir, f"{PENDING}/pristine.tar.gz") or {}
    _record(project_dir, str(state["record"]).encode("utf-8"), files)
    shutil.rmtree(project_dir / PENDING)


def abort(project_dir: Path) -> None:
    """--abort: put back every file the pending update changed, and forget it."""
    state = _require_pending(project_dir)
    yours = _pending_yours(project_dir)
    git = Git(project_dir)
    in_git = git.ok("rev-parse", "--show-prefix") is not None
    if in_git and state["touched"]:
        git("reset", "--quiet", "--", *state["touched"])
    for path in state["touched"]:
        target = project_dir / path
        sidecar = target.with_name(target.name + merge.SIDECAR)
        sidecar.unlink(missing_ok=True)
        before = yours.get(path)
        if before is None:
            target.unlink(missing_ok=True)
        else:
            merge.restore(target, before)
    shutil.rmtree(project_dir / PENDING)


def _require_pending(project_dir: Path) -> dict[str, list[str]]:
    read_record(project_dir)
    state = pending(project_dir)
    if state is None:
        raise UpdateError(f"no update is waiting in {project_dir}; run gen update")
    return state  # type: ignore[return-value]
