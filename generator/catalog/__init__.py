"""The base-image catalogue (images/catalog.yaml): load it, check it, pick an entry."""

from __future__ import annotations

from generator.catalog.load import CATALOG_FILE, load
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
from generator.catalog.rules import problems
from generator.render.options import FRAMEWORKS

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
