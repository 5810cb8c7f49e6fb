"""Write an output file whole or not at all, refusing to replace one unless asked."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from generator.errors import FileExists, OptionError


def write_new(path: Path, text: str, *, force: bool = False, option: str = "--output") -> None:
    """Write ``text`` to ``path`` atomically.

    An existing file is left untouched unless ``force``: FileExists says so. The text
    goes to a temporary file beside ``path`` and is renamed over it, so a reader never
    sees half a file and a failure leaves nothing behind.
    """
    if path.exists() and not force:
        raise FileExists(f"{path} exists; pass --force to replace it (nothing was written)")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as err:
        raise OptionError(option, f"cannot write {path}: {err.strerror}") from err
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise OptionError(option, f"cannot write {path}: {err.strerror}") from err
