"""What each entry script (train.py, eval.py, predict.py, export.py) does before anything
else. Standard library only, and nothing newer than Python 3.7 parses: a Python older than
3.8 is one line naming the script, not a SyntaxError from deep in the floor."""

import importlib.util
import os
import sys

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def pinned_versions():
    """The lines for the packages whose installed version requirements.txt does not allow
    (scripts/pins.py): NumPy 2 under MindSpore, an old torch."""
    path = os.path.join(PROJECT, "scripts", "pins.py")
    spec = importlib.util.spec_from_file_location("pins", path)
    if spec is None or spec.loader is None or not os.path.isfile(path):
        return []
    pins = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pins)
    from pathlib import Path

    found = pins.check(Path(PROJECT) / "requirements.txt")
    return [mismatch.line() for mismatch in found]


def begin(script: str) -> None:
    """Stop with one line on a Python older than 3.8 (the oldest the catalogue's images
    carry), or on a package version requirements.txt does not allow; then what the
    framework needs before numpy and it are imported (MindSpore: Ctrl-C kept as SIGINT,
    src/scaffold/backend/sigint.py)."""
    if sys.version_info < (3, 8):  # noqa: UP036 (the check itself)
        sys.stderr.write("error: " + script + " needs Python 3.8 or newer; this is ")
        sys.stderr.write(sys.version.split()[0] + "\n")
        sys.exit(2)
    # Before the framework is imported: a version it cannot work with is one line, not an
    # error inside the first batch.
    for line in pinned_versions()[:1]:
        sys.stderr.write("error: " + line + "\n")
        sys.exit(2)
    from src.scaffold.backend import start

    start()
