"""The base-image catalogue (images/catalog.yaml): load it, check it, pick an entry."""

from __future__ import annotations

from pathlib import Path

from generator.catalog.model import (
    CHIPS,
    LABELS,
    TARGETS,
    Catalog,
    Entry,
    MindsporePin,
    Pin,
    PytorchPin,
)
from generator.catalog.parse import read
from generator.catalog.rules import problems
from generator.errors import CatalogError
from generator.options import FRAMEWORKS

CATALOG_FILE = "catalog.yaml"

__all__ = [
    "CATALOG_FILE",
    "CHIPS",
    "FRAMEWORKS",
    "LABELS",
    "TARGETS",
    "Catalog",
    "Entry",
    "MindsporePin",
    "Pin",
    "PytorchPin",
    "load",
    "problems",
]


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
    catalog = read(path)
    found = problems(catalog)
    if found:
        raise CatalogError(*(f"{path.name}: {problem}" for problem in found))
    return catalog
