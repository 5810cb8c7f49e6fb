"""Commit a project and push it to a git platform, credentials kept out of everything.

The commit is built beside the user's repository (a temporary index and object
directory inside .git) and pushed as an object; the local branch, the index and the
object store change only after the push succeeded, so a failed push leaves the
repository exactly as it was. A token reaches git only through a GIT_ASKPASS script
that reads it from the environment when git asks; it is masked in all git prints.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, urlsplit

from generator import filescan
from generator.errors import (
    AuthRefused,
    GitFailed,
    IdentityMissing,
    OptionError,
    PushFailed,
    RemoteDiverged,
    RemoteMissing,
    RemoteUnreachable,
    UnsafeFiles,
)
from generator.filescan import DEFAULT_MAX_MB, TOKEN_ENV
from generator.image import public_url
from generator.project import read_record

USER_ENV = "OPENI_USER"
# Gitea (OpenI) takes an access token as the password whatever the user name is.
TOKEN_USER = "oauth2"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
TAIL_LINES = 12

# Holds no secret: it prints the variable whose name git's environment carries.
ASKPASS_SCRIPT = """#!/bin/sh
# gen push: answers git's prompts from the environment at prompt time.
case "$1" in
  [Uu]sername*) printf '%s\\n' "$GEN_PUSH_USER" ;;
  *) printenv "$GEN_PUSH_TOKEN_ENV" ;;
esac
"""


@dataclass(frozen=True)
class Credentials:
    """An access token (never shown: not in repr) and the user name git sends with it."""

    user: str
    token: str = field(repr=False)
    env_name: str = TOKEN_ENV


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


def credentials_from_env(
    url: str, token_env: str = TOKEN_ENV, environ: Mapping[str, str] = os.environ
) -> Credentials | None:
    """The token in ``$token_env`` with the URL's user name, else $OPENI_USER, else oauth2."""
    token = environ.get(token_env, "")
    if not token:
        return None
    user = urlsplit(url).username if "://" in url else None
    return Credentials(user or environ.get(USER_ENV) or TOKEN_USER, token, token_env)


def check_remote(url: str, credentials: Credentials | None, token_env: str = TOKEN_ENV) -> str:
    """Refuse a remote URL that carries a password or token; return it unchanged."""
    parts = urlsplit(url) if "://" in url else None
    user = (parts.username or "") if parts else ""
    embedded = parts is not None and parts.password is not None
    embedded |= bool(credentials and user and credentials.token in user)
    # A token given as the user name (https://TOKEN@host/...), as GitHub allows.
    embedded |= bool(re.fullmatch(r"[0-9a-f]{40}", user)) or any(
        p.search(user.encode()) for p in filescan.TOKEN_PATTERNS
    )
    if embedded:
        raise OptionError(
            "--remote",
            f"{public_url(url)} was given with a password or token in it; pass the URL "
            f"without it and put the token in ${token_env}",
        )
    return url


def default_message() -> str:
    return f"gen push: {datetime.now().astimezone():%Y-%m-%d %H:%M %z}"


class _Git:
    """Runs git in one work tree with a fixed environment; masks the token in its output."""

    def __init__(self, work_tree: Path, env: dict[str, str], secrets: list[str]) -> None:
        self.work_tree, self.env, self.secrets = work_tree, env, [s for s in secrets if s]

    def mask(self, text: str) -> str:
        for secret in self.secrets:
            for form in {secret, quote(secret, safe="")}:
                text = text.replace(form, "***")
        return text

    def run(
        self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        try:
            result = subprocess.run(
                ["git", *args],
                cwd=self.work_tree,
                input=stdin,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="surrogateescape",
                env={**self.env, **(env or {})},
                stdin=None if stdin is not None else subprocess.DEVNULL,
            )
        except OSError as err:
            raise GitFailed(f"could not run git: {err}; install git and try again") from err
        result.stdout, result.stderr = self.mask(result.stdout), self.mask(result.stderr)
        return result

    def __call__(self, *args: str, stdin: str | None = None, **env: str) -> str:
        """git's stdout; a failure raises GitFailed with what git said."""
        result = self.run(*args, stdin=stdin, env=env)
        if result.returncode != 0:
            # The subcommand: the first word that is neither an option nor a -c value.
            words = [a for a in args if not a.startswith("-") and "=" not in a] or ["command"]
            raise GitFailed(
                f"git {words[0]} failed in {self.work_tree} (exit {result.returncode})",
                result.stderr.strip().splitlines()[-TAIL_LINES:],
            )
        return result.stdout

    def ok(self, *args: str) -> str | None:
        """git's stripped stdout, or None when it fails (a missing ref, no repository)."""
        result = self.run(*args)
        return result.stdout.strip() if result.returncode == 0 else None


def _base_env(interactive: bool) -> dict[str, str]:
    env = dict(os.environ)
    # English messages, which _classify reads, whatever the user's locale.
    env.update(LC_ALL="C", LANGUAGE="C")
    if not interactive:
        env["GIT_TERMINAL_PROMPT"] = "0"
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        env.pop(name, None)
    # Traces would write the Authorization header to a file gen cannot mask.
    for name in [n for n in env if n.startswith("GIT_TRACE") or n == "GIT_CURL_VERBOSE"]:
        del env[name]
    return env


def _check_identity(git: _Git) -> None:
    for what in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        if git.ok("-c", "user.useConfigOnly=true", "var", what) is None:
            raise IdentityMissing(
                "git does not know who you are: run git config --global user.name "
                '"Your Name" and git config --global user.email you@example.com '
                "(the platform shows them on each commit), then run gen push again"
            )


@contextmanager
def _staging(git_dir: Path, objects: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A scratch index and object directory inside .git, removed on the way out."""
    scratch = git_dir / f"gen-push-{uuid.uuid4().hex[:12]}"
    (scratch / "objects" / "pack").mkdir(parents=True)
    (scratch / "objects" / "info").mkdir()
    env = {
        "GIT_INDEX_FILE": str(scratch / "index"),
        "GIT_OBJECT_DIRECTORY": str(scratch / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects),
    }
    try:
        yield scratch, env
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def _askpass(
    credentials: Credentials | None, url: str
) -> Iterator[tuple[list[str], dict[str, str]]]:
    """git options and environment for the push: the token path, or the user's helpers."""
    if credentials is None or not url.startswith(("http://", "https://")):
        yield [], {}
        return
    folder = Path(tempfile.mkdtemp(prefix="gen-push-"))
    try:
        script = folder / "askpass.sh"
        script.write_text(ASKPASS_SCRIPT, encoding="utf-8")
        script.chmod(0o700)
        env = {
            "GIT_ASKPASS": str(script),
            "GEN_PUSH_USER": credentials.user,
            "GEN_PUSH_TOKEN_ENV": credentials.env_name,
            credentials.env_name: credentials.token,
            # The script answers: never fall back to a terminal prompt.
            "GIT_TERMINAL_PROMPT": "0",
        }
        # An empty helper clears the configured ones: none sees the token, none stores it.
        yield ["-c", "credential.helper="], env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _classify(
    result: subprocess.CompletedProcess[str], url: str, branch: str, how: str
) -> PushFailed:
    """The failure git's exit and output describe, with what to do about it."""
    said = (result.stderr + result.stdout).strip()
    tail = said.splitlines()[-TAIL_LINES:]
    low = said.lower()
    shown = public_url(url)
    again = "then run gen push again"
    if "[rejected]" in said or "non-fast-forward" in low or "fetch first" in low:
        return RemoteDiverged(
            f"{branch} on {shown} has commits this project lacks: git pull {shown} {branch} "
            f"(merge or --rebase), {again}",
            tail,
        )
    if re.search(
        r"could not resolve host|failed to connect|connection refused|unable to connect|"
        r"couldn't connect|timed out|network is unreachable|no route to host|"
        r"unable to look up|could not connect",
        low,
    ):
        return RemoteUnreachable(
            f"{shown} does not answer: check the address and the network (a proxy goes in "
            f"https_proxy), {again}",
            tail,
        )
    if re.search(
        r"not found|does not appear to be a git repository|not exported|no such repository|"
        r"returned error: 404",
        low,
    ):
        return RemoteMissing(
            f"{shown} has no such repository: create it on the platform first (empty, without "
            f"a README), or fix --remote, {again}",
            tail,
        )
    if re.search(
        r"authentication failed|could not read (username|password)|returned error: 40[13]|"
        r"permission denied|access denied|unauthorized|forbidden",
        low,
    ):
        return AuthRefused(f"{shown} refused {how}", tail)
    return PushFailed(f"git push to {shown} failed (exit {result.returncode})", tail)


def _adopt_objects(scratch_objects: Path, objects: Path) -> None:
    """Move the pushed commit's objects into the repository's store."""
    for source in scratch_objects.glob("[0-9a-f][0-9a-f]/*"):
        dest = objects / source.parent.name / source.name
        if not dest.exists():
            dest.parent.mkdir(exist_ok=True)
            os.replace(source, dest)


@dataclass(frozen=True)
class _Staged:
    parent: str | None
    tree: str
    changes: list[Change]

    @property
    def unchanged(self) -> bool:
        return self.parent is not None and not self.changes


def _stage(
    git: _Git,
    project_dir: Path,
    env: dict[str, str],
    *,
    max_bytes: int,
    credentials: Credentials | None,
    token_env: str,
) -> _Staged:
    """Scan what would be committed, then write its tree into the scratch store."""
    parent = git.ok("rev-parse", "-q", "--verify", "HEAD^{commit}")
    git("read-tree", *([parent] if parent else ["--empty"]), **env)
    # Exactly what `git add -A` takes: tracked files and untracked ones not ignored.
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", **env)
    paths = sorted({p for p in listed.split("\0") if p and os.path.lexists(project_dir / p)})
    findings = filescan.scan(
        project_dir,
        paths,
        max_bytes=max_bytes,
        token=credentials.token if credentials else None,
        token_env=token_env,
    )
    if findings:
        raise UnsafeFiles([finding.line() for finding in findings])
    git("add", "-A", **env)
    tree = git("write-tree", **env).strip()
    if parent is None:
        if tree == EMPTY_TREE:
            raise GitFailed(f"{project_dir} holds no file to commit (all are ignored)")
        names = git("ls-tree", "-r", "-z", "--name-only", tree, **env).split("\0")
        return _Staged(None, tree, [Change("A", name) for name in names if name])
    out = git("diff-tree", "-r", "-z", "--no-renames", "--name-status", parent, tree, **env)
    fields = [f for f in out.split("\0") if f]
    changes = [Change(fields[i][0], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]
    return _Staged(parent, tree, changes)


def _refusal(credentials: Credentials | None, remote: str, token_env: str) -> str:
    """What the server refused, and what to do, for an authentication failure."""
    if not remote.startswith(("http://", "https://")):
        return "your SSH key or credentials: check that they may write to the repository"
    if credentials:
        return (
            f"the token in ${token_env}: check that it is valid and may write to the "
            "repository (OpenI: Settings, Applications, access tokens)"
        )
    return (
        f"to let you in without credentials: put an access token in ${token_env} "
        "(or set up a git credential helper)"
    )


def _track(git: _Git, branch: str, commit: str) -> None:
    """Point origin/<branch> at the pushed commit; make it the upstream if none is set."""
    git("update-ref", f"refs/remotes/origin/{branch}", commit)
    current = git.ok("symbolic-ref", "-q", "--short", "HEAD")
    if current and git.ok("config", f"branch.{current}.remote") is None:
        git("config", f"branch.{current}.remote", "origin")
        git("config", f"branch.{current}.merge", f"refs/heads/{branch}")


def push_project(
    project_dir: Path,
    remote: str | None,
    *,
    branch: str = "main",
    message: str | None = None,
    credentials: Credentials | None = None,
    token_env: str = TOKEN_ENV,
    max_file_mb: float = DEFAULT_MAX_MB,
    dry_run: bool = False,
    interactive: bool = False,
) -> PushResult:
    """Commit what ``project_dir`` holds and push it to ``branch`` of ``remote``.

    Raises UnsafeFiles before anything is written when a file must not be pushed and
    PushFailed subclasses when the push fails; either way the repository is as it was.
    """
    project_dir = project_dir.resolve()
    read_record(project_dir)
    token = credentials.token if credentials else None
    git = _Git(project_dir, _base_env(interactive), [token or ""])
    if git.ok("check-ref-format", "--branch", branch) is None:
        raise OptionError("--branch", f"{branch!r} is not a valid branch name")
    message = message or default_message()
    if token and token in message:
        raise OptionError("--message", f"it holds the value of ${token_env}; leave that out")
    top = git.ok("rev-parse", "--show-toplevel")
    if top is not None and Path(top).resolve() != project_dir:
        raise GitFailed(
            f"{project_dir} is inside the git repository {top}, not its root: gen push pushes "
            "a project that is its own repository (move it out, or run git init in it)"
        )
    origin = git.ok("remote", "get-url", "origin") if top else None
    remote = remote or origin
    if not remote:
        raise OptionError(
            "--remote",
            "the project has no origin yet: pass the platform repository's URL, e.g. "
            "https://openi.pcl.ac.cn/USER/REPO.git",
        )
    check_remote(remote, credentials, token_env)
    url_user = urlsplit(remote).username if "://" in remote else None
    if credentials and url_user:
        credentials = replace(credentials, user=url_user)
    if not dry_run:
        _check_identity(git)

    created = pushed = False
    scratch_repo = None
    if top is None and dry_run:
        # Somewhere to compute the commit without creating .git in the project.
        scratch_repo = Path(tempfile.mkdtemp(prefix="gen-push-dry-"))
        git("init", "-q", str(scratch_repo))
        git.env.update(GIT_DIR=str(scratch_repo / ".git"), GIT_WORK_TREE=str(project_dir))
    elif top is None:
        git("init", "-q", f"--initial-branch={branch}")
        created = True
    try:
        git_dir = Path(git("rev-parse", "--absolute-git-dir").strip())
        common = git("rev-parse", "--path-format=absolute", "--git-common-dir").strip()
        objects = Path(common) / "objects"
        with _staging(git_dir, objects) as (scratch, env):
            staged = _stage(
                git,
                project_dir,
                env,
                max_bytes=int(max_file_mb * 1e6),
                credentials=credentials,
                token_env=token_env,
            )
            result = PushResult(
                remote,
                branch,
                staged.parent if staged.unchanged else None,
                staged.parent,
                staged.changes,
                created_repo=top is None,
                origin_added=origin is None,
                dry_run=dry_run,
            )
            if dry_run:
                return result
            commit = staged.parent
            if not staged.unchanged:
                parents = ["-p", staged.parent] if staged.parent else []
                commit = git(
                    *("-c", "user.useConfigOnly=true", "commit-tree", staged.tree, *parents),
                    *("-F", "-"),
                    stdin=message,
                    **env,
                ).strip()
            assert commit is not None
            with _askpass(credentials, remote) as (options, askpass_env):
                run = git.run(
                    *options,
                    "push",
                    remote,
                    f"{commit}:refs/heads/{branch}",
                    env={**env, **askpass_env},
                )
            if run.returncode != 0:
                how = _refusal(credentials, remote, token_env)
                raise _classify(run, remote, branch, f"{how}, then run gen push again")
            pushed = True
            # Only now does the repository change: objects, branch, index.
            if not staged.unchanged:
                _adopt_objects(scratch / "objects", objects)
                old = staged.parent or "0" * 40  # fails if someone moved HEAD meanwhile
                git("update-ref", "-m", f"gen push to {public_url(remote)}", "HEAD", commit, old)
                os.replace(scratch / "index", git_dir / "index")
    except BaseException:
        if created and not pushed:
            shutil.rmtree(project_dir / ".git", ignore_errors=True)
        raise
    finally:
        if scratch_repo is not None:
            shutil.rmtree(scratch_repo, ignore_errors=True)
    if origin is None:
        git("remote", "add", "origin", remote)
        origin = remote
    if origin == remote:
        _track(git, branch, commit)
    lines = [line for line in run.stderr.splitlines() if line.startswith("remote:")]
    return replace(result, commit=commit, remote_lines=lines)
