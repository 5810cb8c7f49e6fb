"""Read catalog.yaml into a Catalog: strict types, known keys only, no repeated keys."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import yaml

from generator.catalog.model import (
    CHIPS,
    FILE_PYTHON_RE,
    TARGETS,
    Catalog,
    DefaultKey,
    Entry,
    MindsporePin,
    PytorchPin,
)
from generator.errors import CatalogError
from generator.render.options import FRAMEWORKS


class UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a repeated key (PyYAML would keep the last one silently)."""


def _unique_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


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


def parse(data: object) -> Catalog:
    """The catalogue a YAML document holds; CatalogError names the first malformed field."""
    top = _mapping(data, "top level", ("os_python", "defaults", "entries"))
    os_python = _mapping(top.get("os_python"), "os_python")
    defaults: dict[DefaultKey, str] = {}
    for target, choices in _mapping(top.get("defaults"), "defaults", TARGETS).items():
        choices = _mapping(choices, f"defaults.{target}", FRAMEWORKS)
        for fw in choices:
            if target == "cuda":
                defaults[target, fw, None] = _text(choices, fw, f"defaults.{target}")
                continue
            # Ascend: one per chip (CANN images are built for one chip).
            by_chip = _mapping(choices[fw], f"defaults.{target}.{fw}", CHIPS)
            for chip in by_chip:
                defaults[target, fw, chip] = _text(by_chip, chip, f"defaults.{target}.{fw}")
    entries = _mapping(top.get("entries"), "entries")
    if not entries:
        raise CatalogError("entries: empty; a catalogue needs at least one base image")
    return Catalog(
        entries={str(key): _entry(str(key), value) for key, value in entries.items()},
        defaults=defaults,
        os_python={str(name): _pythons(os_python, name, "os_python") for name in os_python},
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
    own, other = ("cuda", "cudnn"), ("cann", "chip", "innerversion")
    if entry.target == "ascend":
        # innerversion (the toolkit's V100R001Cxx, what drivers list) is optional.
        own, other = ("cann", "chip"), ("cuda", "cudnn")
    for key in own:
        if getattr(entry, key) is None:
            raise CatalogError(f"{where}.{key}: missing (every {entry.target} base has one)")
    for key in other:
        if getattr(entry, key) is not None:
            raise CatalogError(f"{where}.{key}: unknown field for a {entry.target} base")
    return entry


def read(path: Path) -> Catalog:
    """The catalogue in the YAML file ``path``; CatalogError says what is wrong, once."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)
    except OSError as err:
        raise CatalogError(f"cannot read the base-image catalogue {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise CatalogError(f"{path.name}: not valid YAML: {' '.join(str(err).split())}") from err
    try:
        return parse(data)
    except CatalogError as err:
        raise CatalogError(f"{path.name}: {err}") from err
