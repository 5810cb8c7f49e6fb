"""Which files must not be pushed: secrets, files over the size limit, datasets and checkpoints.

Pure functions over paths and bytes, so that gen push can refuse before git writes anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Where `gen push` reads the platform token from, and the platform's file size limit.
TOKEN_ENV = "OPENI_TOKEN"
DEFAULT_MAX_MB = 100.0

# Key and credential files, by name. Examples of .env files are meant to be shared.
SECRET_NAMES = {
    ".env",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".htpasswd",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
}
SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore")
ENV_EXAMPLES = re.compile(r"\.env\.(example|sample|template|dist)$")
CREDENTIAL_JSON = re.compile(
    r"(credential|client_secret|service[-_]?account|secret).*\.json$", re.IGNORECASE
)

# What the project's .gitignore keeps out: the platform mounts data and keeps outputs,
# and a pushed checkpoint slows every clone.
DATA_SUFFIXES = (".pt", ".pth", ".ckpt", ".npz", ".h5", ".hdf5", ".safetensors", ".mindir")
MNIST_IDX = re.compile(r"-idx\d-ubyte(\.gz)?$")
# test/output: where the ModelZoo scripts (test/train_*.sh) leave their logs and checkpoints.
DATA_DIRS = ("data", "output", "outputs", "test/output")
DATA_KEPT = {"data/README.md"}

# Tokens by their shape, wherever they stand.
TOKEN_PATTERNS = [
    re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(rb"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    re.compile(rb"\bglpat-[A-Za-z0-9_-]{20,}"),
    re.compile(rb"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
]
# Text that is a credential in a file; each with what to call it.
CONTENT_PATTERNS = [
    (re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), "a private key block"),
    (TOKEN_PATTERNS[0], "an AWS access key id"),
    (
        re.compile(rb"(?i)aws_secret_access_key['\"]?\s*[:=]\s*['\"]?[A-Za-z0-9/+=]{40}"),
        "an AWS secret key",
    ),
    (TOKEN_PATTERNS[1], "a GitHub token"),
    (TOKEN_PATTERNS[2], "a GitLab token"),
    (TOKEN_PATTERNS[3], "a Slack token"),
    # Gitea (OpenI) tokens are 40 hex digits, like commit ids: only an assignment counts.
    (
        re.compile(
            rb"(?i)(?:token|secret|passw(?:or)?d|api[_-]?key|access[_-]?key)['\"]?\s*[:=]\s*"
            rb"['\"]?[0-9a-f]{40}\b"
        ),
        "a Gitea-style access token",
    ),
    # user:password@ in a URL (a private pip index, a git remote); placeholders are fine.
    (
        re.compile(rb"\b[a-z][a-z0-9+.-]*://[^\s/:@'\"]+:[^\s/@'\"<>{}$*]{8,}@[\w.-]"),
        "a URL with a password",
    ),
]
CHUNK = 1 << 20
OVERLAP = 4096
BINARY_PROBE = 8192


@dataclass(frozen=True)
class Finding:
    """One file that must not be pushed, and why (a phrase that follows the path)."""

    path: str
    reason: str

    def line(self) -> str:
        return f"{self.path}: {self.reason}"


def name_reason(path: str) -> str | None:
    """Why a file must not be pushed, judged by its path alone; None when the name is fine."""
    posix = PurePosixPath(path)
    name = posix.name
    if name in SECRET_NAMES or (name.startswith(".env.") and not ENV_EXAMPLES.search(name)):
        return f"looks like a secret ({name}): keep it out of the repository"
    if name.endswith(SECRET_SUFFIXES):
        return f"looks like a key or certificate ({posix.suffix}): keep it out of the repository"
    if CREDENTIAL_JSON.search(name):
        return "looks like a credentials file: keep it out of the repository"
    if name.endswith(DATA_SUFFIXES):
        return f"is a checkpoint or dataset ({posix.suffix}): the .gitignore should exclude it"
    if MNIST_IDX.search(name):
        return "is an MNIST idx data file: the .gitignore should exclude it"
    under = next((d for d in DATA_DIRS if posix.as_posix().startswith(f"{d}/")), None)
    if under and path not in DATA_KEPT:
        return f"is under {under}/: datasets and outputs stay on the platform's storage, not in git"
    return None


def content_reason(file: Path, token: bytes | None, token_env: str) -> str | None:
    """Why a file's bytes must not be pushed: the token's value or a credential pattern."""
    with file.open("rb") as stream:
        head = stream.read(BINARY_PROBE)
        # Credential patterns are text; in binaries they only match by chance.
        text = b"\0" not in head
        carry = b""
        chunk = head
        while chunk:
            window = carry + chunk
            if token and token in window:
                return f"holds the value of ${token_env}"
            if text:
                for pattern, what in CONTENT_PATTERNS:
                    if pattern.search(window):
                        return f"holds {what}"
            carry = window[-OVERLAP:]
            chunk = stream.read(CHUNK)
    return None


def scan(
    root: Path,
    paths: Iterable[str],
    *,
    max_bytes: int,
    token: str | None = None,
    token_env: str = "OPENI_TOKEN",
) -> list[Finding]:
    """Every file under ``root`` among ``paths`` (relative, as git lists them) that must
    not be pushed; symbolic links are judged by name only."""
    secret = token.encode() if token and len(token) >= 8 else None
    limit_mb = max_bytes / 1e6
    findings = []
    for path in paths:
        file = root / path
        reason = name_reason(path)
        if reason is None and file.is_file() and not file.is_symlink():
            size = file.stat().st_size
            if size > max_bytes:
                reason = f"is {size / 1e6:.1f} MB, over the {limit_mb:g} MB limit (--max-file-mb)"
            else:
                reason = content_reason(file, secret, token_env)
        if reason:
            findings.append(Finding(path, reason))
    return findings
