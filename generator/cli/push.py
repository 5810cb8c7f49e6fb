"""`gen push`: commit the project and push it to a git platform (OpenI, Gitea, ...)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from generator.cli.args import PROJECT_DIR

# Only the defaults here: push.commit (and what it imports) loads when push runs.
from generator.push.filescan import DEFAULT_MAX_MB, TOKEN_ENV


@click.command()
@PROJECT_DIR
@click.option("--remote", metavar="URL", help="The platform repository (default: origin).")
@click.option("--branch", default="main", show_default=True, help="Remote branch to push.")
@click.option("--message", "-m", help="Commit message (default: 'gen push: <date>').")
@click.option(
    "--token-env",
    default=TOKEN_ENV,
    show_default=True,
    metavar="NAME",
    help="Environment variable holding the access token.",
)
@click.option(
    "--max-file-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_MAX_MB,
    show_default=True,
    help="Refuse files larger than this (the platform's limit).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be committed and pushed.")
def push(
    project_dir: Path,
    remote: str | None,
    branch: str,
    message: str | None,
    token_env: str,
    max_file_mb: float,
    dry_run: bool,
) -> None:
    """Commit PROJECT_DIR (default: here) and push it to --remote.

    Credentials: an access token in $OPENI_TOKEN (or the variable --token-env names),
    sent with the user name in the URL, else $OPENI_USER, else "oauth2"; without a
    token, git's own credential helper. The token is never written anywhere.
    Secrets, files over --max-file-mb, datasets and checkpoints are refused.
    """
    from generator.git import public_url
    from generator.push.commit import PushOptions, push_project
    from generator.push.remote import credentials_from_env

    result = push_project(
        PushOptions(
            project_dir,
            remote,
            branch=branch,
            message=message,
            credentials=credentials_from_env(remote or "", token_env),
            token_env=token_env,
            max_file_mb=max_file_mb,
            dry_run=dry_run,
            interactive=sys.stdin.isatty(),
        )
    )
    where = f"{public_url(result.remote)} (branch {result.branch})"
    if result.dry_run:
        if result.created_repo:
            click.echo(f"would create a git repository in {project_dir.resolve()}")
        if result.new_commit:
            base = f"on top of {result.parent[:12]}" if result.parent else "as the first commit"
            click.echo(f"would commit {len(result.changes)} change(s) {base}:")
            for change in result.changes:
                click.echo(f"  {change.status} {change.path}")
        else:
            click.echo(f"nothing changed since {result.parent[:12]}: would push it as is")
        click.echo(f"would push to {where}")
        if result.origin_added:
            click.echo(f"would record {public_url(result.remote)} as origin")
        return
    assert result.commit is not None
    if result.new_commit:
        click.echo(f"committed {result.commit[:12]} ({len(result.changes)} change(s))")
    else:
        click.echo(f"nothing changed since the last commit: pushing {result.commit[:12]} as is")
    for line in result.remote_lines:
        click.echo(line)
    click.echo(f"pushed {result.commit[:12]} to {where}")
    if result.origin_added:
        click.echo(f"recorded {public_url(result.remote)} as origin")
