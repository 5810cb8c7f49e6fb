"""Which device a MindSpore process takes: named by its launcher, never device 0 by default."""

from __future__ import annotations

import pytest

from src.scaffold.backend.context import _check_device
from src.scaffold.errors import DeviceError


def test_one_process_per_device_must_be_told_its_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MS_ROLE", raising=False)
    with pytest.raises(DeviceError) as err:
        _check_device("Ascend", 8, None)
    assert "neither DEVICE_ID nor ASCEND_DEVICE_ID is set and every rank would use device 0" in (
        str(err.value)
    )
    _check_device("Ascend", 8, 3)  # named
    _check_device("Ascend", 1, None)  # one process: device 0 is its own
    _check_device("CPU", 8, None)  # no device ids on the CPU
    monkeypatch.setenv("MS_ROLE", "MS_WORKER")
    _check_device("Ascend", 8, None)  # msrun gives each worker its device
