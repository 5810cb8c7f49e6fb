"""The host's side of `gen doctor`: the engine (reachable, the target's runtime, room for
the image, the base image), the NVIDIA driver, the Ascend devices, driver and chip."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

import yaml

from generator import catalog
from generator.engine.types import Engine
from generator.errors import GenError, OptionError
from generator.render.options import Options, validate
from generator.shipped import hostcheck
from generator.shipped.hostcheck import FAIL, NA, OK, Result

if TYPE_CHECKING:
    from generator.doctor.subject import Subject

BUILD_SPACE = 20 * 2**30
BASE_SPACE = 10 * 2**30
# Each catalogue CANN's own compatible_version (its ascend_toolkit_install.info), by the
# innerversion the catalogue names: the toolkit's half of hostcheck.ascend_compatible,
# which the host cannot read from an image it may not have. Copied from real records,
# each in tests/data/doctor (PROVENANCE.md); CANN 9.0.0's is not recorded yet.
TOOLKIT_LISTS = {
    "V100R001C20SPC001B251": "[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19],"
    "[V100R001C20]",  # 8.0.0
    "V100R001C21SPC001B238": "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],"
    "[V100R001C21]",  # 8.1.RC1
    **dict.fromkeys(
        ("V100R001C22SPC001B231", "V100R001C23SPC001B235", "V100R001C25SPC001B232"),
        "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C23]",
    ),  # 8.2.RC1, 8.3.RC1, 8.5.0
}


def driver_table() -> dict[str, dict[str, str]]:
    from generator.render.project import template_dir

    data = yaml.safe_load((template_dir() / "images" / "drivers.yaml").read_text("utf-8"))
    return {
        key: {str(k): str(v) for k, v in value.items()} for key, value in data["nvidia"].items()
    }


def engine_checks(subject: Subject) -> list[Result]:
    """Docker reachable, the target's runtime, room for the image, the base image."""
    from generator.engine import connect

    try:
        engine = connect(timeout_s=10)
        info = engine.info()
    except GenError as err:
        return [
            Result(
                "engine", FAIL, str(err), "a Docker engine", "start dockerd (or set DOCKER_HOST)"
            )
        ]
    results = [Result("engine", OK, f"Docker {info.get('ServerVersion', '?')} answers")]
    results.append(_runtime(subject.target, info))
    root = str(info.get("DockerRootDir") or "/var/lib/docker")
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        results.append(Result("disk", NA, f"{root} is not on this machine (a remote engine)"))
    else:
        base = engine.image(subject.entry.base)
        needed = BUILD_SPACE + (0 if base else BASE_SPACE)
        status = OK if free >= needed else FAIL
        results.append(
            Result(
                "disk",
                status,
                f"{free / 2**30:.0f} GiB free in {root}",
                f">= {needed / 2**30:.0f} GiB for the image",
                "free space (docker system prune) or move the data root",
            )
        )
    results.append(_base_image(engine, subject.entry.base))
    return results


def _runtime(target: str, info: dict[str, object]) -> Result:
    name = "runtime"
    runtimes = sorted(info.get("Runtimes") or {})  # type: ignore[arg-type]
    default = str(info.get("DefaultRuntime") or "runc")
    wanted = {"cuda": "nvidia", "ascend": "ascend"}[target]
    found = f"{', '.join(runtimes)} (default {default})"
    if wanted in runtimes:
        return Result(name, OK, found)
    if target == "cuda":
        # docker run --gpus works through the NVIDIA container toolkit's hook as well.
        return Result(
            name,
            FAIL,
            found,
            "the nvidia runtime (docker run --gpus all)",
            "install the NVIDIA Container Toolkit, then nvidia-ctk runtime configure",
        )
    return Result(
        name,
        FAIL,
        found,
        "the ascend runtime (Ascend Docker Runtime)",
        "install Ascend Docker Runtime, or pass the devices by hand (README: Run the image)",
    )


def _base_image(engine: Engine, base: str) -> Result:
    from generator.engine.registry import refusal_reason

    name = "base image"
    if engine.image(base) is not None:
        return Result(name, OK, f"{base} is on this host")
    try:
        said = engine.registry_knows(base)
    except GenError:
        return Result(name, NA, f"{base} is not here; the engine stopped answering")
    if said is None:
        return Result(
            name, OK, f"{base} is not here; its registry has it (gen image build pulls it)"
        )
    return Result(
        name,
        FAIL,
        f"{base} is neither here nor pullable ({refusal_reason(base, said)})",
        "the base image on this host or a reachable registry",
        f"docker pull {base} where a registry is reachable, then docker save/load it here",
    )


def base_source(subject: Subject) -> Result:
    """Where the catalogue's base comes from: the upstream Dockerfile it is built from."""
    entry = subject.entry
    return Result("base source", OK, f"{entry.base} ({entry.id}) is {entry.source()}")


def nvidia_checks(subject: Subject) -> list[Result]:
    cuda = subject.entry.cuda or "?"
    driver = hostcheck.nvidia_driver(subject.root)
    return [
        hostcheck.cuda_driver_check(driver, cuda, driver_table(), subject.root),
        Result("GPU architecture", NA, "checked inside the image at start-up (torch's arch list)"),
    ]


def refusal(options: Options | None) -> Callable[[str], str | None]:
    """Why the project of ``options`` cannot take another chip (gen update --set chip=
    would refuse it), or None where it can."""

    def why_not(chip: str) -> str | None:
        if options is None:
            return None
        try:
            validate({**options.as_context(), "chip": chip})
        except OptionError as err:
            return str(err)
        return None

    return why_not


def ascend_checks(subject: Subject, chip: str) -> list[Result]:
    entry = subject.entry
    root = subject.root
    driver_info = hostcheck.read(root, hostcheck.ASCEND_DRIVER_INFO)
    results = [
        hostcheck.ascend_devices(root),
        hostcheck.cann_check(driver_info, toolkit_record(entry), entry.cann or "?", ""),
    ]
    tool = hostcheck.npu_smi(root)
    results.append(
        Result("npu-smi", OK, tool)
        if tool
        else Result(
            "npu-smi",
            FAIL,
            "not found",
            "npu-smi (installed with the driver)",
            "install the Ascend driver (npu-smi is in /usr/local/sbin)",
        )
    )
    # On this host npu-smi is run; under --root its recorded output is read, nothing run.
    results.append(
        hostcheck.chip_check(root, chip, refusal(subject.options))
        if tool or not hostcheck.is_host(root)
        else Result("Ascend chip", NA, "npu-smi is missing")
    )
    return results


def toolkit_record(entry: catalog.Entry) -> str | None:
    """The image's toolkit record as far as the host knows it: the catalogue's
    innerversion and, where recorded (TOOLKIT_LISTS), that release's compatible_version."""
    if not entry.innerversion:
        return None
    listed = TOOLKIT_LISTS.get(entry.innerversion)
    record = f"innerversion={entry.innerversion}\n"
    return record + (f"compatible_version={listed}\n" if listed else "")
