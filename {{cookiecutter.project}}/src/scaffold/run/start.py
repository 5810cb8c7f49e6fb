"""What each entry script does first. Standard library only, parsed by Python 3.7 too: an
older Python is one line naming the script, not a SyntaxError from deep in the floor."""

import importlib.util
import os
import sys
from pathlib import Path

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def pinned_versions():
    """A line for each installed version requirements.txt does not allow (scripts/pins.py)."""
    path = os.path.join(PROJECT, "scripts", "pins.py")
    spec = importlib.util.spec_from_file_location("pins", path)
    if spec is None or spec.loader is None or not os.path.isfile(path):
        return []
    pins = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pins)
    return [mismatch.line() for mismatch in pins.check(Path(PROJECT) / "requirements.txt")]


def begin(script: str) -> None:
    """One line on a Python before 3.8 or a version requirements.txt does not allow."""
    if sys.version_info < (3, 8):  # noqa: UP036 (the check itself)
        sys.stderr.write("error: " + script + " needs Python 3.8 or newer; this is ")
        sys.stderr.write(sys.version.split()[0] + "\n")
        sys.exit(2)
    for line in pinned_versions()[:1]:
        sys.stderr.write("error: " + line + "\n")
        sys.exit(2)
    from src.scaffold.backend import start

    start()
