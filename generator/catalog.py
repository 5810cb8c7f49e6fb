"""The base-image catalogue (images/catalog.yaml): load it, check it, pick an entry."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from generator.errors import CatalogError
from generator.options import FRAMEWORKS

CATALOG_FILE = "catalog.yaml"
TARGETS = ("cuda", "ascend")
# The chip names ascendai/cann tags use: Ascend 910, Atlas A2 (910B), Atlas A3.
CHIPS = ("910", "910b", "a3")
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
    pytorch: PytorchPin | None = None
    mindspore: MindsporePin | None = None
    notes: str = ""

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
    defaults: dict[tuple[str, str], str]
    os_python: dict[str, tuple[str, ...]]
    source: Path

    def entry(self, entry_id: str) -> Entry:
        if entry_id not in self.entries:
            hint = _did_you_mean(entry_id, self.entries)
            raise CatalogError(f"unknown base image {entry_id!r}; {hint}")
        return self.entries[entry_id]

    def candidates(self, target: str, framework: str) -> list[Entry]:
        """The entries for ``target`` that pin ``framework``, in file order."""
        _choice("target", target, TARGETS)
        _choice("framework", framework, FRAMEWORKS)
        found = [e for e in self.entries.values() if e.target == target and e.pin(framework)]
        if not found:
            others = sorted({e.target for e in self.entries.values() if e.pin(framework)})
            raise CatalogError(
                f"no {target} base image has {framework}; it exists for: {', '.join(others)}"
            )
        return found

    def default(self, target: str, framework: str) -> Entry:
        """The entry used when nothing more is asked for (``defaults:`` in the file)."""
        self.candidates(target, framework)
        return self.entry(self.defaults[target, framework])

    def resolve(
        self,
        target: str,
        framework: str,
        python: str | None = None,
        framework_version: str | None = None,
        entry_id: str | None = None,
    ) -> Entry:
        """The entry fitting every given choice (None: any); the default wins among several.

        ``framework_version`` may be a prefix (``2.4`` matches torch 2.4.1). Raises
        CatalogError with one line: what does not fit, and the nearest valid choice.
        """
        found = self.candidates(target, framework)
        label = LABELS[framework]
        py = None if python is None else _python(python)
        version = None if framework_version is None else _version(label, framework_version)
        by_py = [e for e in found if py is None or e.python == py]
        fits = [e for e in by_py if version is None or _matches(version, e.version(framework))]
        if entry_id is not None:
            entry = self.entry(entry_id)
            if entry not in found:
                raise CatalogError(
                    f"{entry.id} is not a base for {target} with {framework}; "
                    f"use {self.default(target, framework).describe(framework)}"
                )
            if entry in fits:
                return entry
            asked = " on ".join(
                part for part in (version and f"{label} {version}", py and f"Python {py}") if part
            )
            hint = (
                f"use {self._pick(fits, target, framework).describe(framework)}"
                if fits
                else _no_fit(found, by_py, target, framework, py, version)
            )
            raise CatalogError(
                f"{entry.id} has {label} {entry.version(framework)} on Python {entry.python}, "
                f"not {asked}; {hint}"
            )
        if fits:
            return self._pick(fits, target, framework)
        raise CatalogError(_no_fit(found, by_py, target, framework, py, version))

    def _pick(self, fits: list[Entry], target: str, framework: str) -> Entry:
        """The default if it fits, else the newest framework version."""
        default = self.defaults.get((target, framework))
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


def load(path: Path | str | None = None) -> Catalog:
    """Read and check the catalogue: a catalog.yaml, or a directory holding one.

    The default is the template's ``images/``. Raises CatalogError naming the field
    of the first malformed value, or one line for each broken consistency rule.
    """
    if path is None:
        from generator.project import template_dir  # here: project may come to import us

        path = template_dir() / "images"
    path = Path(path)
    if path.is_dir():
        path = path / CATALOG_FILE
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except OSError as err:
        raise CatalogError(f"cannot read the base-image catalogue {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise CatalogError(f"{path.name}: not valid YAML: {' '.join(str(err).split())}") from err
    try:
        catalog = _parse(data, path)
    except CatalogError as err:
        raise CatalogError(f"{path.name}: {err}") from err
    found = problems(catalog)
    if found:
        raise CatalogError(*(f"{path.name}: {problem}" for problem in found))
    return catalog


def problems(catalog: Catalog) -> list[str]:
    """Every consistency rule the catalogue breaks, one line each (empty when sound)."""
    found = [line for e in catalog.entries.values() for line in _entry_problems(e, catalog)]
    for (target, framework), entry_id in catalog.defaults.items():
        where = f"defaults.{target}.{framework}"
        entry = catalog.entries.get(entry_id)
        if entry is None:
            hint = _did_you_mean(entry_id, catalog.entries)
            found.append(f"{where}: no entry {entry_id!r}; {hint}")
        elif entry.target != target or entry.pin(framework) is None:
            found.append(f"{where}: {entry_id} is not a base for {target} with {framework}")
    for target in TARGETS:
        for framework in FRAMEWORKS:
            has = any(e.target == target and e.pin(framework) for e in catalog.entries.values())
            if has and (target, framework) not in catalog.defaults:
                found.append(f"defaults.{target}.{framework}: missing, though entries have it")
    return found


def _entry_problems(entry: Entry, catalog: Catalog) -> list[str]:
    where = f"entries.{entry.id}"
    found = []
    if not IMAGE_RE.fullmatch(entry.base) or entry.base.endswith(":latest"):
        found.append(f"{where}.base: {entry.base!r} is not an image reference with a pinned tag")
    if entry.target == "cuda":
        major_minor = str(entry.cuda).split(".")[:2]
        expected_id = f"cuda{'.'.join(major_minor)}-{entry.os}"
        expected_tag = f"{entry.cuda}-cudnn{entry.cudnn}-runtime-{entry.os}"
        os_python = catalog.os_python.get(entry.os)
        if os_python is None:
            found.append(f"{where}.os: {entry.os!r} has no os_python entry")
        elif entry.python not in os_python:
            found.append(f"{where}.python: apt on {entry.os} offers Python {', '.join(os_python)}")
        index = "cu" + "".join(major_minor)
        if entry.pytorch and not entry.pytorch.index_url.rstrip("/").endswith("/" + index):
            found.append(f"{where}.pytorch.index_url: not the {index} index of CUDA {entry.cuda}")
        if entry.pytorch and entry.pytorch.torch_npu:
            found.append(f"{where}.pytorch.torch_npu: only Ascend bases take torch_npu")
    else:
        cann = str(entry.cann).lower()
        expected_id = f"cann{cann}-{entry.chip}-{entry.os}"
        expected_tag = f"{cann}-{entry.chip}-{entry.os}-py{entry.python}"
        if entry.chip not in CHIPS:
            found.append(f"{where}.chip: {entry.chip!r} is not one of {', '.join(CHIPS)}")
        if entry.pytorch:
            npu, torch = entry.pytorch.torch_npu or "", entry.pytorch.torch
            if npu != torch and not npu.startswith(torch + "."):
                found.append(f"{where}.pytorch.torch_npu: must be a build for torch {torch}")
            if not entry.pytorch.index_url.rstrip("/").endswith("/cpu"):
                found.append(f"{where}.pytorch.index_url: Ascend takes torch from the cpu index")
    if entry.id != expected_id:
        found.append(f"{where}: the id of this base is {expected_id}")
    tag = entry.base.rpartition(":")[2]
    if tag != expected_tag:
        found.append(f"{where}.base: tag {tag!r} does not say {expected_tag!r}")
    for framework in FRAMEWORKS:
        pin = entry.pin(framework)
        if pin and entry.python not in pin.pythons:
            found.append(
                f"{where}.{framework}.pythons: {LABELS[framework]} {pin.version} is built for "
                f"Python {', '.join(pin.pythons)}, not the base's {entry.python}"
            )
        if pin and pin.index_url is not None and not pin.index_url.startswith("https://"):
            found.append(f"{where}.{framework}.index_url: must be an https:// URL")
    return found


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a repeated key (PyYAML would keep the last one silently)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def _mapping(data: object, where: str, known: Iterable[str] | None = None) -> dict[Any, Any]:
    if not isinstance(data, dict):
        got = "missing" if data is None else f"a {type(data).__name__}, not a mapping"
        raise CatalogError(f"{where}: {got}")
    if known is not None:
        known = tuple(known)
        for key in data:
            if key not in known:
                raise CatalogError(f"{where}.{key}: unknown field; known: {', '.join(known)}")
    return data


def _text(data: dict[Any, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if value is None else f"got {type(value).__name__} {value!r}"
        raise CatalogError(f"{where}.{key}: must be a quoted string ({got})")
    return value.strip()


def _pythons(data: dict[Any, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not value:
        raise CatalogError(f"{where}.{key}: must be a list of quoted versions")
    for item in value:
        if not isinstance(item, str) or not FILE_PYTHON_RE.fullmatch(item):
            raise CatalogError(f'{where}.{key}: {item!r} is not a quoted version ("3.10")')
    return tuple(value)


def _build(cls: type[Any], data: object, where: str, **given: Any) -> Any:
    """A dataclass from a YAML mapping: its fields are the keys allowed, and text."""
    data = _mapping(data, where, (f.name for f in fields(cls) if f.name != "id"))
    values = dict(given)
    for f in fields(cls):
        if f.name not in given and (f.name in data or f.default is MISSING):
            read = _pythons if f.name == "pythons" else _text
            values[f.name] = read(data, f.name, where)
    return cls(**values)


def _parse(data: object, path: Path) -> Catalog:
    top = _mapping(data, "top level", ("os_python", "defaults", "entries"))
    os_python = _mapping(top.get("os_python"), "os_python")
    defaults = {}
    for target, choices in _mapping(top.get("defaults"), "defaults", TARGETS).items():
        choices = _mapping(choices, f"defaults.{target}", FRAMEWORKS)
        defaults.update({(target, fw): _text(choices, fw, f"defaults.{target}") for fw in choices})
    entries = _mapping(top.get("entries"), "entries")
    if not entries:
        raise CatalogError("entries: empty; a catalogue needs at least one base image")
    return Catalog(
        entries={str(key): _entry(str(key), value) for key, value in entries.items()},
        defaults=defaults,
        os_python={str(name): _pythons(os_python, name, "os_python") for name in os_python},
        source=path,
    )


def _entry(entry_id: str, data: object) -> Entry:
    where = f"entries.{entry_id}"
    data = _mapping(data, where)
    kinds = {"pytorch": PytorchPin, "mindspore": MindsporePin}
    pins = {fw: _build(kinds[fw], data[fw], f"{where}.{fw}") for fw in FRAMEWORKS if fw in data}
    if not pins:
        raise CatalogError(f"{where}: pins no framework; add a pytorch or mindspore block")
    entry: Entry = _build(Entry, data, where, id=entry_id, **pins)
    if entry.target not in TARGETS:
        raise CatalogError(f"{where}.target: {entry.target!r} is not one of {', '.join(TARGETS)}")
    if not FILE_PYTHON_RE.fullmatch(entry.python):
        raise CatalogError(f'{where}.python: {entry.python!r} is not a version like "3.10"')
    own, other = ("cuda", "cudnn"), ("cann", "chip")
    if entry.target == "ascend":
        own, other = other, own
    for key in own:
        if getattr(entry, key) is None:
            raise CatalogError(f"{where}.{key}: missing (every {entry.target} base has one)")
    for key in other:
        if getattr(entry, key) is not None:
            raise CatalogError(f"{where}.{key}: unknown field for a {entry.target} base")
    return entry


def _choice(name: str, value: str, allowed: Iterable[str]) -> None:
    if value not in allowed:
        raise CatalogError(f"unknown {name} {value!r}; {_did_you_mean(value, allowed)}")


def _did_you_mean(value: str, known: Iterable[str]) -> str:
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
