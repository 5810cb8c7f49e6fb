"""`gen image build|smoke|push`: parse, call generator.image, print."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from generator.cli.args import PROJECT_DIR
from generator.render.options import TARGETS

if TYPE_CHECKING:
    from rich.console import Console

    from generator.image.build import BuildReport

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
    return f"{size / 1e3:.1f} kB" if size < 1e6 else f"{size / 1e6:.1f} MB"


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
@click.option(
    "--build-arg",
    "build_args",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Dockerfile ARG, repeatable (e.g. HWHIAI_UID=1001).",
)
@click.option("--catalog-entry", help="Another base from images/ (e.g. cann8.1.rc1-910b-...).")
@click.option("--framework-version", help="Another framework version from images/.")
@click.option(
    "--arch",
    type=click.Choice(("aarch64", "x86_64")),
    help="The servers' CPU (default: the project's; Ascend: aarch64, CUDA: x86_64).",
)
@click.option("--network", help="Network for RUN steps (e.g. host for apt behind a proxy).")
@click.option("--no-cache", "nocache", is_flag=True, help="Rebuild every layer.")
@click.option("--dry-run", is_flag=True, help="Show both build steps and the dependency key.")
def build(project_dir: Path, **given: object) -> None:
    """Build the image for --target from PROJECT_DIR (default: here): the dependency
    image (reused while its key holds), then the code image FROM it."""
    from generator.image.build import build_image
    from generator.image.plan import BuildRequest

    request = BuildRequest(project_dir, **given)  # type: ignore[arg-type]
    if request.dry_run:
        _show_plan(build_image(request, on_line=click.echo))
        return
    console = _console()
    with console.status("building") as status:

        def show(line: str) -> None:
            if line.startswith("Step "):
                status.update(f"[bold]{line}")
            console.print(line, style="dim", markup=False)

        report = build_image(request, on_line=show)
    deps, built = report.deps, report.image
    assert built is not None
    how = (
        "reused"
        if deps.reused
        else f"built in {deps.seconds:.1f} s, context {_mb(deps.context_bytes)}"
    )
    click.echo(f"dependency image {deps.ref}: {how}")
    click.echo(f"built {report.plan.tag} ({_mb(built.size)}) in {report.seconds:.1f} s")
    click.echo(f"context {_mb(report.context_bytes)}; log: {report.plan.log_path}")


def _show_plan(report: BuildReport) -> None:
    """A dry run: both Dockerfiles, their build arguments and the dependency key."""
    from generator.image.arch import docker_platform

    deps, plan = report.deps, report.plan
    click.echo(f"# step 1 of 2: dependency image {deps.ref or '(key unknown)'}")
    click.echo(f"# for {plan.arch} servers (--platform {docker_platform(plan.arch)})")
    click.echo(f"# dependency key: {deps.key or 'unknown: ' + deps.unknown}")
    if deps.python:
        click.echo(f"# python: {deps.python.command} {deps.python.version} ({deps.python.source})")
    if plan.wheelhouse:
        sent = (
            "all (a requirement gen cannot follow)" if deps.wheels.whole else len(deps.wheels.files)
        )
        click.echo(
            f"# wheelhouse: {plan.wheelhouse}: sends {sent} file(s), {_mb(deps.wheels.size)}"
        )
        for name in deps.wheels.missing:
            click.echo(f"# not in the wheelhouse: {name}")
    for key, value in sorted(deps.buildargs.items()):
        click.echo(f"# build arg: {key}={value}")
    click.echo(deps.dockerfile)
    click.echo(f"# step 2 of 2: code image {plan.tag}, FROM the dependency image")
    for key, value in sorted(report.code_args.items()):
        click.echo(f"# build arg: {key}={value}")
    click.echo(report.code_dockerfile, nl=False)


@image.command()
@TARGET
@PROJECT_DIR
@TAG
@click.option("--timeout", default=600, show_default=True, help="Seconds before it is killed.")
def smoke(target: str, project_dir: Path, tag: str | None, timeout: int) -> None:
    """Run a short training in the built image and check what it wrote."""
    import time

    from generator.image.smoke import smoke_image

    console = _console()
    start = time.monotonic()
    result = smoke_image(
        project_dir,
        target,
        tag=tag,
        timeout_s=timeout,
        on_line=lambda line: console.print(line, style="dim", markup=False),
        on_status=click.echo,
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
    stored (~/.docker/config.json). Prints the pushed reference with its digest and
    keeps it in logs/image-<target>.pushed.
    """
    from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn

    from generator.engine import LayerProgress
    from generator.image.push import push_image

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    # Bars while it runs; what stays is one line a layer and the result.
    with Progress(*columns, console=_console(), transient=True) as progress:
        tasks: dict[str, TaskID] = {}
        done: set[str] = set()

        def show(event: LayerProgress) -> None:
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

        report = push_image(
            project_dir, target, registry, tag=tag, on_progress=show, on_status=click.echo
        )
    click.echo(f"pushed {report.reference} as {report.repository}@{report.digest}")
    click.echo(f"recorded in {report.record}")
