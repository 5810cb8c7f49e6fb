"""`gen submit`: create and follow ModelArts training jobs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from generator.cli.args import PROJECT_DIR
from generator.cli.new import _parse_set
from generator.submit.modelarts import (
    AK_ENV,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    MAX_RETRIES,
    PROJECT_ENV,
    SK_ENV,
)

CREDENTIALS = f"Credentials: ${AK_ENV}, ${SK_ENV} and ${PROJECT_ENV} (never written anywhere)."


def _api_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--region, --endpoint, --timeout: where the API is."""
    for option in reversed(
        [
            click.option("--region", default="cn-north-4", show_default=True, help="Region."),
            click.option(
                "--endpoint", metavar="URL", help="ModelArts endpoint (default: the region's)."
            ),
            click.option(
                "--timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=DEFAULT_TIMEOUT,
                show_default=True,
                help="Seconds to wait for a reply.",
            ),
        ]
    ):
        command = option(command)
    return command


def _client(region: str, endpoint: str | None, timeout: float) -> Any:
    from generator.submit.modelarts import Credentials, ModelArts, endpoint_of

    return ModelArts(endpoint or endpoint_of(region), Credentials.from_env(), timeout)


@click.group(help=f"Training jobs on ModelArts, through its API. {CREDENTIALS}")
def submit() -> None:
    pass


@submit.command()
@PROJECT_DIR
@click.option("--flavor", required=True, help="Resource flavor id (gen submit flavors).")
@click.option("--data-obs", metavar="OBS_URL", help="Dataset on OBS: the job's data_url input.")
@click.option("--output-obs", metavar="OBS_URL", help="Output on OBS: the job's train_url output.")
@click.option("--nnodes", type=click.IntRange(1), help="Nodes (default: the project's).")
@click.option("--name", help="Job name (default: the project name).")
@click.option("--image", help="Image (default: the one gen image push last pushed).")
@click.option("--target", type=click.Choice(("cuda", "ascend")), help="A 'both' project's image.")
@click.option("--pool-id", help="Dedicated resource pool.")
@click.option(
    "--param", "params", multiple=True, metavar="KEY=VALUE", help="Hyperparameter for train.py."
)
@click.option(
    "--env", "envs", multiple=True, metavar="KEY=VALUE", help="Environment variable (not MA_*)."
)
@click.option(
    "--max-retries",
    type=click.IntRange(0, MAX_RETRIES),
    default=DEFAULT_RETRIES,
    show_default=True,
    help="ModelArts' auto restarts of the job on a fault or a hang (0: none); each rerun "
    "continues the run in --output-obs.",
)
@click.option(
    "--retry-any-failure",
    is_flag=True,
    help="Restart on any failure too, a configuration error (exit 2) included.",
)
@click.option("--dry-run", is_flag=True, help="Print the request body; send nothing.")
@_api_options
def modelarts(
    project_dir: Path,
    flavor: str,
    data_obs: str | None,
    output_obs: str | None,
    nnodes: int | None,
    name: str | None,
    image: str | None,
    target: str | None,
    pool_id: str | None,
    params: tuple[str, ...],
    envs: tuple[str, ...],
    max_retries: int,
    retry_any_failure: bool,
    dry_run: bool,
    region: str,
    endpoint: str | None,
    timeout: float,
) -> None:
    """Create a ModelArts training job that runs PROJECT_DIR's image (default: here)."""
    from generator.submit.command import describe, job_spec, record
    from generator.submit.modelarts import check_environment, request_body

    environment = _parse_set(envs)
    check_environment(environment)
    spec = job_spec(
        project_dir,
        flavor=flavor,
        target=target,
        image=image,
        name=name,
        nodes=nnodes,
        data_obs=data_obs,
        output_obs=output_obs,
        pool_id=pool_id,
        parameters=_parse_set(params),
        environment=environment,
        retries=max_retries,
        retry_any_failure=retry_any_failure,
    )
    if dry_run:
        click.echo(json.dumps(request_body(spec), indent=2, ensure_ascii=False))
        return
    reply = _client(region, endpoint, timeout).create(spec)
    job_id = record(project_dir, reply)
    for line in describe(reply):
        click.echo(line)
    click.echo(f"next: gen submit status {job_id}  (recorded in logs/modelarts-jobs.jsonl)")


@submit.command()
@click.argument("job_id")
@_api_options
def status(job_id: str, region: str, endpoint: str | None, timeout: float) -> None:
    """A training job's phase and tasks."""
    from generator.submit.command import describe

    for line in describe(_client(region, endpoint, timeout).show(job_id)):
        click.echo(line)


@submit.command()
@click.argument("job_id")
@click.option("--task", default="worker-0", show_default=True, help="Task (gen submit status).")
@_api_options
def logs(job_id: str, task: str, region: str, endpoint: str | None, timeout: float) -> None:
    """A preview of a task's log (its last part)."""
    reply = _client(region, endpoint, timeout).logs(job_id, task)
    click.echo(str(reply.get("content", "")), nl=False)


@submit.command()
@click.option("--type", "kind", type=click.Choice(("CPU", "GPU", "Ascend")), help="Only these.")
@_api_options
def flavors(kind: str | None, region: str, endpoint: str | None, timeout: float) -> None:
    """The training flavors of the region: id, type, name."""
    reply = _client(region, endpoint, timeout).flavors(kind)
    for flavor in reply.get("flavors") or []:
        click.echo(
            f"{flavor.get('flavor_id', '?'):<40} {flavor.get('flavor_type', '?'):<7} "
            f"{flavor.get('flavor_name', '')}"
        )
