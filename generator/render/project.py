"""Render a project from the template: locate it, then run the real cookiecutter on it."""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import fields
from functools import lru_cache
from pathlib import Path

from jinja2.bccache import Bucket, BytecodeCache

from generator.errors import (
    OptionError,
    OutputExists,
    ProjectNotFound,
    RenderError,
    TemplateNotFound,
)
from generator.render.layout import finalize
from generator.render.options import Options, validate

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # generator/
# What the template is made of, at the repo root and inside the wheel (pyproject.toml).
REPO_ROOT_MARKERS = (
    "cookiecutter.json",
    "local_extensions.py",
    "hooks",
    "{{cookiecutter.project}}",
    "images",
    "templates",
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
    named = values.get("project")
    if named is not None and str(named) != project:
        raise OptionError(
            "--set project",
            f"{named!r} differs from the PROJECT argument {project!r}; name the project once",
        )
    values["project"] = project
    options = validate(values)
    if options.framework != "mindspore" and values.get("ms_train_loop") is not None:
        raise OptionError(
            "ms_train_loop", f"is MindSpore's training loop; a {options.framework} project has none"
        )
    return options


def render(options: Options, output_dir: Path, *, no_input: bool = True) -> Path:
    """Generate ``output_dir/options.project`` and return its path.

    An existing target directory is refused and left untouched; on any failure
    cookiecutter removes what it created, so nothing half-written remains.
    """
    output_dir = output_dir.resolve()
    target = output_dir / options.project
    _check_writable(output_dir)
    if target.exists():
        raise OutputExists(
            f"{target} already exists; choose another project name or --output-dir "
            "(nothing was changed)"
        )
    from cookiecutter.exceptions import CookiecutterException, OutputDirExistsException
    from jinja2 import TemplateError

    try:
        if no_input:
            created = _generate(template_dir(), options.as_context(), output_dir)
        else:
            # With prompts, the answers may differ from `options`: cookiecutter's
            # own entry point, with the hooks (the same checks) on.
            from cookiecutter.main import cookiecutter

            created = Path(
                cookiecutter(
                    str(template_dir()),
                    extra_context=options.as_context(),
                    output_dir=str(output_dir),
                )
            )
    except OutputDirExistsException as err:
        raise OutputExists(f"{target} already exists (nothing was changed)") from err
    except (CookiecutterException, TemplateError, UnicodeDecodeError) as err:
        # UnicodeDecodeError: a file that is not text, outside _copy_without_render.
        raise RenderError(f"the template failed to render: {err}") from err
    if no_input:
        try:
            finalize(created, options)
        except OSError as err:
            shutil.rmtree(created, ignore_errors=True)
            raise RenderError(f"could not lay out {created}: {err}") from err
    return created


def _check_writable(output_dir: Path) -> None:
    """Refuse, in one line and before anything is rendered, an --output-dir that cannot be
    made or written (a read-only file system, a path under a file)."""
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=output_dir, prefix=".gen-probe-")
    except OSError as err:
        raise RenderError(
            f"cannot write in {output_dir}: {err.strerror or err}; choose another --output-dir"
        ) from err
    probe.close()


class _CompiledTemplates(BytecodeCache):
    """Each template file compiled once a process (keyed by its source's checksum): a
    process that renders many times (gen update, the tests) renders twice as fast."""

    def __init__(self) -> None:
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket: Bucket) -> None:
        self.compiled[bucket.key] = bucket.bytecode_to_string()


_BYTECODE = _CompiledTemplates()


def _generate(template: Path, extra: dict[str, str], output_dir: Path) -> Path:
    """What cookiecutter.main.cookiecutter does for a local template with no prompts,
    through cookiecutter's own public steps.

    It skips what a local render never uses and costs a third of gen new's time:
    importing URL and zip support (requests), the replay file, and the hooks, whose
    checks (generator.render.options, generator.render.layout) run in-process instead of in two
    fresh interpreters.
    """
    from cookiecutter.generate import generate_context, generate_files
    from cookiecutter.prompt import prompt_for_config

    # The template's Jinja extension (local_extensions.py) imports from its root, as
    # cookiecutter.main arranges, for every environment: prompt_for_config makes one too.
    saved = list(sys.path)
    sys.path.append(str(template))
    try:
        context = generate_context(
            context_file=str(template / "cookiecutter.json"), extra_context=extra
        )
        context["cookiecutter"] = prompt_for_config(context, no_input=True)
        context["cookiecutter"].update(
            _template=str(template),
            _output_dir=str(output_dir),
            _repo_dir=str(template),
            _checkout=None,
            # cookiecutter's own hook for Environment options (no hook renders here).
            _jinja2_env_vars={"bytecode_cache": _BYTECODE},
        )
        return Path(
            generate_files(
                repo_dir=str(template),
                context=context,
                output_dir=str(output_dir),
                accept_hooks=False,
            )
        )
    finally:
        sys.path[:] = saved


RECORD_FILE = ".train-template.json"
# Every answer a record holds; `arch` and `task` came later (older records lack them: auto,
# classify).
LATER_KEYS = ("arch", "task")
RECORD_KEYS = tuple(field.name for field in fields(Options) if field.name not in LATER_KEYS)


def read_record(project_dir: Path) -> Options:
    """The options ``project_dir`` was generated with, from its .train-template.json."""
    path = project_dir / RECORD_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise ProjectNotFound(
            f"{project_dir.resolve()} is not a project generated by train-template "
            f"(no {RECORD_FILE}); run gen in the project directory or pass it"
        ) from err
    except (OSError, ValueError) as err:
        raise ProjectNotFound(f"{path}: unreadable ({err})") from err
    if not isinstance(data, dict):
        raise ProjectNotFound(f"{path}: not a record of options (a JSON object)")
    # A key the record lacks is never guessed: a default would plan another project (an
    # Ascend project read as CUDA). Only answers added to the template since may be absent.
    missing = [key for key in RECORD_KEYS if key not in data]
    if missing:
        raise ProjectNotFound(
            f"{path} lacks {', '.join(missing)}: restore it from git (git checkout -- "
            f"{RECORD_FILE}) or add the answers the project was generated with"
        )
    return validate(data)


# The module a project of each framework needs to train.
FRAMEWORK_MODULES = {"pytorch": "torch", "mindspore": "mindspore"}


def next_command(project_dir: Path, framework: str) -> str:
    """The command that trains a new project here, as `gen new` prints it: run_1p.sh with
    the Python that has the framework (this one's, when python3 on PATH is another), else
    after installing the project's requirements."""
    where = shlex.quote(str(project_dir))
    if importlib.util.find_spec(FRAMEWORK_MODULES[framework]) is None:
        return f"cd {where} && python3 -m pip install -r requirements.txt && bash scripts/run_1p.sh"
    on_path = shutil.which("python3")
    if on_path and Path(on_path).resolve() == Path(sys.executable).resolve():
        return f"cd {where} && bash scripts/run_1p.sh"
    return f"cd {where} && PYTHON={shlex.quote(sys.executable)} bash scripts/run_1p.sh"
