"""The GPUs and NPUs a launch may use (the launchers' check before any rank starts, and
--nproc auto): what the visibility variables list, else the device nodes."""

from __future__ import annotations

import pytest

from src.scaffold.backend import devices


@pytest.mark.parametrize(
    ("value", "count"),
    [
        ("0", 1),
        ("0,1", 2),
        ("0-3,6", 5),  # the Ascend docker runtime's ranges
        ("Ascend910-4,Ascend910-5", 2),  # and its names
        ("GPU-8f1a,GPU-2b7c", 2),  # CUDA's UUIDs
        ("", 0),
        ("-1", 0),
        ("0,-1,2", 1),  # CUDA stops at the first invalid id
        ("all", None),  # the device nodes say
    ],
)
def test_what_a_visibility_variable_lists(value: str, count: int | None) -> None:
    assert devices._listed(value) == count


def test_a_variable_narrows_what_the_nodes_would_say(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(devices.IMAGE_ENV, raising=False)
    monkeypatch.setenv("ASCEND_VISIBLE_DEVICES", "2,3")
    found = devices.seen("auto")
    assert found is not None and found.describe() == "2 Ascend NPUs (ASCEND_VISIBLE_DEVICES=2,3)"
    assert devices.seen("cpu") is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.seen("cuda").count == 0  # type: ignore[union-attr]


def test_one_process_among_several_visible_devices_is_told_the_boot_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An 8-card spec that runs `python train.py` once trains on one card: the WARNING names
    launch.py; a run of several ranks, on the CPU, or with one card is not warned."""
    for name in ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    monkeypatch.setenv("ASCEND_VISIBLE_DEVICES", "0-7")
    for device in ("cuda:0", "GPU:0", "Ascend:0"):
        said = devices.idle(device, 1)
        assert said is not None and said.startswith("8 ") and "7 stay idle" in said
        assert "boot file launch.py" in said
    assert devices.idle("cuda:0", 8) is None
    assert devices.idle("cpu", 1) is None and devices.idle("CPU", 1) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert devices.idle("cuda:0", 1) is None
