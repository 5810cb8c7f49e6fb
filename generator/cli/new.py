"""`gen new`: generate a training project."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from generator.errors import OptionError
from generator.render.options import (
    ARCHES,
    CHIPS,
    DEVICES_PER_NODE,
    FRAMEWORKS,
    MS_TRAIN_LOOPS,
    PLATFORMS,
    TARGETS,
    TASKS,
)


def _parse_set(pairs: tuple[str, ...]) -> dict[str, str]:
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise OptionError("--set", f"{pair!r} is not KEY=VALUE")
        values[key] = value
    return values


@click.command()
@click.argument("project")
@click.option("--framework", type=click.Choice(FRAMEWORKS), help="Training framework.")
@click.option(
    "--task",
    type=click.Choice(TASKS),
    help="classify (images, table rows; the default) or lm (a language model of text).",
)
@click.option("--target", type=click.Choice(TARGETS), help="Accelerator target.")
@click.option("--platform", type=click.Choice(PLATFORMS), help="Where the job is submitted.")
@click.option(
    "--devices-per-node",
    "--devices_per_node",
    "devices_per_node",
    type=click.Choice(["auto", *(str(n) for n in DEVICES_PER_NODE)]),
    help="GPUs or NPUs per node (auto: 16 on Atlas A3, else 8; 16 not on chip 910).",
)
@click.option("--nnodes", type=click.IntRange(1), help="Number of nodes.")
@click.option(
    "--ms-train-loop",
    "--ms_train_loop",
    "ms_train_loop",
    type=click.Choice(MS_TRAIN_LOOPS),
    help="MindSpore loop: Model.train (model) or value_and_grad (custom).",
)
@click.option("--chip", type=click.Choice(CHIPS), help="Ascend chip: rank-table rules.")
@click.option(
    "--arch",
    type=click.Choice(ARCHES),
    help="The servers' CPU; auto: aarch64 for Ascend images, x86_64 for CUDA.",
)
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where the project directory is created.",
)
@click.option("--no-input", is_flag=True, help="Do not prompt; use defaults for what is not given.")
@click.option("--set", "set_pairs", multiple=True, metavar="KEY=VALUE", help="Any template option.")
def new(
    project: str,
    framework: str | None,
    task: str | None,
    target: str | None,
    platform: str | None,
    devices_per_node: str | None,
    nnodes: int | None,
    ms_train_loop: str | None,
    chip: str | None,
    arch: str | None,
    output_dir: Path,
    no_input: bool,
    set_pairs: tuple[str, ...],
) -> None:
    """Generate the training project PROJECT (a directory under --output-dir)."""
    from generator.render.project import collect_options, next_command, render

    given: dict[str, object | None] = _parse_set(set_pairs)
    flags = {
        "framework": framework,
        "task": task,
        "target": target,
        "platform": platform,
        "devices_per_node": devices_per_node,
        "nnodes": nnodes,
        "ms_train_loop": ms_train_loop,
        "chip": chip,
        "arch": arch,
    }
    given.update({key: value for key, value in flags.items() if value is not None})
    options = collect_options(project, given)
    # Without a terminal there is nobody to answer prompts.
    created = render(options, output_dir, no_input=no_input or not sys.stdin.isatty())
    click.echo(f"created {created}")
    click.echo(f"next: {next_command(created, options.framework)}")
