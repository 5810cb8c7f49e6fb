"""The catalogue's values (pins, entries) and how an entry is picked for a request."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from generator.errors import CatalogError
from generator.render.options import FRAMEWORKS

TARGETS = ("cuda", "ascend")
# The chip names ascendai/cann tags use: Ascend 910, Atlas A2 (910B), Atlas A3.
CHIPS = ("910", "910b", "a3")
# A project's --chip (its rank-table rules, generator/render/options.py) as those tags name it.
TAG_CHIP = {"910": "910", "910b": "910b", "910_93": "a3"}
# The chip of an Ascend default when none is named (a project's default chip).
DEFAULT_CHIP = "910b"
# The key of a target's default: (target, framework, tag chip); CUDA has no chip.
DefaultKey = tuple[str, str, str | None]
# What a framework's version is called in messages: the package users pin.
LABELS = {"pytorch": "torch", "mindspore": "mindspore"}
# What users may type for a Python (3.10, 3.10.12, py3.10); the file says exactly 3.10.
PYTHON_RE = re.compile(r"(?:py(?:thon)?)?(3\.\d{1,2})(?:\.\d+)?")
FILE_PYTHON_RE = re.compile(r"3\.\d{1,2}")
RELEASE_RE = re.compile(r"\d+(?:\.\d+)*")
# [registry[:port]/]path:tag, the tag required: a catalogue entry is pinned.
IMAGE_RE = re.compile(
    r"(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r":[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
)


@dataclass(frozen=True)
class PytorchPin:
    """torch (with torch_npu on Ascend); ``pythons`` are the Pythons its wheels exist for."""

    torch: str
    index_url: str
    pythons: tuple[str, ...]
    torchvision: str | None = None
    torch_npu: str | None = None
    notes: str = ""

    @property
    def version(self) -> str:
        return self.torch


@dataclass(frozen=True)
class MindsporePin:
    """MindSpore; ``pythons`` are the Pythons its wheels exist for."""

    version: str
    pythons: tuple[str, ...]
    package: str = "mindspore"
    index_url: str | None = None
    notes: str = ""


Pin = PytorchPin | MindsporePin


@dataclass(frozen=True)
class Entry:
    """One base image and the framework pins that run on it."""

    id: str
    target: str
    base: str
    os: str
    python: str
    cuda: str | None = None
    cudnn: str | None = None
    cann: str | None = None
    chip: str | None = None
    # The toolkit's innerversion (ascend_toolkit_install.info): gen doctor's driver check.
    innerversion: str | None = None
    pytorch: PytorchPin | None = None
    mindspore: MindsporePin | None = None
    notes: str = ""
    # Where the base's Dockerfile is: <repository>@<commit>:<path> (Ascend/cann-container-image
    # for the CANN bases). gen doctor names it; an Ascend default must have one.
    dockerfile: str | None = None

    def source(self) -> str:
        """Where the base comes from, in words: its Dockerfile, else what the notes say."""
        if self.dockerfile:
            return f"built from {self.dockerfile}"
        if self.target == "cuda":
            return "NVIDIA's nvidia/cuda images (Docker Hub)"
        return "no Dockerfile recorded upstream: see images/catalog.yaml's notes"

    def pin(self, framework: str) -> Pin | None:
        return self.pytorch if framework == "pytorch" else self.mindspore

    def version(self, framework: str) -> str:
        """The pinned version of ``framework`` ("" when the entry has none)."""
        pin = self.pin(framework)
        return pin.version if pin else ""

    def describe(self, framework: str) -> str:
        """How messages name a choice: ``torch 2.7.1 (cuda11.8-ubuntu22.04)``."""
        return f"{LABELS[framework]} {self.version(framework)} ({self.id})"

    def as_dict(self) -> dict[str, Any]:
        """The entry as plain data, for templates."""
        return asdict(self)


@dataclass(frozen=True)
class Catalog:
    """The entries by id, the default id per (target, framework), and each OS's python3."""

    entries: dict[str, Entry]
    defaults: dict[DefaultKey, str]
    os_python: dict[str, tuple[str, ...]]

    def entry(self, entry_id: str) -> Entry:
        if entry_id not in self.entries:
            hint = did_you_mean(entry_id, self.entries)
            raise CatalogError(f"unknown base image {entry_id!r}; {hint}")
        return self.entries[entry_id]

    def candidates(self, target: str, framework: str, chip: str | None = None) -> list[Entry]:
        """The entries for ``target`` (and Ascend ``chip``) that pin ``framework``, in file
        order."""
        _choice("target", target, TARGETS)
        _choice("framework", framework, FRAMEWORKS)
        found = [e for e in self.entries.values() if e.target == target and e.pin(framework)]
        if not found:
            others = sorted({e.target for e in self.entries.values() if e.pin(framework)})
            raise CatalogError(
                f"no {target} base image has {framework}; it exists for: {', '.join(others)}"
            )
        chip = _chip(target, chip)
        if chip is None:
            return found
        mine = [e for e in found if e.chip == chip]
        if not mine:
            chips = ", ".join(sorted({str(e.chip) for e in found}))
            raise CatalogError(
                f"no {target} base image for chip {chip} has {framework} ({chips} do)"
            )
        return mine

    def default(self, target: str, framework: str, chip: str | None = None) -> Entry:
        """The entry used when nothing more is asked for (``defaults:`` in the file); an
        Ascend base is the chip's own (910b when none is named)."""
        chip = _chip(target, chip or DEFAULT_CHIP)
        self.candidates(target, framework, chip)
        return self.entry(self.defaults[target, framework, chip])

    def resolve(
        self,
        target: str,
        framework: str,
        python: str | None = None,
        framework_version: str | None = None,
        entry_id: str | None = None,
        chip: str | None = None,
    ) -> Entry:
        """The entry fitting every given choice (None: any); the default wins among several.

        ``framework_version`` may be a prefix (``2.4`` matches torch 2.4.1). ``chip`` (a
        project's --chip or a tag's) keeps Ascend bases to that chip's. Raises CatalogError
        with one line: what does not fit, and the nearest valid choice.
        """
        chip = _chip(target, chip)
        found = self.candidates(target, framework, chip)
        where = f"{target} {chip}" if chip else target  # "ascend a3" in messages
        label = LABELS[framework]
        py = None if python is None else _python(python)
        version = None if framework_version is None else _version(label, framework_version)
        by_py = [e for e in found if py is None or e.python == py]
        fits = [e for e in by_py if version is None or _matches(version, e.version(framework))]
        if entry_id is not None:
            entry = self.entry(entry_id)
            if entry not in found:
                what = f"{target} with {framework}" + (f" on chip {chip}" if chip else "")
                raise CatalogError(
                    f"{entry.id} is not a base for {what}; "
                    f"use {self.default(target, framework, chip).describe(framework)}"
                )
            if entry in fits:
                return entry
            asked = " on ".join(
                part for part in (version and f"{label} {version}", py and f"Python {py}") if part
            )
            hint = (
                f"use {self._pick(fits, target, framework, chip).describe(framework)}"
                if fits
                else _no_fit(found, by_py, where, framework, py, version)
            )
            raise CatalogError(
                f"{entry.id} has {label} {entry.version(framework)} on Python {entry.python}, "
                f"not {asked}; {hint}"
            )
        if fits:
            return self._pick(fits, target, framework, chip)
        raise CatalogError(_no_fit(found, by_py, where, framework, py, version))

    def _pick(self, fits: list[Entry], target: str, framework: str, chip: str | None) -> Entry:
        """The default if it fits, else the newest framework version."""
        default = self.defaults.get((target, framework, _chip(target, chip or DEFAULT_CHIP)))
        newest = max(fits, key=lambda e: _release(e.version(framework)))
        return next((e for e in fits if e.id == default), newest)


def _no_fit(
    found: list[Entry],
    by_py: list[Entry],
    target: str,
    framework: str,
    py: str | None,
    version: str | None,
) -> str:
    """Why no entry fits the asked Python and version, and the nearest valid choice."""
    label = LABELS[framework]
    if not by_py:
        near = min(found, key=lambda e: (_distance(py, e.python), _newer_first(e, framework)))
        return (
            f"no {target} base image with {framework} runs Python {py}; "
            f"nearest: Python {near.python} with {near.describe(framework)}"
        )
    near = min(
        by_py,
        key=lambda e: (_distance(version, e.version(framework)), _newer_first(e, framework)),
    )
    if len(by_py) < len(found) and any(_matches(version, e.version(framework)) for e in found):
        return (
            f"no {target} base image has {label} {version} with Python {py}; "
            f"for Python {py} the nearest is {near.describe(framework)}"
        )
    return (
        f"{label} {version} has no {target} build in the catalogue; "
        f"nearest: {near.describe(framework)}"
    )


def _chip(target: str, chip: str | None) -> str | None:
    """The tag's name for an Ascend chip, given as a project's --chip or as a tag's; None
    for CUDA, or when none is named."""
    if target != "ascend" or chip is None:
        return None
    chip = TAG_CHIP.get(chip, chip)
    _choice("chip", chip, CHIPS)
    return chip


def _choice(name: str, value: str, allowed: Iterable[str]) -> None:
    if value not in allowed:
        raise CatalogError(f"unknown {name} {value!r}; {did_you_mean(value, allowed)}")


def did_you_mean(value: str, known: Iterable[str]) -> str:
    known = list(known)
    close = difflib.get_close_matches(str(value), known, n=1, cutoff=0.5)
    return f"did you mean {close[0]}?" if close else f"choose one of {', '.join(known)}"


def _python(value: str) -> str:
    match = PYTHON_RE.fullmatch(str(value).strip())
    if not match:
        raise CatalogError(f"python {value!r} is not a Python version like 3.10")
    return match.group(1)


def _version(label: str, value: str) -> str:
    text = str(value).strip().partition("+")[0]  # 2.7.1+cu118 asks for 2.7.1
    if not RELEASE_RE.fullmatch(text.split(".post")[0]):
        raise CatalogError(f"{label} version {value!r} is not a version number like 2.7.1")
    return text


def _release(version: str | None) -> tuple[int, ...]:
    match = RELEASE_RE.match(version or "")
    return tuple(int(part) for part in match.group().split(".")) if match else ()


def _matches(requested: str | None, pinned: str) -> bool:
    """A shorter version is a prefix of the pinned one: ``2.4`` matches ``2.4.1``."""
    wanted = _release(requested)
    return _release(pinned)[: len(wanted)] == wanted


def _distance(a: str | None, b: str) -> tuple[int, ...]:
    """How far two versions are apart, compared component by component."""
    left, right = _release(a), _release(b)
    width = max(len(left), len(right))
    left, right = left + (0,) * (width - len(left)), right + (0,) * (width - len(right))
    return tuple(abs(x - y) for x, y in zip(left, right, strict=True))


def _newer_first(entry: Entry, framework: str) -> tuple[int, ...]:
    return tuple(-part for part in _release(entry.version(framework)))
