"""Which files of a wheelhouse a dependency build needs, and nothing else.

Starting from the requirements and the framework pin, each requirement is matched by
name and version against the wheels' file names (only wheels the image's Python and
machine can install), and each matched wheel's own Requires-Dist (its METADATA,
markers evaluated for the image) is followed in turn, as pip would look them up with
--find-links. No conflict resolution happens here (pip in the image does that), so
every version that could satisfy a requirement is sent. A requirements line gen
cannot follow (-r, -c, -e) sends the whole wheelhouse instead.

A wheel named none-any may still hold shared libraries: MindSpore publishes its Linux
aarch64 builds so (mindspore-2.7.0-cp311-none-any.whl on PyPI, beside the x86_64
cp311-cp311-manylinux1_x86_64). Such a wheel goes only to an image of its libraries' CPU
(their ELF header says it); a requirement only another CPU's wheel meets is refused.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections import deque
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from generator.cache import JsonCache

UNFOLLOWED = re.compile(r"(-r|--requirement|-c|--constraint|-e|--editable)(\s|=|$)")


# ELF's e_machine values of the CPUs images are built for.
ELF_MACHINES = {62: "x86_64", 183: "aarch64"}


@dataclass(frozen=True)
class Selection:
    """The files a build needs from the wheelhouse, and the requirements it lacks."""

    files: tuple[Path, ...]
    missing: tuple[str, ...] = ()
    whole: bool = False  # a requirement gen cannot follow: every file is sent
    # A requirement only a wheel of another CPU meets, in one line each: a none-any wheel
    # holding shared libraries (MindSpore names its Linux aarch64 builds cpXY-none-any).
    foreign: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return sum(path.stat().st_size for path in self.files)


class WheelFacts:
    """What gen reads from wheel files (Requires-Dist, sha256), cached by path, size and
    modification time so that a warm build reads no wheel again."""

    def __init__(self, cache: JsonCache | None = None) -> None:
        self.cache = cache

    def _entry(self, path: Path) -> tuple[str, dict]:
        stat = path.stat()
        key = f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
        return key, dict((self.cache.get(key) if self.cache else None) or {})

    def _remember(self, key: str, entry: dict) -> None:
        if self.cache is not None:
            self.cache.put(key, entry)

    def requires(self, path: Path) -> list[str]:
        key, entry = self._entry(path)
        if "requires" not in entry:
            entry["requires"] = read_requires(path)
            self._remember(key, entry)
        return list(entry["requires"])

    def machine(self, path: Path) -> str | None:
        """The CPU of the shared libraries a wheel holds (its first .so's ELF header); None
        for a wheel of Python only."""
        key, entry = self._entry(path)
        if "machine" not in entry:
            entry["machine"] = binary_machine(path)
            self._remember(key, entry)
        return entry["machine"]

    def digest(self, path: Path) -> str:
        key, entry = self._entry(path)
        if "sha256" not in entry:
            sha = hashlib.sha256()
            with path.open("rb") as stream:
                while chunk := stream.read(1 << 20):
                    sha.update(chunk)
            entry["sha256"] = sha.hexdigest()
            self._remember(key, entry)
        return str(entry["sha256"])


def read_requires(path: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA (empty when it has none)."""
    with zipfile.ZipFile(path) as archive:
        names = [
            n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if not names:
            return []
        text = archive.read(names[0]).decode("utf-8", "replace")
    return list(HeaderParser().parsestr(text).get_all("Requires-Dist") or [])


def binary_machine(path: Path) -> str | None:
    """The CPU the first shared library in a wheel is built for (x86_64, aarch64, or the
    ELF e_machine number), None when it holds none: what a none-any name does not say."""
    try:
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                base = name.rsplit("/", 1)[-1]
                if base.endswith(".so") or ".so." in base:
                    with archive.open(name) as member:
                        header = member.read(20)
                    if header[:4] != b"\x7fELF":
                        continue
                    order = "little" if header[5] == 1 else "big"
                    number = int.from_bytes(header[18:20], order)
                    return ELF_MACHINES.get(number, str(number))
    except (OSError, zipfile.BadZipFile):
        return None
    return None


def requirement_lines(text: str) -> list[str] | None:
    """The requirements a requirements.txt names; None when a line refers elsewhere
    (-r, -c, -e), which gen does not follow."""
    found = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        if UNFOLLOWED.match(line):
            return None
        if line.startswith("-"):
            continue  # index options change where pip looks, not what it needs
        found.append(line.split(" --", 1)[0].strip())  # per-line options (--hash)
    return found


def compatible(tag: Tag, python: tuple[int, int], machine: str) -> bool:
    """Whether CPython ``python`` on Linux/``machine`` (glibc) can install a wheel tag."""
    platform = tag.platform
    if platform != "any" and not (
        platform.startswith(("manylinux", "linux")) and platform.endswith(machine)
    ):
        return False
    match = re.fullmatch(r"(cp|py)(\d)(\d*)", tag.interpreter)
    if not match or int(match[2]) != python[0]:
        return False
    minor = int(match[3]) if match[3] else None
    if match[1] == "py":
        return minor is None or minor <= python[1]
    if minor is None:
        return False
    return minor <= python[1] if tag.abi == "abi3" else minor == python[1]


def marker_environment(python: str, machine: str) -> dict[str, str]:
    """What environment markers see in the image: CPython ``python`` on Linux."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "platform_python_implementation": "CPython",
        "platform_machine": machine,
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_release": "",
        "platform_version": "",
    }


def select(
    wheelhouse: Path,
    requirements: list[str] | None,
    *,
    python: str,
    machine: str,
    facts: WheelFacts,
) -> Selection:
    """The files of ``wheelhouse`` that ``requirements`` need, transitively, for CPython
    ``python`` (``3.11``) on Linux/``machine`` (``x86_64``); None requirements: all of them."""
    files = sorted(p for p in wheelhouse.iterdir() if p.is_file() and not p.name.startswith("."))
    try:
        wanted = None if requirements is None else deque(Requirement(r) for r in requirements)
    except InvalidRequirement:
        wanted = None
    if wanted is None:
        return Selection(tuple(files), whole=True)
    major, minor = (int(part) for part in python.split(".")[:2])
    index, others = _index(files, (major, minor), machine, facts)
    env = marker_environment(f"{major}.{minor}", machine)
    chosen: dict[Path, None] = {}
    missing: list[str] = []
    foreign: list[str] = []
    seen: set[str] = set()
    while wanted:
        req = wanted.popleft()
        if str(req) in seen:
            continue
        seen.add(str(req))
        extras = req.extras or {""}
        if req.marker and not any(req.marker.evaluate({**env, "extra": e}) for e in extras):
            continue
        found = [
            (path, version)
            for path, version in index.get(canonicalize_name(req.name), [])
            if version is None or req.specifier.contains(version, prereleases=True)
        ]
        if not found:
            missing.append(str(req))
            foreign += [
                f"{path.name} holds {cpu} libraries (a none-any name does not say so), and "
                f"this image is for {machine}: put a {machine} build of {req} in the "
                f"wheelhouse, or build for {cpu} (--arch {cpu})"
                for path, version, cpu in others.get(canonicalize_name(req.name), [])
                if req.specifier.contains(version, prereleases=True)
            ]
        for path, version in found:
            chosen[path] = None
            if version is not None:  # an sdist's requirements are known only once built
                wanted.extend(_dependencies(facts.requires(path), env, extras))
    return Selection(tuple(sorted(chosen)), tuple(missing), foreign=tuple(foreign))


Index = dict[str, list[tuple[Path, Version | None]]]
Foreign = dict[str, list[tuple[Path, Version, str]]]


def _index(
    files: list[Path], python: tuple[int, int], machine: str, facts: WheelFacts
) -> tuple[Index, Foreign]:
    """Installable files by project name: wheels with their version, sdists with None; and
    the none-any wheels whose libraries are another CPU's, with that CPU."""
    index: Index = {}
    others: Foreign = {}
    for path in files:
        try:
            if path.suffix == ".whl":
                name, version, _, tags = parse_wheel_filename(path.name)
                fits = [tag for tag in tags if compatible(tag, python, machine)]
                if fits and all(tag.platform == "any" for tag in fits):
                    cpu = facts.machine(path)
                    if cpu is not None and cpu != machine:
                        others.setdefault(name, []).append((path, version, cpu))
                        continue
                if fits:
                    index.setdefault(name, []).append((path, version))
            elif path.name.endswith((".tar.gz", ".zip")):
                name, _ = parse_sdist_filename(path.name)
                index.setdefault(name, []).append((path, None))
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue  # not a distribution pip would take from --find-links
    return index, others


def _dependencies(lines: list[str], env: dict[str, str], extras: set[str]) -> list[Requirement]:
    """A wheel's Requires-Dist that apply in the image with the extras asked for."""
    found = []
    for line in lines:
        try:
            dep = Requirement(line)
        except InvalidRequirement:
            continue
        if dep.marker is None or any(dep.marker.evaluate({**env, "extra": e}) for e in extras):
            dep.marker = None
            found.append(dep)
    return found
