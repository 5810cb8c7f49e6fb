"""Jinja filters for the template; cookiecutter, cruft and gen load this file from its root.

Filters keep logic out of the templates: a value that reaches a shell script is
quoted here, never pasted raw.

They run the template's own code, whoever renders it: the generator package beside this
file (in the wheel, the package this file sits in, generator/_template/), never another
one installed or imported beside it. Plain cookiecutter appends the template to sys.path,
so an installed train-template would win an ordinary ``import generator``; cruft renders
two commits of one clone in one process, so a module imported for the first would serve
the second. Hence the template's code is imported here with its root first on sys.path,
from source, in a sys.modules without any other ``generator`` (the caller's are put back
after), and again whenever a file of it changes on disk; this file too. The hooks import
the same code: the extension gives them its directory as ``template_code``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import yaml
from jinja2 import Environment
from jinja2.ext import Extension

HERE = Path(__file__).resolve().parent
# What the filters use of the template's generator package.
NEEDED = (
    "generator.catalog",
    "generator.devices.flags",
    "generator.render.options",
    "generator.shipped.ranktable.tables",
    "generator.version",
)
PACKAGE = "generator"

# The modules projects carry (generator/shipped/), by the flat name the stubs in the
# template's scripts/ pass to module_source: the copies there import each other by it.
SHIPPED = {
    "hostcheck": "hostcheck",
    "pins": "pins",
    "ranktable": "ranktable.tables",
    "ranktable_model": "ranktable.model",
    "ranktable_node": "ranktable.node",
    "ranktable_rules": "ranktable.rules",
    "report": "report",
    "report_runs": "report_runs",
}


def code_root(template: Path = HERE) -> Path:
    """The directory holding the template's own generator package: the template's root in
    a checkout or a clone; in the wheel, the site-packages whose generator/_template/ it is."""
    if (template / PACKAGE / "__init__.py").is_file():
        return template
    package = template.parent
    if package.name == PACKAGE and (package / "__init__.py").is_file():
        return package.parent
    raise ImportError(f"no {PACKAGE} package beside the template at {template}")


def _digest(files: list[Path]) -> str:
    """One hash of the files' paths and bytes (a missing file counts as changed)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\0missing\0")
    return digest.hexdigest()


def _ours(modules: Mapping[str, ModuleType | None]) -> dict[str, ModuleType]:
    return {
        name: module
        for name, module in modules.items()
        if module is not None and (name == PACKAGE or name.startswith(PACKAGE + "."))
    }


@contextmanager
def _isolated(root: Path) -> Iterator[None]:
    """Imports of ``generator`` from ``root`` only, compiled from the source on disk (no
    bytecode cache read or written: a clone's files change within the same second); the
    caller's sys.path, sys.modules and bytecode settings are back afterwards."""
    callers = _ours(sys.modules)
    saved = list(sys.path), sys.pycache_prefix, sys.dont_write_bytecode
    try:
        with tempfile.TemporaryDirectory(prefix="no-pycache-") as empty:
            for name in callers:
                del sys.modules[name]
            sys.path.insert(0, str(root))
            sys.pycache_prefix, sys.dont_write_bytecode = empty, True
            importlib.invalidate_caches()
            yield
    finally:
        sys.path[:], sys.pycache_prefix, sys.dont_write_bytecode = saved
        for name in _ours(sys.modules):
            del sys.modules[name]
        sys.modules.update(callers)


def _import(root: Path, *, fresh: bool) -> dict[str, ModuleType]:
    """The template's generator modules the filters need, with everything they imported.

    A caller that imported this very package (gen rendering its own template) shares its
    modules unless ``fresh``; anything else gets a private import (_isolated)."""
    loaded = sys.modules.get(PACKAGE)
    own = root / PACKAGE / "__init__.py"
    if not fresh and loaded is not None and Path(str(loaded.__file__)).resolve() == own:
        for name in NEEDED:
            importlib.import_module(name)
        return _ours(sys.modules)
    with _isolated(root):
        for name in NEEDED:
            importlib.import_module(name)
        return _ours(sys.modules)


class _Loaded(NamedTuple):
    digest: str
    files: list[Path]
    modules: dict[str, ModuleType]


_LOADED: dict[Path, _Loaded] = {}


def template_code(root: Path) -> _Loaded:
    """The generator modules at ``root``, imported again when one of their files changed."""
    known = _LOADED.get(root)
    if known is not None and _digest(known.files) == known.digest:
        return known
    modules = _import(root, fresh=known is not None)
    files = [Path(str(module.__file__)) for module in modules.values()]
    _LOADED[root] = _Loaded(_digest(files), files, modules)
    return _LOADED[root]


def shell_quote(value: object) -> str:
    """Quote a value as one shell word (``'it'"'"'s'``), safe in any script."""
    return shlex.quote(str(value))


def module_source(name: object) -> str:
    """The text of one of generator's stdlib-only modules (generator/shipped/), to ship it in
    a project: the same code, importing its siblings as the modules beside it in scripts/."""
    dotted = SHIPPED[str(name)]
    path = code_root() / PACKAGE / "shipped" / (dotted.replace(".", "/") + ".py")
    text = path.read_text(encoding="utf-8").rstrip("\n")
    flat = {f"{PACKAGE}.shipped.{dotted}": key for key, dotted in SHIPPED.items()}
    return re.sub(
        r"^from (generator\.shipped\.[\w.]+) import",
        lambda found: f"from {flat[found.group(1)]} import",
        text,
        flags=re.M,
    )


def driver_table(vendor: object) -> str:
    """images/drivers.yaml's table for ``vendor`` (nvidia) as JSON: the minimum driver per
    CUDA release that the project's start-up check (scripts/hostcheck.py) compares with."""
    data = yaml.safe_load((HERE / "images" / "drivers.yaml").read_text(encoding="utf-8"))
    return json.dumps(data[str(vendor)], indent=2, sort_keys=True)


_CATALOGS: dict[str, Any] = {}


class Filters:
    """The filters that run the template's code, bound to one import of it."""

    def __init__(self, loaded: _Loaded) -> None:
        self.code, self.digest = loaded.modules, loaded.digest

    def _module(self, name: str) -> Any:
        return self.code[f"{PACKAGE}.{name}"]

    def image_arch(self, target: object, arch: object) -> str:
        """The CPU the ``target`` image is built for, from the project's ``arch`` answer."""
        options = self._module("render.options").Options("project", arch=str(arch))
        return str(options.image_arch(str(target)))

    def rank_table(self, devices_per_node: object, nnodes: object = 1) -> str:
        """An example HCCL rank table (placeholder addresses) as JSON text."""
        tables = self._module("shipped.ranktable.tables")
        table = tables.example(int(str(devices_per_node)), int(str(nnodes)))
        return str(table.dumps()).rstrip("\n")

    def image_entry(self, framework: object, target: object, chip: object = None) -> Any:
        """The catalogue's default base image and pins for (target, framework), and on
        Ascend for the project's chip, as data."""
        return self._catalog().default(str(target), str(framework), chip and str(chip)).as_dict()

    def _catalog(self) -> Any:
        """images/ catalogue, read once for each content of the file and import of the code."""
        images = HERE / "images"
        key = hashlib.sha256((images / "catalog.yaml").read_bytes()).hexdigest() + self.digest
        if key not in _CATALOGS:
            _CATALOGS[key] = self._module("catalog").load(images)
        return _CATALOGS[key]

    def docker_run_flags(self, target: object, devices: object) -> str:
        """`docker run`'s options for a ``target`` container with ``devices`` accelerators,
        as continued shell lines (generator/devices/flags.py)."""
        flags = self._module("devices.flags").run_flags(str(target), int(str(devices)))
        return " \\\n  ".join(flags)

    def project_record(self, context: Mapping[str, object]) -> str:
        """The options a project was generated with, as JSON: what `gen image` reads back."""
        record = {"generator": f"train-template {self.code[PACKAGE].__version__}"}
        # Which template made it: the base `gen update` starts from when its copy is missing.
        # Asked afresh for each render (not the cached answer): cruft checks out another
        # commit of the same clone between two renders.
        template_commit = self._module("version").template_commit
        commit = getattr(template_commit, "__wrapped__", template_commit)(HERE)
        if commit:
            record["template_commit"] = commit
        options = self._module("render.options").Options
        record.update({f.name: str(context[f.name]) for f in fields(options)})
        return json.dumps(record, indent=2)

    def all(self) -> dict[str, Callable[..., object]]:
        named = ("image_arch", "rank_table", "image_entry", "docker_run_flags", "project_record")
        return {name: getattr(self, name) for name in named}


def register(environment: Environment) -> None:
    """Give ``environment`` the filters, and the hooks the directory of the code they run."""
    root = code_root()
    environment.filters.update(
        Filters(template_code(root)).all(),
        shell_quote=shell_quote,
        module_source=module_source,
        driver_table=driver_table,
    )
    environment.globals["template_code"] = str(root)


SOURCE = HERE / "local_extensions.py"
_THIS_SOURCE = hashlib.sha256(SOURCE.read_bytes()).hexdigest() if SOURCE.is_file() else ""


def current_register() -> Callable[[Environment], None]:
    """``register`` of local_extensions.py as it is on disk now: this module's, or that of a
    fresh load when the file changed after Python imported it (cruft's second commit)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    if digest == _THIS_SOURCE:
        return register
    name = f"_train_template_extension_{digest[:16]}"
    if name not in sys.modules:
        module = ModuleType(name)
        module.__file__ = str(SOURCE)
        sys.modules[name] = module  # as an import does: dataclasses look their module up
        try:
            exec(compile(SOURCE.read_bytes(), str(SOURCE), "exec"), module.__dict__)
        except BaseException:
            del sys.modules[name]
            raise
    fresh: Callable[[Environment], None] = sys.modules[name].register
    return fresh


class TrainTemplateExtension(Extension):
    """Registers the template's filters."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        current_register()(environment)
