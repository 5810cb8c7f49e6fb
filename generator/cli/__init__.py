"""The `gen` command line: parse, call the library, print. Errors become one line."""

from __future__ import annotations

import sys

import click

from generator import __version__
from generator.errors import GenError

_state = {"debug": False}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gen")
@click.option("--debug", is_flag=True, help="Show a traceback on errors.")
def cli(debug: bool) -> None:
    """Generate and ship training projects for OpenI, ModelArts/Ascend and CUDA clusters."""
    _state["debug"] = debug


def _register() -> None:
    from generator.cli.image import image
    from generator.cli.job import job
    from generator.cli.new import new
    from generator.cli.push import push
    from generator.cli.ranktable import ranktable

    cli.add_command(new)
    cli.add_command(ranktable)
    cli.add_command(image)
    cli.add_command(push)
    cli.add_command(job)


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
    except GenError as err:
        if _state["debug"]:
            raise
        for line in err.lines():
            click.echo(f"error: {line}", err=True)
        for line in err.details():
            click.echo(line, err=True)
        sys.exit(err.exit_code)
