"""The project's side of `gen doctor`: its entry files, the versions its Python holds
against requirements.txt, its rank table, and whether its built image has the catalogue's
base and this host's CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from generator.errors import GenError
from generator.shipped.hostcheck import FAIL, NA, OK, Result

if TYPE_CHECKING:
    from generator.doctor.subject import Subject

ENTRY_FILES = (
    *("train.py", "eval.py", "predict.py", "export.py", "launch.py", "env.sh", "config.yaml"),
    *("scripts/run_1p.sh", "scripts/run_8p.sh"),
)


def project_checks(subject: Subject) -> list[Result]:
    """The entry files, the rank table, and whether the built image's base is the catalogue's."""
    project, options = subject.project_dir, subject.options
    if project is None or options is None:
        return [Result("project", NA, "not in a project (pass PROJECT_DIR)")]
    missing = [name for name in ENTRY_FILES if not (project / name).is_file()]
    results = [
        Result(
            "entry files",
            FAIL,
            f"missing {', '.join(missing)}",
            "the project's files",
            "restore them from git, or gen update",
        )
        if missing
        else Result("entry files", OK, ", ".join(ENTRY_FILES))
    ]
    results.append(packages_check(project))
    table = project / "rank_table_8p.json"
    if subject.target == "ascend" and table.is_file():
        results.append(rank_table_check(table, options.chip))
    else:
        results.append(Result("rank table", NA, "no rank table for this target"))
    results += [image_base(subject), image_cpu(subject)]
    return results


def packages_check(project: Path) -> Result:
    """The project's Python (PYTHON, else python3) against the versions its requirements.txt
    pins, by the project's own scripts/pins.py: what train.py checks at start-up."""
    script, requirements = project / "scripts" / "pins.py", project / "requirements.txt"
    if not script.is_file() or not requirements.is_file():
        return Result("packages", NA, "no scripts/pins.py or requirements.txt in the project")
    python = os.environ.get("PYTHON") or shutil.which("python3") or sys.executable
    try:
        done = subprocess.run(
            [python, str(script), "--json", str(requirements)],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        report = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return Result(
            "packages",
            FAIL,
            f"{python} did not run scripts/pins.py",
            "a Python 3.8 or newer",
            "name the project's Python with PYTHON=...",
        )
    python = report.get("python") or python
    found = report.get("mismatches") or []
    if not found:
        return Result("packages", OK, f"{python} holds the versions requirements.txt pins")
    first = found[0]
    why = f" ({first['why']})" if first.get("why") else ""
    return Result(
        "packages",
        FAIL,
        f"{python} has {first['name']} {first['installed']}",
        f"{first['needed']}{why}",
        f"pip install '{first['needed']}' (or pip install -r requirements.txt)",
    )


def rank_table_check(table: Path, chip: str) -> Result:
    """The table as `gen ranktable check` reads it; what is wrong with it is one ✗ line."""
    from generator.shipped.ranktable import tables as ranktable

    try:
        loaded = ranktable.load(table, chip=chip)
    # RankTableError is a ValueError (the module ships in projects, without gen's errors);
    # so is the UnicodeDecodeError of a file that is not text.
    except (GenError, ValueError, OSError) as err:
        said = "not UTF-8 text" if isinstance(err, UnicodeError) else str(err)
        return Result(
            "rank table",
            FAIL,
            f"{table.name}: {said.replace(f'{table}: ', '')}",
            "a table HCCL accepts",
            "gen ranktable check, then fix or regenerate it",
        )
    return Result("rank table", OK, f"{table.name}: {loaded.rank_size} ranks")


def image_base(subject: Subject) -> Result:
    from generator.engine import connect
    from generator.image.plan import default_tag

    name = "image base"
    assert subject.options is not None and subject.project_dir is not None
    tag = default_tag(subject.options, subject.target, subject.project_dir)
    try:
        image = connect(timeout_s=10).image(tag)
    except GenError:
        return Result(name, NA, "no engine to ask")
    if image is None:
        return Result(
            name, NA, f"{tag} is not built yet (gen image build --target {subject.target})"
        )
    base = image.labels.get("org.opencontainers.image.base.name", "")
    if base == subject.entry.base:
        return Result(name, OK, f"{tag} is built on {base}, the catalogue's")
    return Result(
        name,
        FAIL,
        f"{tag} is built on {base or 'an unrecorded base'}",
        f"{subject.entry.base} (the catalogue's {subject.entry.id})",
        f"gen image build --target {subject.target} again",
    )


def image_cpu(subject: Subject) -> Result:
    """The CPU the image is built for (before a build, the project's answer for it) against
    this host's: an aarch64 image stops on an x86_64 server with "exec format error"."""
    from generator.engine import connect
    from generator.image import arch as arches
    from generator.image.plan import default_tag

    name = "image CPU"
    assert subject.options is not None and subject.project_dir is not None
    if subject.root != "/":
        return Result(name, NA, "this host's CPU is not read from --root")
    tag = default_tag(subject.options, subject.target, subject.project_dir)
    try:
        image = connect(timeout_s=10).image(tag)
    except GenError:
        image = None
    if image is None:
        built, what = subject.options.image_arch(subject.target), "the project builds"
    else:
        built, what = arches.image_arch(image), f"{tag} is built"
    here = arches.host_arch()
    if built == here:
        return Result(name, OK, f"{what} for {built}, this host's CPU")
    return Result(
        name,
        FAIL,
        f"{what} for {built}; this host is {here}",
        f"an {here} image on this host",
        f"gen image build --target {subject.target} --arch {here}, or run it on {built} servers",
    )
