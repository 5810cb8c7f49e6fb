"""`gen image build|smoke|push`: the project's images, through the Docker engine."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

from generator.options import TARGETS

PROJECT_DIR = click.argument(
    "project_dir",
    required=False,
    default=".",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
TARGET = click.option(
    "--target", type=click.Choice(TARGETS[:2]), required=True, help="Which Dockerfile."
)
TAG = click.option("--tag", help="Image tag (default: <project>:<target>-<git commit>).")


def _console() -> Console:
    # rich is imported only by the commands that show progress. The log goes to
    # stdout; stderr carries only the error lines.
    from rich.console import Console

    return Console(highlight=False)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


@click.group()
def image() -> None:
    """Build, smoke-test and push the project's training images."""


@image.command()
@TARGET
@PROJECT_DIR
@click.option(
    "--base-image", help="Base image instead of the catalogue's (a local or mirror copy)."
)
@TAG
@click.option("--pip-index-url", help="A PyPI mirror for the image's pip.")
@click.option(
    "--wheelhouse",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Local wheels to install from, offline (air-gapped hosts).",
)
@click.option("--build-arg", "build_args", multiple=True, metavar="KEY=VALUE")
@click.option("--catalog-entry", help="Another base from images/ (e.g. cann8.1.rc1-910b-...).")
@click.option("--framework-version", help="Another framework version from images/.")
@click.option("--network", help="Network for RUN steps (e.g. host for apt behind a proxy).")
@click.option("--no-cache", is_flag=True, help="Rebuild every layer.")
@click.option("--dry-run", is_flag=True, help="Print the Dockerfile and build args only.")
def build(
    target: str,
    project_dir: Path,
    base_image: str | None,
    tag: str | None,
    pip_index_url: str | None,
    wheelhouse: Path | None,
    build_args: tuple[str, ...],
    catalog_entry: str | None,
    framework_version: str | None,
    network: str | None,
    no_cache: bool,
    dry_run: bool,
) -> None:
    """Build the image for --target from PROJECT_DIR (default: here)."""
    from generator import engine
    from generator.image import plan_build

    plan = plan_build(
        project_dir,
        target,
        base_image=base_image,
        tag=tag,
        pip_index_url=pip_index_url,
        wheelhouse=wheelhouse,
        build_args=build_args,
        catalog_entry=catalog_entry,
        framework_version=framework_version,
        nocache=no_cache,
        network=network,
    )
    if dry_run:
        click.echo((plan.project_dir / plan.dockerfile).read_text(encoding="utf-8"))
        click.echo(f"# tag: {plan.tag}")
        for key, value in sorted(plan.buildargs.items()):
            click.echo(f"# build arg: {key}={value}")
        if plan.wheelhouse:
            click.echo(f"# wheelhouse: {plan.wheelhouse}")
        return
    docker = engine.connect()
    console = _console()
    plan.log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    context = engine.build_context(plan.project_dir, plan.dockerfile, plan.extra)
    context_bytes = context.seek(0, 2)
    context.seek(0)
    with plan.log_path.open("w", encoding="utf-8") as log, console.status("building") as status:

        def show(line: str) -> None:
            if line.startswith("Step "):
                status.update(f"[bold]{line}")
            console.print(line, style="dim", markup=False)

        built = docker.build(
            context,
            dockerfile=plan.dockerfile,
            tag=plan.tag,
            buildargs=plan.buildargs,
            log=log,
            on_line=show,
            nocache=plan.nocache,
            network_mode=plan.network,
        )
    seconds = time.monotonic() - start
    click.echo(f"built {plan.tag} ({_mb(built.size)}) in {seconds:.1f} s")
    click.echo(f"context {_mb(context_bytes)}; log: {plan.log_path}")


@image.command()
@TARGET
@PROJECT_DIR
@TAG
@click.option("--timeout", default=600, show_default=True, help="Seconds before it is killed.")
def smoke(target: str, project_dir: Path, tag: str | None, timeout: int) -> None:
    """Run a short training in the built image and check what it wrote."""
    from generator import engine
    from generator.image import check_target, default_tag
    from generator.project import read_record
    from generator.smoke import run_smoke

    project_dir = project_dir.resolve()
    options = read_record(project_dir)
    check_target(options, target)
    tag = tag or default_tag(options, target, project_dir)
    docker = engine.connect()
    console = _console()
    accelerators = docker.accelerators()
    click.echo(f"smoke-testing {tag}: {accelerators.describe()}")
    start = time.monotonic()
    result = run_smoke(
        docker,
        tag,
        options.framework,
        project_dir / "output" / f"smoke-{target}",
        timeout_s=timeout,
        on_line=lambda line: console.print(line, style="dim", markup=False),
        accelerators=accelerators,
    )
    for line in result.report:
        click.echo(line)
    click.echo(
        f"passed in {time.monotonic() - start:.1f} s: wrote {', '.join(result.outputs)} "
        f"to {result.output_dir}"
    )


@image.command("push")
@TARGET
@PROJECT_DIR
@TAG
@click.option(
    "--registry",
    required=True,
    metavar="HOST[:PORT]/NAMESPACE",
    help="Where to push, e.g. swr.cn-north-4.myhuaweicloud.com/myteam.",
)
def push_image(target: str, project_dir: Path, tag: str | None, registry: str) -> None:
    """Push the built image to a registry as HOST[:PORT]/NAMESPACE/<project>:<tag>.

    Login: $GEN_REGISTRY_USER and $GEN_REGISTRY_PASSWORD, else what docker login
    stored (~/.docker/config.json). Prints the pushed reference with its digest.
    """
    from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn

    from generator import engine
    from generator.image import check_target, default_tag, registry_auth, registry_target
    from generator.project import read_record

    project_dir = project_dir.resolve()
    options = read_record(project_dir)
    check_target(options, target)
    local = tag or default_tag(options, target, project_dir)
    repository, remote_tag = registry_target(options, registry, local)
    auth = registry_auth()
    docker = engine.connect()
    docker.require_image(local, f"build it first: gen image build --target {target}")
    console = _console()
    click.echo(f"pushing {local} to {repository}:{remote_tag}")
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    # Bars while it runs; what stays is one line a layer and the result.
    with Progress(*columns, console=console, transient=True) as progress:
        tasks: dict[str, TaskID] = {}
        done: set[str] = set()

        def show(event: engine.LayerProgress) -> None:
            if event.layer in done:
                return
            if event.status in ("Preparing", "Waiting", "Pushing"):
                if event.layer not in tasks:
                    tasks[event.layer] = progress.add_task(event.layer, total=None)
                if event.total:
                    progress.update(tasks[event.layer], total=event.total, completed=event.current)
                return
            # Pushed, Layer already exists, Mounted from ...: this layer is done.
            done.add(event.layer)
            if event.layer in tasks:
                progress.remove_task(tasks.pop(event.layer))
            progress.console.print(f"{event.layer}: {event.status}", style="dim")

        digest = docker.push(local, repository, remote_tag, auth=auth, on_progress=show)
    click.echo(f"pushed {repository}:{remote_tag} as {repository}@{digest}")
