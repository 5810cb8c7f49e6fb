"""Render a project from the template: locate it, then run the real cookiecutter on it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from generator.errors import OptionError, OutputExists, RenderError, TemplateNotFound
from generator.layout import finalize
from generator.options import Options, validate

PACKAGE_DIR = Path(__file__).resolve().parent
# What the template is made of, at the repo root and inside the wheel (pyproject.toml).
REPO_ROOT_MARKERS = (
    "cookiecutter.json",
    "local_extensions.py",
    "hooks",
    "{{cookiecutter.project}}",
    "images",
)


def template_dir() -> Path:
    """The template root: the copy inside an installed wheel, else the checkout's root."""
    for candidate in (PACKAGE_DIR / "_template", PACKAGE_DIR.parent):
        if (candidate / "cookiecutter.json").is_file():
            return candidate
    raise TemplateNotFound(f"no cookiecutter.json next to {PACKAGE_DIR}; reinstall train-template")


@lru_cache(maxsize=1)
def template_variables() -> tuple[str, ...]:
    """The option names a user may set (cookiecutter.json keys without a leading '_')."""
    data = json.loads((template_dir() / "cookiecutter.json").read_text(encoding="utf-8"))
    return tuple(key for key in data if not key.startswith("_"))


def collect_options(project: str, given: Mapping[str, object | None]) -> Options:
    """Merge CLI flags and --set pairs into validated Options; None means 'not given'."""
    known = template_variables()
    for key in given:
        if key not in known:
            raise OptionError(key, f"unknown option; known options are {', '.join(known)}")
    values: dict[str, object] = {k: v for k, v in given.items() if v is not None}
    values["project"] = project
    return validate(values)


def render(options: Options, output_dir: Path, *, no_input: bool = True) -> Path:
    """Generate ``output_dir/options.project`` and return its path.

    An existing target directory is refused and left untouched; on any failure
    cookiecutter removes what it created, so nothing half-written remains.
    """
    output_dir = output_dir.resolve()
    target = output_dir / options.project
    if target.exists():
        raise OutputExists(
            f"{target} already exists; choose another project name or --output-dir "
            "(nothing was changed)"
        )
    # Imported here: cookiecutter pulls in requests and friends, which the
    # other commands never need.
    from cookiecutter.exceptions import CookiecutterException, OutputDirExistsException
    from cookiecutter.main import cookiecutter
    from jinja2 import TemplateError

    try:
        # The options are validated already and the post-generation step runs
        # in-process below: two fewer interpreter start-ups than the hooks cost.
        # With prompts, the answers may differ from `options`, so the hooks
        # (the same checks, run by cookiecutter) stay on.
        created = Path(
            cookiecutter(
                str(template_dir()),
                no_input=no_input,
                extra_context=options.as_context(),
                output_dir=str(output_dir),
                accept_hooks=not no_input,
            )
        )
    except OutputDirExistsException as err:
        raise OutputExists(f"{target} already exists (nothing was changed)") from err
    except (CookiecutterException, TemplateError) as err:
        raise RenderError(f"the template failed to render: {err}") from err
    if no_input:
        try:
            finalize(created, options)
        except OSError as err:
            shutil.rmtree(created, ignore_errors=True)
            raise RenderError(f"could not lay out {created}: {err}") from err
    return created
