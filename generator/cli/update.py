"""`gen update`: merge a newer template into an existing project."""

from __future__ import annotations

from pathlib import Path

import click

from generator.cli.args import PROJECT_DIR
from generator.cli.new import _parse_set
from generator.errors import OptionError


@click.command()
@PROJECT_DIR
@click.option(
    "--to",
    metavar="VERSION|REF",
    help="Template version or git ref (with --template); needed to go back to an older one.",
)
@click.option(
    "--template",
    metavar="PATH|URL",
    help="The template's git repository (default: the template installed with gen).",
)
@click.option("--set", "set_pairs", multiple=True, metavar="KEY=VALUE", help="Change an answer.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan (path, action, reason) only; exit 1 on conflicts.",
)
@click.option("--continue", "go_on", is_flag=True, help="Record it once conflicts are resolved.")
@click.option("--abort", is_flag=True, help="Put back what a conflicted update changed.")
def update(
    project_dir: Path,
    to: str | None,
    template: str | None,
    set_pairs: tuple[str, ...],
    dry_run: bool,
    go_on: bool,
    abort: bool,
) -> None:
    """Bring template changes into PROJECT_DIR (default: here) with a three-way merge.

    Files you did not change take the template's new version; files you changed are
    merged, conflicts marked yours / old template / new template (and left unmerged
    in git, for git mergetool); files you deleted stay deleted. A template older than
    the project's is refused unless --to names it.
    """
    from generator.update import command as updating
    from generator.update import state

    project_dir = project_dir.resolve()
    if go_on or abort:
        if go_on and abort or to or template or set_pairs or dry_run:
            raise OptionError("--continue/--abort", "take no other option")
        (updating.finish if go_on else updating.abort)(project_dir)
        click.echo("update recorded" if go_on else "update aborted: your files are back")
        return
    if state.exists(project_dir):
        state.check(project_dir)
    git = None if dry_run else updating.check_clean(project_dir)
    plan = updating.prepare(project_dir, to=to, template=template, sets=_parse_set(set_pairs))
    for result in plan.results:
        step = result.step
        action = "conflict" if result.conflicted else step.action.value
        click.echo(f"{action:<9} {step.path}: {step.reason}")
    label = plan.theirs.label
    if not plan.changes and not plan.changes_state:
        click.echo(f"up to date with {label}")
        return
    if plan.direction is updating.Direction.BACK:
        click.echo(f"going back to the older {label}, as --to {to} asks")
    elif plan.direction is updating.Direction.UNKNOWN:
        click.echo(
            f"moving to {label}, which the project's template does not lead to, as --to asks"
        )
    if dry_run:
        click.echo(f"dry run: nothing changed (would update to {label})")
        conflicts = plan.conflicts
        if conflicts:
            raise updating.ConflictsPredicted(
                f"dry run: {len(conflicts)} file{'s' * (len(conflicts) > 1)} would conflict "
                f"({', '.join(conflicts)})"
            )
        return
    updating.apply(project_dir, plan, git)
    click.echo(f"updated to {label}; review with git diff, then commit")
