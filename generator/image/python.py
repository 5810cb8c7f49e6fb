"""Which Python a dependency build uses, found before the build starts.

A catalogued base has the catalogue's interpreter (apt installs it on CUDA bases);
an interpreter named with --build-arg PYTHON=python3.X is taken at its word; any other
base is asked, by running ``python3 --version`` in it with networking off. A base
without one stops the build before it starts, with one line saying how to choose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from generator.cache import JsonCache
from generator.engine import ContainerSpec, Engine, ImageInfo
from generator.errors import PythonMissing

VERSION_RE = re.compile(r"Python (3\.\d+)(?:\.\d+)?")
NAMED_RE = re.compile(r"python(3\.\d+)")
PROBE_TIMEOUT_S = 120


@dataclass(frozen=True)
class Interpreter:
    """The PYTHON build argument, its version, and where gen learned it."""

    command: str
    version: str
    source: str


@dataclass(frozen=True)
class PinPythons:
    """The Pythons the framework pin has wheels for (from the catalogue)."""

    label: str
    pythons: tuple[str, ...]


def named(command: str, source: str) -> Interpreter | None:
    """An interpreter whose name says its version (python3.11), else None."""
    match = NAMED_RE.fullmatch(command.rsplit("/", 1)[-1])
    return Interpreter(command, match.group(1), source) if match else None


def probe_version(output: list[str]) -> str | None:
    """The version ``python3 --version`` printed (Python 3.11.2 -> 3.11), else None."""
    for line in output:
        match = VERSION_RE.search(line)
        if match:
            return match.group(1)
    return None


def in_base(
    engine: Engine, base: ImageInfo, name: str, command: str, cache: JsonCache | None
) -> Interpreter:
    """The version of ``command`` (python3) in the base image ``name``; PythonMissing when
    the base has none. The answer is kept by image id: an id never changes its content."""
    key = f"{base.id}:{command}"
    version = cache.get(key) if cache else None
    if not version:
        probe = [command, "--version"]
        result = engine.run(
            ContainerSpec(base.id, probe, user="0"), timeout_s=PROBE_TIMEOUT_S, on_line=_quiet
        )
        version = probe_version(result.log) if result.exit_code == 0 else None
        if version is None:
            said = " ".join(result.log[-1:])[:200] or f"exit code {result.exit_code}"
            raise PythonMissing(
                f"{name} has no {command} to build with ({' '.join(probe)}: {said}): pass "
                "--build-arg PYTHON=python3.X to have apt install that Python on it, or use "
                "a base from the catalogue (--catalog-entry, or no --base-image)"
            )
        if cache is not None:
            cache.put(key, version)
    return Interpreter(command, version, f"{command} in {name}")


def check_pin(interpreter: Interpreter, pin: PinPythons | None, base: str) -> None:
    """Stop before the build when the framework pin has no wheels for the interpreter."""
    if pin is None or interpreter.version in pin.pythons:
        return
    raise PythonMissing(
        f"{base} has Python {interpreter.version} ({interpreter.source}), but {pin.label} is "
        f"built for Python {', '.join(pin.pythons)}: use a base with one of those, pass "
        "--build-arg PYTHON=python3.X to install one with apt, or choose another framework "
        "version (--framework-version, or --build-arg FRAMEWORK=...)"
    )


def _quiet(line: str) -> None:
    """The probe's output is read from its result, not shown."""
