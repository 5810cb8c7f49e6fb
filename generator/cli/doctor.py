"""`gen doctor`: check a host and an image before the job starts."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.argument("project_dir", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--target", type=click.Choice(("cuda", "ascend")), help="Which image (default: the project's)."
)
@click.option(
    "--root",
    default="/",
    show_default=True,
    type=click.Path(exists=True, file_okay=False),
    metavar="DIR",
    help="Read /proc, /sys, /dev and /usr/local/Ascend under DIR. Under any DIR but / "
    "nothing is run: `npu-smi info` is read from DIR/npu-smi-info.txt, its output as "
    "recorded on the server (npu-smi info > npu-smi-info.txt).",
)
@click.option("--json", "as_json", is_flag=True, help="The checks as JSON.")
def doctor(project_dir: Path | None, target: str | None, root: str, as_json: bool) -> None:
    """Whether this host, its engine and PROJECT_DIR's image (default: here, when it is a
    project) can run the job: one line a check, ✓, ✗ (what was found, what is needed, the
    fix) or – (does not apply). Exits 1 on any ✗."""
    from generator.doctor import subject as checks
    from generator.render.project import RECORD_FILE, read_record
    from generator.shipped.hostcheck import FAIL

    here = project_dir or Path(".")
    options = read_record(here) if project_dir or (here / RECORD_FILE).is_file() else None
    subject = checks.subject(here if options else None, options, target, root)
    results = checks.run(subject)
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in results], indent=2, ensure_ascii=False))
    else:
        for result in results:
            click.echo(result.line())
    if any(r.status == FAIL for r in results):
        raise SystemExit(1)
