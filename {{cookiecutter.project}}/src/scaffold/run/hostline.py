"""The start-up host check: does this host's driver (and GPU, or NPUs) fit the image?

Inside the project's images (TRAIN_ACCELERATOR set) train.py logs one line, the same
checks `gen doctor` makes on the host (scripts/hostcheck.py): the NVIDIA driver against
the image's CUDA and the GPU against torch's architectures, or the Ascend devices and
the driver's compatible_version against the image's CANN toolkit. A failure is a
WARNING; with --strict it stops the run (exit 2) before any data is read.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from src.scaffold.errors import TrainError

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"
# Where the host's /proc, /sys, /dev and /usr/local/Ascend are read (tests give a copy).
ROOT_ENV = "TRAIN_HOSTCHECK_ROOT"


class HostCheckFailed(TrainError):
    """--strict and a host check failed."""


def _hostcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hostcheck", SCRIPTS / "hostcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torch_gpu() -> tuple[tuple[int, int] | None, list[str]]:
    """The GPU's compute capability and the architectures torch was built for; (None, [])
    where no GPU is usable (the driver line says why)."""
    try:
        import torch
    except ImportError:  # MindSpore: no arch list to compare
        return None, []
    if not torch.cuda.is_available():
        return None, []
    return torch.cuda.get_device_capability(), torch.cuda.get_arch_list()


def results(accelerator: str, root: str) -> list[Any]:
    """The checks for an image built for ``accelerator`` (cuda or npu)."""
    check = _hostcheck()
    if accelerator == "cuda":
        drivers = SCRIPTS / "cuda_drivers.json"
        if not drivers.is_file():  # a project made for Ascend only
            return [check.Result("NVIDIA driver", check.NA, f"no {drivers.name} in scripts/")]
        table = json.loads(drivers.read_text(encoding="utf-8"))
        cuda = os.environ.get("CUDA_VERSION", "?")  # set by the nvidia/cuda base images
        found = [check.cuda_driver_check(check.nvidia_driver(root), cuda, table)]
        capability, arch = _torch_gpu()
        if capability and arch:
            found.append(check.arch_check(capability, arch))
        return found
    toolkit = check.toolkit_info(root)
    cann = check.key_values(toolkit or "").get("version", "of this image")
    driver = check.read(root, check.ASCEND_DRIVER_INFO)
    return [check.ascend_devices(root), check.cann_check(driver, toolkit, cann, "")]


def host_line(strict: bool) -> tuple[str, bool] | None:
    """The line to log and whether a check failed; None outside the project's images.
    With ``strict``, a failure raises HostCheckFailed."""
    accelerator = os.environ.get("TRAIN_ACCELERATOR", "")
    if accelerator not in ("cuda", "npu"):
        return None
    found = results(accelerator, os.environ.get(ROOT_ENV, "/"))
    failed = any(r.status == "fail" for r in found)
    line = "host check: " + " | ".join(r.line() for r in found)
    if failed and strict:
        raise HostCheckFailed(line + " (--strict)")
    return line, failed
