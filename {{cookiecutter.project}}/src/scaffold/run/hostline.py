"""The start-up host check in the project's images: `gen doctor`'s driver and GPU checks
(scripts/hostcheck.py) as one line; a failure is a WARNING, with --strict an error."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from src.scaffold.errors import TrainError

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"
# Where the host's /proc, /sys, /dev and /usr/local/Ascend are read (tests give a copy).
ROOT_ENV = "TRAIN_HOSTCHECK_ROOT"


def results(accelerator: str, root: str) -> list[Any]:
    """The checks for an image built for ``accelerator`` (cuda or npu)."""
    spec = importlib.util.spec_from_file_location("hostcheck", SCRIPTS / "hostcheck.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    if accelerator == "cuda":
        drivers = SCRIPTS / "cuda_drivers.json"
        if not drivers.is_file():  # a project made for Ascend only
            return [check.Result("NVIDIA driver", check.NA, f"no {drivers.name} in scripts/")]
        table = json.loads(drivers.read_text(encoding="utf-8"))
        cuda = os.environ.get("CUDA_VERSION", "?")  # set by the nvidia/cuda base images
        found = [check.cuda_driver_check(check.nvidia_driver(root), cuda, table)]
        try:
            import torch
        except ImportError:  # MindSpore: no arch list to compare
            return found
        arch = torch.cuda.get_arch_list() if torch.cuda.is_available() else []
        if arch:  # the GPU against torch's architectures
            found.append(check.arch_check(torch.cuda.get_device_capability(), arch))
        return found
    toolkit = check.toolkit_info(root)
    cann = check.key_values(toolkit or "").get("version", "of this image")
    driver = check.read(root, check.ASCEND_DRIVER_INFO)
    return [check.ascend_devices(root), check.cann_check(driver, toolkit, cann, "")]


def host_line(strict: bool) -> tuple[str, bool] | None:
    """The line to log and whether a check failed (None: not in the project's images)."""
    if (accelerator := os.environ.get("TRAIN_ACCELERATOR", "")) not in ("cuda", "npu"):
        return None
    found = results(accelerator, os.environ.get(ROOT_ENV, "/"))
    failed = any(r.status == "fail" for r in found)
    line = "host check: " + " | ".join(r.line() for r in found)
    if failed and strict:
        raise TrainError(line + " (--strict)")
    return line, failed
