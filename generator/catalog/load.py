"""Read the catalogue and hold it to its rules: the one way gen gets a Catalog."""

from __future__ import annotations

from pathlib import Path

from generator.catalog.model import Catalog
from generator.catalog.parse import read
from generator.catalog.rules import problems
from generator.errors import CatalogError

CATALOG_FILE = "catalog.yaml"


def load(path: Path | str | None = None) -> Catalog:
    """Read and check the catalogue: a catalog.yaml, or a directory holding one.

    The default is the template's ``images/``. Raises CatalogError naming the field
    of the first malformed value, or one line for each broken consistency rule.
    """
    if path is None:
        from generator.render.project import template_dir  # here: project may come to import us

        path = template_dir() / "images"
    path = Path(path)
    if path.is_dir():
        path = path / CATALOG_FILE
    catalog = read(path)
    found = problems(catalog)
    if found:
        raise CatalogError(*(f"{path.name}: {problem}" for problem in found))
    return catalog
