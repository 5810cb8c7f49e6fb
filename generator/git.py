"""The one way gen runs git: a fixed environment, English messages, secrets masked in output."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from generator.errors import GitFailed

TAIL_LINES = 12


def base_env(interactive: bool = False) -> dict[str, str]:
    """The environment git runs in: the user's, minus what would redirect or trace it."""
    env = dict(os.environ)
    # English messages, which callers read, whatever the user's locale.
    env.update(LC_ALL="C", LANGUAGE="C")
    if not interactive:
        env["GIT_TERMINAL_PROMPT"] = "0"
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        env.pop(name, None)
    # Traces would write the Authorization header to a file gen cannot mask.
    for name in [n for n in env if n.startswith("GIT_TRACE") or n == "GIT_CURL_VERBOSE"]:
        del env[name]
    return env


class Git:
    """Runs git in one work tree with a fixed environment; masks secrets in its output."""

    def __init__(
        self, work_tree: Path, env: dict[str, str] | None = None, secrets: Iterable[str] = ()
    ) -> None:
        self.work_tree = work_tree
        self.env = base_env() if env is None else env
        self.secrets = [s for s in secrets if s]

    def mask(self, text: str) -> str:
        for secret in self.secrets:
            for form in {secret, quote(secret, safe="")}:
                text = text.replace(form, "***")
        return text

    def run(
        self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The finished git process, whatever its exit; GitFailed only when git cannot run."""
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


def revision(project_dir: Path) -> str | None:
    """The short commit, with -dirty when the work tree has changes; None outside git."""
    git = Git(project_dir)
    try:
        commit = git.ok("rev-parse", "--short=12", "HEAD")
        if commit is None:
            return None
        dirty = git.ok("status", "--porcelain", "--untracked-files=no")
    except GitFailed:  # no git at all: the project is simply not versioned here
        return None
    return f"{commit}-dirty" if dirty else commit


def origin_url(project_dir: Path) -> str | None:
    """The URL of the project's origin remote, None without one (or without git)."""
    try:
        return Git(project_dir).ok("remote", "get-url", "origin") or None
    except GitFailed:
        return None


def public_url(url: str) -> str:
    """A remote URL with any user name or token removed: labels and messages are public."""
    parts = urlsplit(url)
    if not parts.netloc or "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
