"""Reject bad options before cookiecutter writes anything the user keeps.

Cookiecutter (or cruft) renders this file with Jinja, then runs it in the new project
directory; on a non-zero exit it deletes that directory again. The checks live in
generator/render/options.py, shared with `gen new`, so both say the same thing.

Standard library only. The template's Jinja extension (local_extensions.py) names the
directory of the template's own generator package as ``template_code``: any renderer
loads that extension, where cookiecutter's ``_repo_dir`` is cookiecutter's alone.
"""

import json
import sys

CONTEXT = json.loads(r"""{{ cookiecutter | jsonify }}""")

# The template's own code first, whatever else is installed; and no bytecode written into
# the template (a clone's next commit may have files of the same size and second).
sys.path.insert(0, json.loads(r""" {{ template_code | tojson }} """))
sys.dont_write_bytecode = True

from generator.errors import OptionError  # noqa: E402
from generator.render.options import validate  # noqa: E402

try:
    validate(CONTEXT)
except OptionError as err:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(1)
