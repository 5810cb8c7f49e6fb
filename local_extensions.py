"""Jinja filters for the template; cookiecutter loads this file from the repo root.

Filters keep logic out of the templates: a value that reaches a shell script is
quoted here, never pasted raw.
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import fields
from functools import lru_cache
from pathlib import Path

import yaml
from jinja2 import Environment
from jinja2.ext import Extension

# Cookiecutter puts the repo root on sys.path while it renders; the wheel
# installs the same package. Both give the code `gen ranktable` runs.
from generator import __version__, catalog, docker_flags, version
from generator.options import Options
from generator.shipped.ranktable import tables as ranktable

# The modules projects carry (generator/shipped/), by the flat name the stubs in the
# template's scripts/ pass to module_source: the copies there import each other by it.
SHIPPED = {
    "hostcheck": "hostcheck",
    "ranktable": "ranktable.tables",
    "ranktable_model": "ranktable.model",
    "ranktable_node": "ranktable.node",
    "ranktable_rules": "ranktable.rules",
    "report": "report",
    "report_runs": "report_runs",
}


def shell_quote(value: object) -> str:
    """Quote a value as one shell word (``'it'"'"'s'``), safe in any script."""
    return shlex.quote(str(value))


def image_arch(target: object, arch: object) -> str:
    """The CPU the ``target`` image is built for, from the project's ``arch`` answer."""
    return Options("project", arch=str(arch)).image_arch(str(target))


def rank_table(devices_per_node: object, nnodes: object = 1) -> str:
    """An example HCCL rank table (placeholder addresses) as JSON text."""
    return ranktable.example(int(str(devices_per_node)), int(str(nnodes))).dumps().rstrip("\n")


def image_entry(framework: object, target: object, chip: object = None) -> dict[str, object]:
    """The catalogue's default base image and pins for (target, framework), and on Ascend
    for the project's chip, as data."""
    return _catalog().default(str(target), str(framework), chip and str(chip)).as_dict()


@lru_cache(maxsize=1)
def _catalog() -> catalog.Catalog:
    return catalog.load()


def docker_run_flags(target: object, devices: object) -> str:
    """`docker run`'s options for a ``target`` container with ``devices`` accelerators, as
    continued shell lines (generator/docker_flags.py)."""
    return " \\\n  ".join(docker_flags.run_flags(str(target), int(str(devices))))


def project_record(context: Mapping[str, object]) -> str:
    """The options a project was generated with, as JSON: what `gen image` reads back."""
    record = {"generator": f"train-template {__version__}"}
    # Which template made it: the base `gen update` starts from when its copy is missing.
    commit = version.template_commit(Path(__file__).resolve().parent)
    if commit:
        record["template_commit"] = commit
    record.update({f.name: str(context[f.name]) for f in fields(Options)})
    return json.dumps(record, indent=2)


def driver_table(vendor: object) -> str:
    """images/drivers.yaml's table for ``vendor`` (nvidia) as JSON: the minimum driver per
    CUDA release that the project's start-up check (scripts/hostcheck.py) compares with."""
    data = yaml.safe_load((Path(__file__).resolve().parent / "images" / "drivers.yaml").read_text())
    return json.dumps(data[str(vendor)], indent=2, sort_keys=True)


def module_source(name: object) -> str:
    """The text of one of generator's stdlib-only modules (generator/shipped/), to ship it in
    a project: the same code, importing its siblings as the modules beside it in scripts/."""
    module = importlib.import_module(f"generator.shipped.{SHIPPED[str(name)]}")
    text = Path(str(module.__file__)).read_text(encoding="utf-8").rstrip("\n")
    flat = {f"generator.shipped.{dotted}": key for key, dotted in SHIPPED.items()}
    return re.sub(
        r"^from (generator\.shipped\.[\w.]+) import",
        lambda found: f"from {flat[found.group(1)]} import",
        text,
        flags=re.M,
    )


class TrainTemplateExtension(Extension):
    """Registers the template's filters."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.filters["shell_quote"] = shell_quote
        environment.filters["rank_table"] = rank_table
        environment.filters["image_arch"] = image_arch
        environment.filters["module_source"] = module_source
        environment.filters["image_entry"] = image_entry
        environment.filters["docker_run_flags"] = docker_run_flags
        environment.filters["project_record"] = project_record
        environment.filters["driver_table"] = driver_table
