"""Keep the chosen framework's files and the chosen target's extras; drop the rest.

The template holds each framework's own files under _<framework>/ so that no
template needs a page-long if-block; generator/layout.py (shared with `gen new`,
which runs it in-process) moves the chosen set into place.
"""

import json
import sys
from pathlib import Path

CONTEXT = json.loads(r"""{{ cookiecutter | jsonify }}""")

# The template's repo root holds the generator package (stdlib-only modules).
sys.path.insert(0, CONTEXT["_repo_dir"])

from generator.layout import finalize  # noqa: E402
from generator.options import validate  # noqa: E402

finalize(Path.cwd(), validate(CONTEXT))
