"""Where a process stands in the job, read from what its launcher set: torchrun's
variables, or one process per device (RANK_SIZE, RANK_ID, DEVICE_ID or ASCEND_DEVICE_ID)
meeting at MASTER_ADDR or at the rank table's first server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from src.scaffold.backend import distributed
from src.scaffold.errors import DeviceError

LAUNCH_VARS = (
    "WORLD_SIZE RANK LOCAL_RANK LOCAL_WORLD_SIZE RANK_SIZE RANK_ID DEVICE_ID "
    "ASCEND_DEVICE_ID MASTER_ADDR MASTER_PORT RANK_TABLE_FILE"
).split()


@pytest.fixture(autouse=True)
def no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)


def launched(monkeypatch: pytest.MonkeyPatch, **values: str) -> distributed.Placement:
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return distributed.placement()


def test_alone_without_a_launcher() -> None:
    assert distributed.placement() == distributed.Placement()


def test_torchrun_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    place = launched(
        monkeypatch,
        WORLD_SIZE="4",
        RANK="3",
        LOCAL_RANK="1",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="10.0.0.1",
        MASTER_PORT="29600",
    )
    assert (place.rank, place.world_size, place.device_index) == (3, 4, 1)
    assert (place.master_addr, place.master_port) == ("10.0.0.1", 29600)


def test_per_device_takes_ascend_device_id(monkeypatch: pytest.MonkeyPatch) -> None:
    # ModelZoo's scripts export ASCEND_DEVICE_ID where others set DEVICE_ID.
    place = launched(
        monkeypatch, RANK_SIZE="8", RANK_ID="5", ASCEND_DEVICE_ID="6", MASTER_ADDR="10.0.0.2"
    )
    assert (place.rank, place.world_size, place.device_index) == (5, 8, 6)
    assert (place.master_addr, place.master_port) == ("10.0.0.2", distributed.DEFAULT_PORT)


@pytest.mark.parametrize("form", ["server_list", "group_list"])
def test_per_device_meets_at_the_rank_tables_first_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, form: str
) -> None:
    servers = [{"server_id": "10.0.0.7"}, {"server_id": "10.0.0.8"}]
    data = {"server_list": servers}
    if form == "group_list":
        data = {"group_list": [{"instance_list": servers}]}
    table = tmp_path / "rank_table.json"
    table.write_text(json.dumps(data))
    place = launched(
        monkeypatch, RANK_SIZE="2", RANK_ID="1", DEVICE_ID="1", RANK_TABLE_FILE=str(table)
    )
    assert (place.rank, place.master_addr) == (1, "10.0.0.7")


def test_per_device_without_a_meeting_point_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(DeviceError) as caught:
        launched(monkeypatch, RANK_SIZE="2", DEVICE_ID="0")
    message = str(caught.value)
    assert "RANK_ID, MASTER_ADDR (or RANK_TABLE_FILE) is not set" in message
    assert "\n" not in message
