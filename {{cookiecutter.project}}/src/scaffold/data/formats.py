"""What a reader is (Reader, @reader, where splits lie); names claimed once, with their places."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, ClassVar

from src.scaffold.data.splits import Split
from src.scaffold.errors import ConfigError

SPLITS = ("train", "val", "test")


class Reader:
    """A data format: ``found`` says why a directory holds it, ``read`` returns its splits."""

    name: ClassVar[str]
    looks_for: ClassVar[str]  # for the line shown when no format matches

    def __init__(self, options: dict[str, object]) -> None:
        self.options = options  # the data: section of the config (label_column, resize ...)

    def found(self, directory: Path) -> str | None:
        """Why ``directory`` holds data in this format (one short phrase), else None."""
        raise NotImplementedError

    def read(self, directory: Path) -> dict[str, Split]:
        """The splits in ``directory``: "train", "test" and "val", or "all"."""
        raise NotImplementedError


def place(obj: Any) -> str:
    """Where ``obj`` is defined, as file:line from the project's src/ on."""
    try:
        path = Path(inspect.getsourcefile(obj) or "?").as_posix()
        line = inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return getattr(obj, "__qualname__", repr(obj))
    if "/src/" in path:
        path = "src/" + path.rsplit("/src/", 1)[1]
    return f"{path}:{line}"


def claim(kind: str, name: str, obj: Any, claimed: dict[str, str]) -> str:
    """Record ``obj`` as ``kind`` ``name`` and return its place; another place for it is refused."""
    where = place(obj)
    taken = claimed.setdefault(name, where)
    if taken != where:
        raise ConfigError(f"two {kind}s are called {name!r}: {taken} and {where}; rename one")
    return where


READER_NAMES: dict[str, str] = {}  # each reader's place: built-in ones, then yours


def reader(name: str):
    """Mark a Reader subclass as the format ``name`` (data.format); a name taken is refused."""

    def mark(cls: type) -> type:
        claim("reader", name, cls, READER_NAMES)
        cls.name = name
        return cls

    return mark


def unwrap(directory: Path) -> Path:
    """Step into lone folders (an archive's top directory): MyData/train -> train's parent."""
    while True:
        entries = [p for p in directory.iterdir() if not p.name.startswith(".")]
        if len(entries) != 1 or not entries[0].is_dir() or entries[0].name in SPLITS:
            return directory
        directory = entries[0]
