"""What a reader is: the Reader base class, @reader, and where a dataset's splits lie."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from src.scaffold.data.splits import Split

SPLITS = ("train", "val", "test")


class Reader:
    """A data format: ``found`` says why a directory holds it, ``read`` returns its splits."""

    name: ClassVar[str]
    # What the reader looks for, for the line shown when no format matches.
    looks_for: ClassVar[str]

    def __init__(self, options: dict[str, object]) -> None:
        # The data: section of the config (label_column, resize ...).
        self.options = options

    def found(self, directory: Path) -> str | None:
        """Why ``directory`` holds data in this format (one short phrase), else None."""
        raise NotImplementedError

    def read(self, directory: Path) -> dict[str, Split]:
        """The splits in ``directory``: "train", "test" and "val", or "all"."""
        raise NotImplementedError


def reader(name: str):
    """Mark a Reader subclass as the format ``name`` (the value of data.format)."""

    def mark(cls: type) -> type:
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
