"""`gen ranktable generate|merge|convert|check`: HCCL rank tables for Ascend jobs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from generator.errors import FileExists, RankTableInvalid
from generator.shipped.ranktable import tables as rt

OUTPUT = click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="File to write.",
)
FORCE = click.option("--force", is_flag=True, help="Replace the output file if it exists.")
CHIP = click.option(
    "--chip",
    type=click.Choice(sorted(rt.CHIPS)),
    help="The chip's rules: 910 (Atlas training), 910b (A2), 910_93 (A3). "
    "Default: the project's answer (.train-template.json here), else 910b.",
)


def _chip(given: str | None) -> str:
    """--chip, else the chip the project in this directory was generated for, else 910b."""
    if given:
        return given
    from generator.render.project import RECORD_FILE, read_record

    # A damaged record is reported, not read as the default chip's project.
    if not (Path.cwd() / RECORD_FILE).is_file():
        return rt.DEFAULT_CHIP
    return read_record(Path.cwd()).chip


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
    """Build, merge, convert and check HCCL rank tables."""


@ranktable.command()
@click.option("--server-ip", required=True, help="This server's host IP (server_id).")
@click.option("--devices", help="Device ids: 0-7, 0,1,2,3 ...  [default: 0-7; 0-15 on 910_93]")
@click.option("--device-ips", help="Comma-separated device NIC IPs, one per device.")
@click.option(
    "--hccn-conf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read device IPs from address_N= lines (default /etc/hccn.conf).",
)
@CHIP
@click.option(
    "--version",
    "version",
    type=click.Choice(["1.0", "1.2"]),
    help="1.2 (A3 super pods; the default on 910_93) or 1.0 (the default elsewhere).",
)
@click.option(
    "--spod-info",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="1.2: each device's `npu-smi info -t spod-info -i N -c M` output after its command "
    "line, recorded on the node (default: run npu-smi here).",
)
@click.option(
    "--super-pod-id", help="1.2: the server's super pod (default: npu-smi's Super Pod ID)."
)
@OUTPUT
@FORCE
def generate(
    server_ip: str,
    devices: str | None,
    device_ips: str | None,
    hccn_conf: Path | None,
    chip: str | None,
    version: str | None,
    spod_info: Path | None,
    super_pod_id: str | None,
    output: Path,
    force: bool,
) -> None:
    """Write a one-server rank table: version 1.0, or 1.2 on an A3 (910_93) with each
    device's super_device_id and the server's super pod, from npu-smi's spod-info."""
    chip = _chip(chip)
    with _rank_table_errors():
        ids = rt.parse_device_ids(devices or ("0-15" if chip == rt.A3_CHIP else "0-7"))
        spod = spod_info.read_text(encoding="utf-8") if spod_info else None
        sdids, pod = rt.a3_ids(ids, chip, version, spod, super_pod_id)
        if device_ips:
            ips = [ip.strip() for ip in device_ips.split(",")]
            table = rt.generate(server_ip, ids, ips, chip, sdids, pod)
        else:
            conf = hccn_conf or Path("/etc/hccn.conf")
            if not conf.is_file():
                raise rt.RankTableError(
                    [f"device ips: give --device-ips or --hccn-conf ({conf} does not exist)"]
                )
            text = conf.read_text(encoding="utf-8")
            table = rt.generate_from_hccn(server_ip, ids, text, chip, sdids, pod)
    _write(table, output, force)


@ranktable.command()
@click.argument("tables", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@CHIP
@OUTPUT
@FORCE
def merge(tables: tuple[Path, ...], chip: str | None, output: Path, force: bool) -> None:
    """Join several servers' tables; ranks are renumbered in argument order."""
    with _rank_table_errors():
        merged = rt.merge((rt.load(path, _chip(chip)) for path in tables), _chip(chip))
    _write(merged, output, force)


@ranktable.command()
@click.argument("table", type=click.Path(dir_okay=False, path_type=Path))
@CHIP
@click.option(
    "--version",
    "version",
    type=click.Choice(["1.0"]),
    help="Write 1.0 even from a 1.2 table (A3 servers outside super-pod mode).",
)
@OUTPUT
@FORCE
def convert(table: Path, chip: str | None, version: str | None, output: Path, force: bool) -> None:
    """Rewrite a group_list or MindCluster table as HCCL's server_list form: version 1.0,
    or 1.2 for an A3 table (its super pods kept)."""
    with _rank_table_errors():
        converted = rt.convert(rt.load(table, _chip(chip)), version)
    _write(converted, output, force)


@ranktable.command()
@click.argument("table", type=click.Path(dir_okay=False, path_type=Path))
@CHIP
def check(table: Path, chip: str | None) -> None:
    """Validate a rank table (any format) and print a one-line summary."""
    with _rank_table_errors():
        click.echo(rt.load(table, _chip(chip)).summary())
