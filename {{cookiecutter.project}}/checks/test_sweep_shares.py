"""sweep.py --parallel K: this node's devices divided between K trials, each trial's ranks its
devices, named to it by the visibility variable; on a CPU node its cores. Too many trials is
one line. The GPUs are listed by nvidia-smi, here a stand-in on PATH printing 8, with no
NPU device nodes in the directory looked in (an Ascend node's own would come first)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from src.scaffold.errors import ConfigError
from src.scaffold.sweep import study, trials

GPUS = "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:08d})\\n" for i in range(8))


@pytest.fixture
def eight_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{GPUS}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv(trials.GPU_VISIBLE, raising=False)
    monkeypatch.setattr(trials, "DEVICES", tmp_path)  # no davinci nodes there


def test_eight_gpus_and_four_trials_are_two_a_trial(eight_gpus: None) -> None:
    shares = study.shares(4, None)
    assert [s.devices for s in shares] == [("0", "1"), ("2", "3"), ("4", "5"), ("6", "7")]
    assert {(s.visible, s.ranks) for s in shares} == {(trials.GPU_VISIBLE, 2)}


def test_the_visible_devices_are_the_ones_divided(
    eight_gpus: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(trials.GPU_VISIBLE, "4,5,6,7")
    assert [s.devices for s in study.shares(2, None)] == [("4", "5"), ("6", "7")]
    with pytest.raises(ConfigError, match=r"--parallel 5: this node has 4 devices"):
        study.shares(5, None)
    with pytest.raises(ConfigError, match=r"--ranks 1: a trial's ranks are its devices here"):
        study.shares(2, 1)


def test_a_cpu_nodes_cores_are_divided(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trials, "accelerators", lambda: ("", []))
    found = trials.cores()
    shares = study.shares(len(found), None)
    assert [list(s.cores) for s in shares] == [[core] for core in found]
    assert all(s.ranks == 1 and not s.devices for s in shares)
    with pytest.raises(ConfigError, match="one at least a rank"):
        study.shares(len(found) + 1, None)
