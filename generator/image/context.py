"""The two build contexts: the dependency build's (its Dockerfile, requirements.txt and the
wheels it needs) and the code build's (its Dockerfile and what .dockerignore lets in)."""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from generator.engine import BuildContext, context_files

DOCKERFILE = "Dockerfile"
# What only the dependency build reads: never part of the code build's context.
DEPENDENCY_ONLY = ("wheelhouse",)


def pack(dockerfile: str, files: Mapping[str, Path | str]) -> BuildContext:
    """A tar context: ``dockerfile`` as its Dockerfile, then ``files`` (name inside -> file,
    or text written as that file).

    Spooled to disk past 64 MB: a context with large wheels never sits in memory.
    """
    stream = tempfile.SpooledTemporaryFile(max_size=64 << 20)
    with tarfile.open(fileobj=stream, mode="w") as archive:
        for name, text in {DOCKERFILE: dockerfile, **texts(files)}.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
        for name, path in sorted(files.items()):
            if isinstance(path, str):
                continue
            # The file a link points to: a wheelhouse of links still sends the wheels.
            archive.add(str(path.resolve()), arcname=name, recursive=False)
    size = stream.tell()
    stream.seek(0)
    return BuildContext(stream, DOCKERFILE, size)  # type: ignore[arg-type]


def code_files(project_dir: Path) -> dict[str, Path]:
    """The project's files its .dockerignore lets into a build, minus the dependency
    build's inputs (the wheelhouse)."""
    ignore = project_dir / ".dockerignore"
    patterns = []
    if ignore.is_file():
        for line in ignore.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                patterns.append(line.strip())
    found = {}
    for name in context_files(project_dir, patterns):
        path = project_dir / name
        if name.split("/", 1)[0] in DEPENDENCY_ONLY or not path.is_file():
            continue
        found[name] = path
    return found


def texts(files: Mapping[str, Path | str]) -> dict[str, str]:
    """The entries of ``files`` given as text, sorted by name."""
    return {name: text for name, text in sorted(files.items()) if isinstance(text, str)}


def deps_files(requirements: str, wheels: tuple[Path, ...]) -> dict[str, Path | str]:
    """requirements.txt (its text) and the selected wheels under wheelhouse/, as the
    Dockerfile copies them (``COPY requirements.txt wheelhouse* /tmp/deps/``)."""
    files: dict[str, Path | str] = {"requirements.txt": requirements}
    files.update({f"wheelhouse/{wheel.name}": wheel for wheel in wheels})
    return files
