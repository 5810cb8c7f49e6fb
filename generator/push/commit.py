"""Commit a project and push it to a git platform: plan, scan, commit, push, record.

The commit is built beside the user's repository (a temporary index and object
directory inside .git) and pushed as an object; the local branch, the index and the
object store change only after the push succeeded, so a failed push leaves the
repository exactly as it was. Credentials travel as remote.py arranges: never in a
URL, a file or an output.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from generator.errors import GitFailed, IdentityMissing, OptionError, UnsafeFiles
from generator.git import Git, base_env, public_url
from generator.push import filescan
from generator.push.filescan import DEFAULT_MAX_MB, TOKEN_ENV
from generator.push.remote import Credentials, askpass, check_remote, classify, refusal, url_user
from generator.render.project import read_record

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@dataclass(frozen=True)
class PushOptions:
    """What gen push is asked to do."""

    project_dir: Path
    remote: str | None = None
    branch: str = "main"
    message: str | None = None
    credentials: Credentials | None = None
    token_env: str = TOKEN_ENV
    max_file_mb: float = DEFAULT_MAX_MB
    dry_run: bool = False
    interactive: bool = False


@dataclass(frozen=True)
class Change:
    """One path the commit adds (A), modifies (M) or deletes (D)."""

    status: str
    path: str


@dataclass(frozen=True)
class PushResult:
    """What gen push did (or, on a dry run, would do)."""

    remote: str
    branch: str
    commit: str | None
    parent: str | None
    changes: list[Change]
    created_repo: bool
    origin_added: bool
    dry_run: bool = False
    remote_lines: list[str] = field(default_factory=list)

    @property
    def new_commit(self) -> bool:
        return bool(self.changes)


def default_message() -> str:
    return f"gen push: {datetime.now().astimezone():%Y-%m-%d %H:%M %z}"


@dataclass(frozen=True)
class _Plan:
    """The checked request: where to push, as whom, and the repository's state before."""

    options: PushOptions
    project_dir: Path
    remote: str
    message: str
    credentials: Credentials | None
    top: str | None  # the repository's root; None: the project is no repository yet
    origin: str | None


@dataclass
class _Repo:
    """The repository the commit is built in, and whether the push went through."""

    git_dir: Path
    objects: Path
    pushed: bool = False


@dataclass(frozen=True)
class _Staged:
    parent: str | None
    tree: str
    changes: list[Change]
    scratch: Path
    env: dict[str, str]

    @property
    def unchanged(self) -> bool:
        return self.parent is not None and not self.changes


def push_project(options: PushOptions) -> PushResult:
    """Commit what the project holds and push it to the branch of the remote.

    Raises UnsafeFiles before anything is written when a file must not be pushed and
    PushFailed subclasses when the push fails; either way the repository is as it was.
    """
    git, plan = _plan(options)
    with _repository(git, plan) as repo, _staging(repo) as (scratch, env):
        staged = _scan(git, plan, scratch, env)
        result = PushResult(
            plan.remote,
            options.branch,
            staged.parent if staged.unchanged else None,
            staged.parent,
            staged.changes,
            created_repo=plan.top is None,
            origin_added=plan.origin is None,
            dry_run=options.dry_run,
        )
        if options.dry_run:
            return result
        commit = _commit(git, plan, staged)
        said = _push(git, plan, commit, staged.env)
        repo.pushed = True
        _adopt(git, plan, staged, commit, repo)
    _record(git, plan, commit)
    lines = [line for line in said.splitlines() if line.startswith("remote:")]
    return replace(result, commit=commit, remote_lines=lines)


def _plan(options: PushOptions) -> tuple[Git, _Plan]:
    """Check the request against the project before anything is written."""
    project_dir = options.project_dir.resolve()
    read_record(project_dir)
    credentials, token_env = options.credentials, options.token_env
    token = credentials.token if credentials else ""
    git = Git(project_dir, base_env(options.interactive), [token])
    if git.ok("check-ref-format", "--branch", options.branch) is None:
        raise OptionError("--branch", f"{options.branch!r} is not a valid branch name")
    message = options.message or default_message()
    if token and token in message:
        raise OptionError("--message", f"it holds the value of ${token_env}; leave that out")
    top = git.ok("rev-parse", "--show-toplevel")
    if top is not None and Path(top).resolve() != project_dir:
        raise GitFailed(
            f"{project_dir} is inside the git repository {top}, not its root: gen push pushes "
            "a project that is its own repository (move it out, or run git init in it)"
        )
    origin = git.ok("remote", "get-url", "origin") if top else None
    remote = options.remote or origin
    if not remote:
        raise OptionError(
            "--remote",
            "the project has no origin yet: pass the platform repository's URL, e.g. "
            "https://openi.pcl.ac.cn/USER/REPO.git",
        )
    check_remote(remote, credentials, token_env)
    if credentials and url_user(remote):
        credentials = replace(credentials, user=url_user(remote) or credentials.user)
    if not options.dry_run:
        _check_identity(git)
    return git, _Plan(options, project_dir, remote, message, credentials, top, origin)


def _check_identity(git: Git) -> None:
    for what in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        if git.ok("-c", "user.useConfigOnly=true", "var", what) is None:
            raise IdentityMissing(
                "git does not know who you are: run git config --global user.name "
                '"Your Name" and git config --global user.email you@example.com '
                "(the platform shows them on each commit), then run gen push again"
            )


@contextmanager
def _repository(git: Git, plan: _Plan) -> Iterator[_Repo]:
    """The repository to build the commit in: the project's, a new one (removed again
    unless the push succeeded) or, for a dry run outside git, a scratch one."""
    created = False
    scratch_repo = None
    if plan.top is None and plan.options.dry_run:
        # Somewhere to compute the commit without creating .git in the project.
        scratch_repo = Path(tempfile.mkdtemp(prefix="gen-push-dry-"))
        git("init", "-q", str(scratch_repo))
        git.env.update(GIT_DIR=str(scratch_repo / ".git"), GIT_WORK_TREE=str(plan.project_dir))
    elif plan.top is None:
        git("init", "-q", f"--initial-branch={plan.options.branch}")
        created = True
    repo = None
    try:
        git_dir = Path(git("rev-parse", "--absolute-git-dir").strip())
        common = git("rev-parse", "--path-format=absolute", "--git-common-dir").strip()
        repo = _Repo(git_dir, Path(common) / "objects")
        yield repo
    except BaseException:
        if created and not (repo and repo.pushed):
            shutil.rmtree(plan.project_dir / ".git", ignore_errors=True)
        raise
    finally:
        if scratch_repo is not None:
            shutil.rmtree(scratch_repo, ignore_errors=True)


@contextmanager
def _staging(repo: _Repo) -> Iterator[tuple[Path, dict[str, str]]]:
    """A scratch index and object directory inside .git, removed on the way out."""
    scratch = repo.git_dir / f"gen-push-{uuid.uuid4().hex[:12]}"
    (scratch / "objects" / "pack").mkdir(parents=True)
    (scratch / "objects" / "info").mkdir()
    env = {
        "GIT_INDEX_FILE": str(scratch / "index"),
        "GIT_OBJECT_DIRECTORY": str(scratch / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(repo.objects),
    }
    try:
        yield scratch, env
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _scan(git: Git, plan: _Plan, scratch: Path, env: dict[str, str]) -> _Staged:
    """Scan what would be committed, then write its tree into the scratch store."""
    parent = git.ok("rev-parse", "-q", "--verify", "HEAD^{commit}")
    git("read-tree", *([parent] if parent else ["--empty"]), **env)
    # Exactly what `git add -A` takes: tracked files and untracked ones not ignored.
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", **env)
    root = plan.project_dir
    paths = sorted({p for p in listed.split("\0") if p and os.path.lexists(root / p)})
    findings = filescan.scan(
        root,
        paths,
        max_bytes=int(plan.options.max_file_mb * 1e6),
        token=plan.credentials.token if plan.credentials else None,
        token_env=plan.options.token_env,
    )
    if findings:
        raise UnsafeFiles([finding.line() for finding in findings])
    git("add", "-A", **env)
    tree = git("write-tree", **env).strip()
    if parent is None:
        if tree == EMPTY_TREE:
            raise GitFailed(f"{root} holds no file to commit (all are ignored)")
        names = git("ls-tree", "-r", "-z", "--name-only", tree, **env).split("\0")
        return _Staged(None, tree, [Change("A", name) for name in names if name], scratch, env)
    out = git("diff-tree", "-r", "-z", "--no-renames", "--name-status", parent, tree, **env)
    fields = [f for f in out.split("\0") if f]
    changes = [Change(fields[i][0], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]
    return _Staged(parent, tree, changes, scratch, env)


def _commit(git: Git, plan: _Plan, staged: _Staged) -> str:
    """The commit to push: a new one over the staged tree, or the last one when unchanged."""
    if staged.unchanged:
        assert staged.parent is not None
        return staged.parent
    parents = ["-p", staged.parent] if staged.parent else []
    return git(
        *("-c", "user.useConfigOnly=true", "commit-tree", staged.tree, *parents, "-F", "-"),
        stdin=plan.message,
        **staged.env,
    ).strip()


def _push(git: Git, plan: _Plan, commit: str, env: dict[str, str]) -> str:
    """Push the commit object to the branch; return what the server said."""
    branch = plan.options.branch
    with askpass(plan.credentials, plan.remote) as (options, askpass_env):
        run = git.run(
            *options,
            "push",
            plan.remote,
            f"{commit}:refs/heads/{branch}",
            env={**env, **askpass_env},
        )
    if run.returncode != 0:
        how = refusal(plan.credentials, plan.remote, plan.options.token_env)
        raise classify(run, plan.remote, branch, f"{how}, then run gen push again")
    return run.stderr


def _adopt(git: Git, plan: _Plan, staged: _Staged, commit: str, repo: _Repo) -> None:
    """Only now does the repository change: the commit's objects, the branch, the index."""
    if staged.unchanged:
        return
    for source in (staged.scratch / "objects").glob("[0-9a-f][0-9a-f]/*"):
        dest = repo.objects / source.parent.name / source.name
        if not dest.exists():
            dest.parent.mkdir(exist_ok=True)
            os.replace(source, dest)
    old = staged.parent or "0" * 40  # fails if someone moved HEAD meanwhile
    git("update-ref", "-m", f"gen push to {public_url(plan.remote)}", "HEAD", commit, old)
    os.replace(staged.scratch / "index", repo.git_dir / "index")


def _record(git: Git, plan: _Plan, commit: str) -> None:
    """Make the remote origin when there was none; track the pushed branch."""
    origin = plan.origin
    if origin is None:
        git("remote", "add", "origin", plan.remote)
        origin = plan.remote
    if origin != plan.remote:
        return
    branch = plan.options.branch
    git("update-ref", f"refs/remotes/origin/{branch}", commit)
    current = git.ok("symbolic-ref", "-q", "--short", "HEAD")
    if current and git.ok("config", f"branch.{current}.remote") is None:
        git("config", f"branch.{current}.remote", "origin")
        git("config", f"branch.{current}.merge", f"refs/heads/{branch}")
