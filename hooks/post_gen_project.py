"""Keep the chosen framework's files and the chosen target's extras; drop the rest.

The template holds each framework's own files under _<framework>/ so that no
template needs a page-long if-block; generator/render/layout.py (shared with `gen new`,
which runs it in-process) moves the chosen set into place.

Standard library only, importing the template's own code as pre_gen_project.py does.
"""

import json
import sys
from pathlib import Path

CONTEXT = json.loads(r"""{{ cookiecutter | jsonify }}""")
sys.path.insert(0, json.loads(r""" {{ template_code | tojson }} """))
sys.dont_write_bytecode = True

from generator.render.layout import finalize  # noqa: E402
from generator.render.options import validate  # noqa: E402

finalize(Path.cwd(), validate(CONTEXT))
