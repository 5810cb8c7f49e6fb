"""Arguments several commands share."""

from __future__ import annotations

from pathlib import Path

import click

# A generated project's directory; the commands that work on one default to here.
PROJECT_DIR = click.argument(
    "project_dir",
    required=False,
    default=".",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
