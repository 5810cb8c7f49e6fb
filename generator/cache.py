"""Facts gen can reuse between runs (wheel metadata and digests, a base image's Python),
kept in one JSON file per kind under $XDG_CACHE_HOME/train-template (~/.cache).

Every entry is keyed by what makes it true (a file's path, size and mtime; an image
id), so a stale entry is never read; a missing or unreadable file is an empty cache.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "train-template"


class JsonCache:
    """A dict of JSON values, saved atomically (whole or not at all)."""

    def __init__(self, name: str) -> None:
        self.path = cache_dir() / f"{name}.json"
        self._changed = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        self._data: dict[str, Any] = data if isinstance(data, dict) else {}

    def get(self, key: str) -> Any:
        return self._data.get(key)

    def put(self, key: str, value: Any) -> None:
        self._data[key] = value
        self._changed = True

    def save(self) -> None:
        """Write the cache if it changed; a cache that cannot be written is skipped."""
        if not self._changed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
        except OSError:
            return
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(self._data, out)
            os.replace(name, self.path)
        except OSError:
            Path(name).unlink(missing_ok=True)
            return
        self._changed = False
