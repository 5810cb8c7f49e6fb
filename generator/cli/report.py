"""`gen report OUTPUT_DIR...`: loss and metric plots (PNG) and a markdown summary of runs."""

from __future__ import annotations

from pathlib import Path

import click

from generator.errors import ReportError
from generator.shipped import report as rp


@click.command()
@click.argument(
    "directories",
    nargs=-1,
    required=True,
    metavar="OUTPUT_DIR...",
    type=click.Path(path_type=Path),
)
@click.option(
    "-o",
    "--output",
    help="A directory for report.png and report.md (one that exists, or ending in /), "
    "or a prefix: PATH.png and PATH.md. Default: report.png and report.md here.",
)
@click.option("--force", is_flag=True, help="Replace the output files if they exist.")
def report(directories: tuple[Path, ...], output: str | None, force: bool) -> None:
    """Plot the runs in OUTPUT_DIR... side by side (a colour a run) and summarize them.

    Each OUTPUT_DIR is one run's --train_url: its metrics.jsonl and hparams.json; or a
    sweep's directory (sweep.py's TRAIN_URL/sweep): its trials, and its table of them.
    """
    try:
        written = rp.write_report(directories, output, force)
    except rp.CannotReport as err:
        raise ReportError(str(err)) from err
    for path in written:
        click.echo(f"wrote {path}")
