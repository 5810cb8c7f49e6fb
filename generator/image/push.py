"""`gen image push` as a library call: where the image goes, with whose login, and the
record of what was pushed (logs/image-<target>.pushed) for the commands that use it."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from generator import engine as engines
from generator.engine import Engine, Progress
from generator.errors import GenError, OptionError
from generator.image.plan import check_target, default_tag
from generator.render.options import Options
from generator.render.project import read_record

REGISTRY_USER_ENV = "GEN_REGISTRY_USER"
REGISTRY_PASSWORD_ENV = "GEN_REGISTRY_PASSWORD"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REGISTRY = re.compile(
    rf"(?P<host>{_LABEL}(?:\.{_LABEL})*)(?::(?P<port>\d{{1,5}}))?"
    rf"/(?P<namespace>{_COMPONENT}(?:/{_COMPONENT})*)"
)


@dataclass(frozen=True)
class PushReport:
    """A pushed image: the local tag, where it went, its digest and the record written."""

    local: str
    repository: str
    tag: str
    digest: str
    record: Path

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"


def pushed_record(project_dir: Path, target: str) -> Path:
    """Where the last pushed reference of ``target`` is kept (one line)."""
    return project_dir / "logs" / f"image-{target}.pushed"


def registry_target(options: Options, registry: str, local_tag: str) -> tuple[str, str]:
    """``(HOST[:PORT]/NAMESPACE/<project>, <tag part of local_tag>)`` for --registry."""
    example = "e.g. swr.cn-north-4.myhuaweicloud.com/myteam or 127.0.0.1:5000/team"
    why = None
    match = REGISTRY.fullmatch(registry)
    if "://" in registry:
        why = "leave out the scheme"
    elif "@" in registry:
        why = f"leave out the user; the login comes from ${REGISTRY_USER_ENV} or docker login"
    elif match is None:
        why = "a host, an optional port and a lowercase namespace"
    elif not (match["port"] or "." in match["host"] or match["host"] == "localhost"):
        # Without a dot or a port, docker reads the host as a Docker Hub namespace.
        why = f"{match['host']} is not a registry host (it needs a dot or a port)"
    if why:
        raise OptionError(
            "--registry", f"{registry!r} is not HOST[:PORT]/NAMESPACE ({example}): {why}"
        )
    name, _, tag = local_tag.rpartition(":")
    if "/" in tag or not name:
        tag = "latest"
    return f"{registry}/{options.project.lower()}", tag


def registry_auth(environ: Mapping[str, str] = os.environ) -> dict[str, str] | None:
    """The login from $GEN_REGISTRY_USER and $GEN_REGISTRY_PASSWORD; None: docker login's."""
    user, password = environ.get(REGISTRY_USER_ENV), environ.get(REGISTRY_PASSWORD_ENV)
    if not user and not password:
        return None
    if not (user and password):
        raise GenError(
            f"set both {REGISTRY_USER_ENV} and {REGISTRY_PASSWORD_ENV}, or neither to use "
            "the login docker login stored"
        )
    return {"username": user, "password": password}


def push_image(
    project_dir: Path,
    target: str,
    registry: str,
    *,
    tag: str | None = None,
    on_progress: Progress,
    on_status: Callable[[str], None],
    connect: Callable[[], Engine] = engines.connect,
) -> PushReport:
    """Push the project's image for ``target`` to ``registry``; record the reference."""
    project_dir = project_dir.resolve()
    options = read_record(project_dir)
    check_target(options, target)
    local = tag or default_tag(options, target, project_dir)
    repository, remote_tag = registry_target(options, registry, local)
    auth = registry_auth()
    engine = connect()
    engine.require_image(local, f"build it first: gen image build --target {target}")
    on_status(f"pushing {local} to {repository}:{remote_tag}")
    remote = f"{repository}:{remote_tag}"
    digest = engine.push(local, remote, auth=auth, on_progress=on_progress)
    record = pushed_record(project_dir, target)
    _write_atomically(record, f"{remote}\n")
    return PushReport(local, repository, remote_tag, digest, record)


def _write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` whole: a reader never sees half a line."""
    name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(name, path)
    except OSError as err:
        if name:
            Path(name).unlink(missing_ok=True)
        raise GenError(f"pushed, but could not record it in {path}: {err.strerror}") from err
