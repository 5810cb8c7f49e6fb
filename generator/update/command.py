"""`gen update`: bring a newer template into an existing project, file by file.

Base: the pristine render the project keeps (.train-template/pristine.tar.gz), else
the recorded commit of --template rendered again. Theirs: the new render. Ours: the
work tree. generator/update/plan.py decides each path; merge.py carries it out.
Everything is decided and merged in memory before the first byte is written. Before any
render, order.py refuses a record missing an answer its template had, and a target older
than the project's template unless --to names it; state.py keeps, and checks before use,
what a conflicted update leaves for --continue and --abort.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from generator import __version__
from generator.errors import OptionError, UpdateConflicts, UpdateError
from generator.git import Git
from generator.render import pristine
from generator.render.options import Options, validate
from generator.render.project import read_record, template_dir, template_variables
from generator.update import merge, order, sources, state
from generator.update.merge import Labels, Result
from generator.update.order import Direction, History, Identity
from generator.update.plan import Action, decide


class ConflictsOutsideGit(UpdateConflicts):
    """UpdateConflicts in a project outside git: no index stages, nothing to git add."""

    def details(self) -> list[str]:
        return [
            "resolve them: edit each file until no <<<<<<< yours / ||||||| / ======= / >>>>>>> "
            "marker is left (PATH.gen-new is the template's binary: keep yours or move it "
            "over yours), then: gen update --continue",
            "or put everything back with: gen update --abort",
        ]


class ConflictsPredicted(UpdateError):
    """Raised by --dry-run when the update it plans would leave conflicts."""


@dataclass(frozen=True)
class Plan:
    """Every step, carried out in memory, and the state to record once it is on disk."""

    results: list[Result]
    base: dict[str, pristine.Entry]
    theirs: sources.Render
    changes_state: bool
    direction: Direction = Direction.FORWARD

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
    options = validate({**old.as_context(), **sets})
    if options.task != old.task:
        raise OptionError(
            "task",
            f"this project's task is {old.task}: its src/model.py, src/data.py and src/step.py "
            f"are yours, and gen update does not replace them; start a project with "
            f"gen new --task {options.task} and move what you keep",
        )
    return options


def prepare(
    project_dir: Path,
    *,
    to: str | None = None,
    template: str | None = None,
    sets: Mapping[str, str] | None = None,
) -> Plan:
    """Check the record and the direction, render base and theirs, decide and merge every
    path; write nothing."""
    old = read_record(project_dir)
    record = json.loads((project_dir / pristine.RECORD).read_text(encoding="utf-8"))
    options = new_options(old, sets or {})
    if template is None:
        sources.this_version(to)
    with tempfile.TemporaryDirectory(prefix="gen-update-") as tmp:
        repo = sources.TemplateRepo(template, Path(tmp)) if template else None
        base = _kept_base(project_dir)
        commit = _recorded_commit(repo, record) if base is None else ""
        way = _check_target(record, repo, to, sets or {})
        if base is None:
            assert repo is not None
            base = repo.render(repo.resolve(commit), old, "the recorded commit").files
        if repo is None:
            theirs = sources.own(options)
        else:
            what = f"--to {to}" if to else f"the HEAD of {template}"
            theirs = repo.render(repo.resolve(to or "HEAD"), options, what)
    return _merge_all(project_dir, record, old, options, base, theirs, way)


def _check_target(
    record: dict[str, object],
    repo: sources.TemplateRepo | None,
    to: str | None,
    sets: Mapping[str, str],
) -> Direction:
    """Refuse a record missing an answer, and a move to an older template without --to."""
    history: History | None
    if repo is None:
        target, history = order.installed(template_dir())
        where, explicit = "this gen's template {}", __version__
    else:
        commit = repo.resolve(to or "HEAD")
        target, history = repo.identity(commit), repo.history()
        where, explicit = f"template {{}} at the HEAD of {repo.source}", commit[:12]
    project = Identity.of_record(record)
    missing = order.missing_keys(record, template_variables(), history, sets)
    order.refuse_missing(missing, project)
    if to is not None:
        return order.direction(project, target, history)
    return order.check(project, target, history, where, explicit)


def _merge_all(
    project_dir: Path,
    record: dict[str, object],
    old: Options,
    options: Options,
    base: dict[str, pristine.Entry],
    theirs: sources.Render,
    way: Direction,
) -> Plan:
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
    return Plan(results, base, theirs, changes_state, way)


def _kept_base(project_dir: Path) -> dict[str, pristine.Entry] | None:
    """The pristine render the project keeps; one line when it is damaged."""
    try:
        return pristine.load(project_dir)
    except pristine.Damaged as err:
        in_git = Git(project_dir).ok("rev-parse", "--show-prefix") is not None
        restore = f"restore it (git checkout HEAD -- {pristine.ARCHIVE}), or " if in_git else ""
        raise UpdateError(
            f"{err}; it is the render this project was made from, the base of the merge; "
            f"nothing was changed: {restore}delete it and pass --template PATH|URL of the "
            "template's history to render the base again"
        ) from err


def _recorded_commit(repo: sources.TemplateRepo | None, record: dict[str, object]) -> str:
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
    return commit


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
    yours = {}
    if conflicts:
        # Each file the update changes, as it is: what --abort puts back.
        for result in plan.changes:
            found = pristine.read_file(project_dir / result.step.path, keep_binary=True)
            if found is not None:
                yours[result.step.path] = replace(found, binary=False)
        touched = [r.step.path for r in plan.changes]
        state.save(project_dir, plan.theirs.record, touched, conflicts, yours, plan.theirs.files)
    for result in plan.changes:
        theirs = result.step.theirs
        merge.write(project_dir, result, theirs.data if theirs else None)
    if conflicts and git is not None:
        _stage(project_dir, plan, git, yours)
    if conflicts:
        kind = UpdateConflicts if git is not None else ConflictsOutsideGit
        raise kind([f"{path}: conflict" for path in conflicts])
    _record(project_dir, plan.theirs.record, plan.theirs.files)


def _record(project_dir: Path, record: bytes, files: dict[str, pristine.Entry]) -> None:
    pristine.save(project_dir, files)
    pristine.write_atomic(project_dir / pristine.RECORD, record)


def _stage(project_dir: Path, plan: Plan, git: Git, yours: dict[str, pristine.Entry]) -> None:
    prefix = git.ok("rev-parse", "--show-prefix") or ""
    staged = []
    for result in plan.results:
        step = result.step
        if result.conflicted and step.action is Action.MERGE and step.theirs is not None:
            ours = yours.get(step.path)
            if ours is not None:
                staged.append((step.path, plan.base.get(step.path), ours, step.theirs))
    merge.stage_conflicts(git, prefix, staged)


def _in_git(project_dir: Path) -> Git | None:
    git = Git(project_dir)
    return git if git.ok("rev-parse", "--show-prefix") is not None else None


def _pending(project_dir: Path, need: str) -> state.Pending:
    """The pending update, checked; a directory that is no project is told so first (the
    record itself is not needed: --continue writes the pending one, --abort none)."""
    if not state.exists(project_dir):
        read_record(project_dir)
    return state.load(project_dir, need)


def finish(project_dir: Path) -> None:
    """--continue: record the pending template once no conflict is left."""
    pending = _pending(project_dir, state.THEIRS)
    left = []
    for path in pending.conflicts:
        target = project_dir / path
        sidecar = target.with_name(target.name + merge.SIDECAR)
        if sidecar.exists():
            left.append(f"{path}: delete {sidecar.name} once {path} is as you want it")
        elif target.is_file() and b"\n<<<<<<< yours" in b"\n" + target.read_bytes():
            left.append(f"{path}: conflict markers remain")
    git = _in_git(project_dir)
    if git is not None and pending.conflicts:
        unmerged = git("ls-files", "-u", "--", *pending.conflicts)
        if unmerged and not left:
            left.append("git still lists unmerged paths: git add them once resolved")
    if left:
        raise (UpdateConflicts if git is not None else ConflictsOutsideGit)(left)
    _record(project_dir, pending.record, pending.files)
    state.drop(project_dir)


def abort(project_dir: Path) -> None:
    """--abort: put back every file the pending update changed, and forget it. Every part
    of the state it needs is checked before the first file is touched."""
    pending = _pending(project_dir, state.YOURS)
    git = _in_git(project_dir)
    if git is not None and pending.touched:
        git("reset", "--quiet", "--", *pending.touched)
    for path in pending.touched:
        target = project_dir / path
        sidecar = target.with_name(target.name + merge.SIDECAR)
        sidecar.unlink(missing_ok=True)
        before = pending.files.get(path)
        if before is None:
            target.unlink(missing_ok=True)  # added by the update
        else:
            merge.restore(target, before)
    state.drop(project_dir)
