"""The remote side of gen push: credentials, the askpass script, and what a refusal means.

A token reaches git only through a GIT_ASKPASS script that reads it from the
environment when git asks; other credential helpers are off for that push.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from generator.errors import (
    AuthRefused,
    OptionError,
    PushFailed,
    RemoteDiverged,
    RemoteMissing,
    RemoteUnreachable,
)
from generator.git import TAIL_LINES, public_url
from generator.push import filescan
from generator.push.filescan import TOKEN_ENV

USER_ENV = "OPENI_USER"
# Gitea (OpenI) takes an access token as the password whatever the user name is.
TOKEN_USER = "oauth2"

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


def credentials_from_env(
    url: str, token_env: str = TOKEN_ENV, environ: Mapping[str, str] = os.environ
) -> Credentials | None:
    """The token in ``$token_env`` with the URL's user name, else $OPENI_USER, else oauth2."""
    token = environ.get(token_env, "")
    if not token:
        return None
    return Credentials(url_user(url) or environ.get(USER_ENV) or TOKEN_USER, token, token_env)


def url_user(url: str) -> str | None:
    """The user name an http(s) URL carries, if any."""
    return urlsplit(url).username if "://" in url else None


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


@contextmanager
def askpass(
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


def refusal(credentials: Credentials | None, remote: str, token_env: str) -> str:
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


def classify(
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
