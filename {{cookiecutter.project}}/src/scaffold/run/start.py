"""What each entry script (train.py, eval.py, predict.py, export.py) does before anything
else. Standard library only, and nothing newer than Python 3.7 parses: a Python older than
3.8 is one line naming the script, not a SyntaxError from deep in the floor."""

import sys


def begin(script: str) -> None:
    """Stop with one line on a Python older than 3.8 (the oldest the catalogue's images
    carry); then what the framework needs before numpy and it are imported (MindSpore:
    Ctrl-C kept as SIGINT, src/scaffold/backend/sigint.py)."""
    if sys.version_info < (3, 8):  # noqa: UP036 (the check itself)
        sys.stderr.write("error: " + script + " needs Python 3.8 or newer; this is ")
        sys.stderr.write(sys.version.split()[0] + "\n")
        sys.exit(2)
    from src.scaffold.backend import start

    start()
