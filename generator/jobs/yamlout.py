"""YAML for manifests: keys in the order they were built, every string safely quoted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """Block style, list items indented under their key as kubectl prints them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def dump(documents: Iterable[dict[str, Any]], header: str) -> str:
    """``documents`` as one stream, each after ``---``, the header as a leading comment.

    The dumper quotes whatever YAML would otherwise read as another type ("on",
    "1.0", "null"), so no value from the command line can change a manifest's shape.
    """
    body = yaml.dump_all(
        documents,
        Dumper=_Dumper,
        explicit_start=True,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 16,
    )
    return f"# {header}\n{body}"
