"""Reject bad options before cookiecutter writes anything the user keeps.

Cookiecutter renders this file with Jinja, then runs it in the new project
directory; on a non-zero exit it deletes that directory again. The checks live
in generator/options.py, shared with `gen new`, so both say the same thing.
"""

import json
import sys

CONTEXT = json.loads(r"""{{ cookiecutter | jsonify }}""")

# The template's repo root holds the generator package (stdlib-only modules).
sys.path.insert(0, CONTEXT["_repo_dir"])

from generator.errors import OptionError  # noqa: E402
from generator.options import validate  # noqa: E402

try:
    validate(CONTEXT)
except OptionError as err:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(1)
