"""What a container gets from the host: GPUs, NPU device nodes, the driver's files, and
the group owning /dev/davinci_manager."""

from __future__ import annotations

import os
from pathlib import Path

from generator.devices.host import ASCEND_MOUNTS, Accelerators, ascend_groups, detect


def test_the_davinci_manager_group_comes_from_its_stat() -> None:
    manager = os.stat_result((0o20660, 1, 5, 1, 0, 1001, 0, 0, 0, 0))
    assert ascend_groups(manager) == ["1001"]
    assert ascend_groups(None) == []


def test_a_cpu_host_offers_nothing(tmp_path: Path) -> None:
    found = detect(set(), tmp_path)
    assert found == Accelerators()
    assert found.describe() == "no GPU or NPU: running on the CPU"
    spec = found.container("img", ["true"], volumes={"/h": "/c"}, user=None)
    assert (spec.devices, spec.group_add, spec.read_only, spec.gpus) == ([], [], [], False)


def test_nvidia_runtime_means_gpus(tmp_path: Path) -> None:
    found = detect({"runc", "nvidia"}, tmp_path)
    assert found.nvidia and found.describe() == "NVIDIA GPUs"
    assert found.container("img", ["true"], volumes={}, user=None).gpus


def test_davinci_nodes_bring_control_devices_driver_mounts_and_the_group(tmp_path: Path) -> None:
    dev, root = tmp_path / "dev", tmp_path / "root"
    dev.mkdir()
    for name in ("davinci0", "davinci1", "davinci_manager", "hisi_hdc", "davinci_extra"):
        (dev / name).touch()
    os.chown(dev / "davinci_manager", -1, 4242)
    driver = root / ASCEND_MOUNTS[0].lstrip("/")
    driver.mkdir(parents=True)
    found = detect(set(), dev, root)
    assert found.npus == 2 and found.describe() == "2 Ascend device node(s)"
    assert found.devices == [
        str(dev / "davinci0"),
        str(dev / "davinci1"),
        str(dev / "davinci_manager"),
        str(dev / "hisi_hdc"),
    ]
    assert found.mounts == [ASCEND_MOUNTS[0]] and found.groups == ["4242"]
    spec = found.container("img", ["true"], volumes={}, user="1000:1000")
    assert spec.group_add == ["4242"] and spec.read_only == [ASCEND_MOUNTS[0]]


def test_the_manager_group_is_added_whenever_the_device_exists(tmp_path: Path) -> None:
    (tmp_path / "davinci_manager").touch()
    os.chown(tmp_path / "davinci_manager", -1, 77)
    found = detect(set(), tmp_path)
    assert found.groups == ["77"] and found.devices == [] and found.npus == 0
