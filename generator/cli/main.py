"""The `gen` command line: parse, call the library, print. Errors become one line."""

from __future__ import annotations

import sys

import click

from generator.errors import GenError


class _Reported(click.ClickException):
    """A GenError on its way out: ``error:`` lines, then its details, then the exit code."""

    def __init__(self, error: GenError) -> None:
        super().__init__(str(error))
        self.error = error
        self.exit_code = error.exit_code

    def show(self, file: object = None) -> None:
        for line in self.error.lines():
            click.echo(f"error: {line}", err=True)
        for line in self.error.details():
            click.echo(line, err=True)


class _Gen(click.Group):
    """The top-level group: turns the library's errors into one line each, unless --debug
    asks for the traceback (read from this invocation, not from global state)."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except GenError as err:
            if ctx.params.get("debug"):
                raise
            raise _Reported(err) from err


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from generator.render.project import template_dir
    from generator.version import describe

    click.echo(describe(template_dir()))
    ctx.exit()


@click.group(cls=_Gen, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and the template's commit, then exit.",
)
@click.option("--debug", is_flag=True, help="Show a traceback on errors.")
def cli(debug: bool) -> None:
    """Generate and ship training projects for OpenI, ModelArts/Ascend and CUDA clusters."""


def _register() -> None:
    from generator.cli.doctor import doctor
    from generator.cli.image import image
    from generator.cli.job import job
    from generator.cli.new import new
    from generator.cli.push import push
    from generator.cli.ranktable import ranktable
    from generator.cli.report import report
    from generator.cli.submit import submit
    from generator.cli.update import update

    cli.add_command(new)
    cli.add_command(ranktable)
    cli.add_command(image)
    cli.add_command(push)
    cli.add_command(job)
    cli.add_command(report)
    cli.add_command(update)
    cli.add_command(submit)
    cli.add_command(doctor)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `gen` console script."""
    _register()
    try:
        cli.main(args=argv, prog_name="gen", standalone_mode=False)
    except click.UsageError as err:
        # One line, like every other error: what is wrong and what is allowed.
        click.echo(f"error: {err.format_message()}", err=True)
        sys.exit(err.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except click.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(130)
