"""The host rules gen doctor and the projects' start-up check share, on real files
(tests/data/doctor/PROVENANCE.md says where each comes from)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from generator.doctor.host import driver_table
from generator.shipped import hostcheck
from generator.shipped.hostcheck import FAIL, NA, OK

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"


def tree(root: Path, files: dict[str, str]) -> str:
    """A --root tree: each path under ``root`` gets a fixture file's bytes (or text)."""
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if (DATA / source).is_file():
            shutil.copyfile(DATA / source, path)
        else:
            path.write_text(source)
    return str(root)


# Each kernel module's /proc file, and the version in it.
PROC_VERSIONS = {
    "nvidia-proc-version-open": "565.57.01",
    "nvidia-proc-version-closed": "375.74",
    "nvidia-proc-version-closed-535": "535.161.08",
}


@pytest.mark.parametrize("fixture", list(PROC_VERSIONS))
def test_the_driver_version_is_read_from_either_kernel_module(tmp_path: Path, fixture: str) -> None:
    root = tree(tmp_path, {hostcheck.NVIDIA_PROC: fixture})
    assert hostcheck.nvidia_driver(root) == PROC_VERSIONS[fixture]


def test_a_driver_file_without_a_version_is_named_not_called_missing(tmp_path: Path) -> None:
    root = str(tmp_path)
    assert hostcheck.nvidia_driver_problem(root) == (
        "no NVIDIA driver (no /proc/driver/nvidia/version)"
    )
    tree(tmp_path, {hostcheck.NVIDIA_PROC: "NVRM version: something else entirely\n"})
    assert hostcheck.nvidia_driver(root) is None
    result = hostcheck.cuda_driver_check(None, "11.8.0", driver_table(), root)
    assert result.line() == (
        "✗ NVIDIA driver: /proc/driver/nvidia/version is unparseable (no driver version in it); "
        "needed: a driver for CUDA 11.8.0; fix: reinstall the driver (it writes the file), or "
        "run where one is loaded"
    )
    os.remove(tmp_path / hostcheck.NVIDIA_PROC)
    (tmp_path / hostcheck.NVIDIA_PROC).mkdir()  # there, and no file to read
    assert hostcheck.nvidia_driver_problem(root) == "/proc/driver/nvidia/version is unreadable"
    # Without a root (the start-up check) the line says only what it knows.
    assert hostcheck.cuda_driver_check(None, "11.8.0", {}).found == "no NVIDIA driver version found"


def test_without_proc_the_module_version_in_sys_is_read(tmp_path: Path) -> None:
    assert hostcheck.nvidia_driver(str(tmp_path)) is None
    root = tree(tmp_path, {hostcheck.NVIDIA_SYS: "550.144.03\n"})
    assert hostcheck.nvidia_driver(root) == "550.144.03"


@pytest.mark.parametrize(
    ("driver", "cuda", "status", "says"),
    [
        ("565.57.01", "11.8.0", OK, "565.57.01 >= 520.61.05 for CUDA 11.8"),
        ("520.61.05", "11.8.0", OK, "520.61.05 >= 520.61.05 for CUDA 11.8"),
        ("470.57.02", "11.8.0", OK, "minor-version compatibility (>= 450.80.02"),
        ("375.74", "11.8.0", FAIL, "375.74 is older than CUDA 11.8 needs"),
        ("450.36.06", "11.6.2", FAIL, "450.36.06 is older than CUDA 11.6 needs"),
        ("535.161.08", "12.4.1", OK, "minor-version compatibility (>= 525.60.13"),
        (None, "11.8.0", FAIL, "no NVIDIA driver"),
    ],
)
def test_the_driver_against_the_images_cuda(
    driver: str | None, cuda: str, status: str, says: str
) -> None:
    result = hostcheck.cuda_driver_check(driver, cuda, driver_table())
    assert result.status == status and says in result.found
    if status == FAIL and driver:
        assert result.needed.startswith(">= ") and "upgrade the host driver" in result.fix


@pytest.mark.parametrize(
    ("capability", "arch_list", "status"),
    [
        ((8, 0), ["sm_50", "sm_80", "sm_90"], OK),
        ((8, 6), ["sm_80"], OK),  # a cubin runs on a higher minor of its major
        ((9, 0), ["sm_80", "compute_80"], OK),  # PTX of a lower capability, by JIT
        ((9, 0), ["sm_80", "sm_86"], FAIL),
        ((7, 0), ["sm_80", "compute_80"], FAIL),
    ],
)
def test_the_gpu_against_torchs_arch_list(
    capability: tuple[int, int], arch_list: list[str], status: str
) -> None:
    assert hostcheck.arch_check(capability, arch_list).status == status


DRIVER_25_3 = "ascend-driver-version.info-25.3.rc1"


@pytest.mark.parametrize(
    ("driver", "toolkit", "line"),
    [
        # The driver lists the toolkit's innerversion (C23 in C19..C23).
        (
            DRIVER_25_3,
            "ascend_toolkit_install.info-8.3.RC2",
            "✓ Ascend driver: 25.3.rc1 (V100R001C23) lists CANN x (V100R001C23)",
        ),
        # The newer toolkit (C25) lists the driver (C23); the driver does not list C25.
        (
            DRIVER_25_3,
            "ascend_toolkit_install.info-8.5.0",
            "✓ Ascend driver: CANN x (V100R001C25) lists 25.3.rc1 (V100R001C23)",
        ),
        (
            DRIVER_25_3,
            "ascend_toolkit_install.info-8.5.0-B232",
            "✓ Ascend driver: CANN x (V100R001C25) lists 25.3.rc1 (V100R001C23)",
        ),
        # Neither lists the other (C13 against C19..C23, C23 against C29, C30, C13...).
        (
            DRIVER_25_3,
            "ascend_toolkit_install.info",
            "✗ Ascend driver: 25.3.rc1 (V100R001C23) and CANN x (V100R001C13): neither's "
            "compatible_version lists the other; needed: a driver that lists CANN x, or that "
            "it lists; fix: install the Ascend HDK the CANN release notes pair with it (版本配套), "
            "or choose an image whose CANN this driver lists",
        ),
        (
            "ascend-driver-version.info",
            "ascend_toolkit_install.info",
            "✓ Ascend driver: 23.0.7 (V100R001C15) lists CANN x (V100R001C13)",
        ),
        # 8.0.0's toolkit (C20) lists the older driver 23.0.7 (C15), which lists C13, C15.
        (
            "ascend-driver-version.info",
            "ascend_toolkit_install.info-8.0.0",
            "✓ Ascend driver: CANN x (V100R001C20) lists 23.0.7 (V100R001C15)",
        ),
    ],
)
def test_the_ascend_driver_against_the_toolkit(driver: str, toolkit: str, line: str) -> None:
    """Either record listing the other is compatible, whichever of the two it is."""
    driver_info, toolkit_info = (DATA / driver).read_text(), (DATA / toolkit).read_text()
    assert hostcheck.cann_check(driver_info, toolkit_info, "x", "").line() == line


def test_a_toolkit_list_not_known_is_not_judged_against_the_driver() -> None:
    # The host knows the image's innerversion but not its list: only the driver's side.
    driver = (DATA / DRIVER_25_3).read_text()
    result = hostcheck.cann_check(driver, "innerversion=V100R001C10SPC001B250\n", "9.0.0", "")
    assert result.line() == (
        "– Ascend driver: 25.3.rc1 (V100R001C23) does not list CANN 9.0.0 (V100R001C10), "
        "whose own list is checked in the image"
    )
    assert hostcheck.cann_check(driver, None, "8.0.0", "V100R001C20SPC001B251").status == OK


def test_compatible_version_ranges_and_whole_tokens() -> None:
    listed = "[V100R001C13,V100R001C19],[V100R001C30]"
    assert hostcheck.compatible("V100R001C15SPC001B1", listed)
    assert hostcheck.compatible("V100R001C30B2", listed)
    assert not hostcheck.compatible("V100R001C20", listed)
    assert not hostcheck.compatible("V100R002C15", listed)
    assert not hostcheck.compatible("", listed)


def test_an_unknown_innerversion_is_not_judged() -> None:
    driver = (DATA / "ascend-driver-version.info").read_text()
    assert hostcheck.cann_check(driver, None, "8.0.0", "").status == NA
    assert hostcheck.cann_check(None, None, "8.0.0", "").status == FAIL


def npu_smi_that_writes(root: Path, marker: Path) -> Path:
    """An executable npu-smi under ``root`` that would write ``marker`` if it ever ran."""
    script = root / "usr/local/sbin/npu-smi"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize(
    ("fixture", "chip"),
    [
        ("npu-smi-info-910b.txt", "910b"),
        ("npu-smi-info-a3-excerpt.txt", "910_93"),
        ("npu-smi-info-910-excerpt.txt", "910"),
    ],
)
def test_a_roots_recorded_npu_smi_is_read(tmp_path: Path, fixture: str, chip: str) -> None:
    """Under --root the recorded `npu-smi info` output names the chip; nothing is run."""
    assert hostcheck.chip_of((DATA / fixture).read_text()) == chip
    root = tmp_path / "host"
    marker = tmp_path / "npu-smi-ran"
    npu_smi_that_writes(root, marker)
    tree(root, {hostcheck.NPU_SMI_RECORD: fixture})
    record = root / hostcheck.NPU_SMI_RECORD
    assert hostcheck.chip_check(str(root), chip).line() == f"✓ Ascend chip: {record} shows {chip}"
    other = "910b" if chip != "910b" else "910"
    mismatch = hostcheck.chip_check(str(root), other)
    assert mismatch.status == FAIL and f"gen update --set chip={chip}" in mismatch.fix
    assert not marker.exists()  # the tree's npu-smi never ran
    record.unlink()
    assert hostcheck.chip_check(str(root), chip).line() == (
        f"– Ascend chip: no {record} (npu-smi is not run under --root)"
    )
    assert not marker.exists()


def test_on_this_host_npu_smi_is_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "npu-smi"
    # A stand-in npu-smi that prints what the real one printed on that server.
    script.write_text(f"#!/bin/sh\ncat '{DATA / 'npu-smi-info-910b.txt'}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(hostcheck, "npu_smi", lambda root: str(script))
    assert hostcheck.chip_check("/", "910b").line() == "✓ Ascend chip: npu-smi shows 910b"
    monkeypatch.setattr(hostcheck, "npu_smi", lambda root: None)
    assert hostcheck.chip_check("/", "910b").line().startswith("✗ Ascend chip: no npu-smi; ")


def test_ascend_device_nodes(tmp_path: Path) -> None:
    assert hostcheck.ascend_devices(str(tmp_path)).status == FAIL
    for name in ("davinci0", "davinci1", *hostcheck.ASCEND_NODES):
        (tmp_path / "dev").mkdir(exist_ok=True)
        (tmp_path / "dev" / name).touch()
    assert hostcheck.ascend_devices(str(tmp_path)).status == OK
    os.remove(tmp_path / "dev" / "hisi_hdc")
    result = hostcheck.ascend_devices(str(tmp_path))
    assert result.status == FAIL and "missing hisi_hdc" in result.found
