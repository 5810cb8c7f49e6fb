"""`gen ranktable generate|merge|check`: HCCL rank tables for Ascend jobs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from generator import ranktable as rt
from generator.errors import FileExists, RankTableInvalid

OUTPUT = click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="File to write.",
)
FORCE = click.option("--force", is_flag=True, help="Replace the output file if it exists.")


@contextmanager
def _rank_table_errors() -> Iterator[None]:
    try:
        yield
    except rt.RankTableError as err:
        raise RankTableInvalid(err.problems) from err


def _write(table: rt.RankTable, output: Path, force: bool) -> None:
    if output.exists() and not force:
        raise FileExists(f"{output} exists; pass --force to replace it (nothing was written)")
    # Write beside the target and rename, so a failure never leaves half a table.
    fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(table.dumps())
    os.replace(tmp, output)
    click.echo(f"wrote {output}: {table.summary()}")


@click.group()
def ranktable() -> None:
    """Build, merge and check HCCL rank tables (version 1.0, server_list)."""


@ranktable.command()
@click.option("--server-ip", required=True, help="This server's host IP (server_id).")
@click.option("--devices", default="0-7", show_default=True, help="Device ids: 0-7, 0,1,2,3 ...")
@click.option("--device-ips", help="Comma-separated device NIC IPs, one per device.")
@click.option(
    "--hccn-conf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read device IPs from address_N= lines (default /etc/hccn.conf).",
)
@OUTPUT
@FORCE
def generate(
    server_ip: str,
    devices: str,
    device_ips: str | None,
    hccn_conf: Path | None,
    output: Path,
    force: bool,
) -> None:
    """Write a one-server rank table."""
    with _rank_table_errors():
        ids = rt.parse_device_ids(devices)
        if device_ips:
            table = rt.generate(server_ip, ids, [ip.strip() for ip in device_ips.split(",")])
        else:
            conf = hccn_conf or Path("/etc/hccn.conf")
            if not conf.is_file():
                raise rt.RankTableError(
                    [f"device ips: give --device-ips or --hccn-conf ({conf} does not exist)"]
                )
            table = rt.generate_from_hccn(server_ip, ids, conf.read_text(encoding="utf-8"))
    _write(table, output, force)


@ranktable.command()
@click.argument("tables", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@OUTPUT
@FORCE
def merge(tables: tuple[Path, ...], output: Path, force: bool) -> None:
    """Join several servers' tables; ranks are renumbered in argument order."""
    with _rank_table_errors():
        merged = rt.merge(rt.load(path) for path in tables)
    _write(merged, output, force)


@ranktable.command()
@click.argument("table", type=click.Path(dir_okay=False, path_type=Path))
def check(table: Path) -> None:
    """Validate a rank table and print a one-line summary."""
    with _rank_table_errors():
        click.echo(rt.load(table).summary())
