"""What `gen doctor` checks: the target, its catalogue entry and the project; and every
check of it, in order (the host's, then the project's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator import catalog
from generator.errors import CatalogError, GenError
from generator.render.options import Options
from generator.shipped.hostcheck import Result


@dataclass(frozen=True)
class Subject:
    """What is checked: the target, the catalogue entry its image builds from, the
    project (None outside one) and the root the host's files are read under."""

    target: str
    entry: catalog.Entry
    options: Options | None
    project_dir: Path | None
    root: str


def run(subject: Subject, *, with_engine: bool = True) -> list[Result]:
    """Every check of ``subject``: the engine (unless told), the driver and devices of its
    target, the project."""
    from generator.doctor.host import ascend_checks, base_source, engine_checks, nvidia_checks
    from generator.doctor.project import project_checks

    results = engine_checks(subject) if with_engine else []
    results.append(base_source(subject))
    if subject.target == "cuda":
        results += nvidia_checks(subject)
    else:
        chip = subject.options.chip if subject.options else catalog.model.DEFAULT_CHIP
        results += ascend_checks(subject, chip)
    return results + project_checks(subject)


def subject(
    project_dir: Path | None, options: Options | None, target: str | None, root: str
) -> Subject:
    """The target and catalogue entry to check: the project's, or --target's defaults."""
    if target is None:
        if options is None:
            raise GenError("outside a project, say which image: --target cuda or --target ascend")
        if options.target == "both":
            raise GenError("the project has two images: --target cuda or --target ascend")
        target = options.target
    framework = options.framework if options else "pytorch"
    chip = options.chip if options else None
    try:
        entry = catalog.load().default(target, framework, chip if target == "ascend" else None)
    except CatalogError as err:
        raise GenError(str(err)) from err
    return Subject(target, entry, options, project_dir, root)
