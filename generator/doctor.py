"""`gen doctor`: whether this host, its engine and the project's image can run the job.

Each check is a hostcheck.Result (✓, ✗ with what was found, what is needed and the fix,
or – when it does not apply). The driver and device rules live in
generator/shipped/hostcheck.py, shared with the projects' start-up check; the data they
compare against in images/.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from generator import catalog
from generator.engine.types import Engine
from generator.errors import CatalogError, GenError
from generator.options import Options
from generator.shipped import hostcheck
from generator.shipped.hostcheck import FAIL, NA, OK, Result

# What a build needs free in the engine's data root: the framework layers (torch with
# CUDA or torch_npu, MindSpore) and the build's copies; and a CANN or CUDA base to pull.
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
ENTRY_FILES = (
    *("train.py", "eval.py", "predict.py", "export.py", "launch.py", "env.sh", "config.yaml"),
    *("scripts/run_1p.sh", "scripts/run_8p.sh"),
)


@dataclass(frozen=True)
class Subject:
    """What is checked: the target, the catalogue entry its image builds from, the
    project (None outside one) and the root the host's files are read under."""

    target: str
    entry: catalog.Entry
    options: Options | None
    project_dir: Path | None
    root: str


def driver_table() -> dict[str, dict[str, str]]:
    from generator.project import template_dir

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


def nvidia_checks(subject: Subject) -> list[Result]:
    cuda = subject.entry.cuda or "?"
    driver = hostcheck.nvidia_driver(subject.root)
    return [
        hostcheck.cuda_driver_check(driver, cuda, driver_table(), subject.root),
        Result("GPU architecture", NA, "checked inside the image at start-up (torch's arch list)"),
    ]


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
        hostcheck.chip_check(root, chip)
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


def project_checks(subject: Subject) -> list[Result]:
    """The entry files, the rank table, and whether the built image's base is the catalogue's."""
    project, options = subject.project_dir, subject.options
    if project is None or options is None:
        return [Result("project", NA, "not in a project (pass PROJECT_DIR)")]
    missing = [name for name in ENTRY_FILES if not (project / name).is_file()]
    results = [
        Result(
            "entry files",
            FAIL,
            f"missing {', '.join(missing)}",
            "the project's files",
            "restore them from git, or gen update",
        )
        if missing
        else Result("entry files", OK, ", ".join(ENTRY_FILES))
    ]
    table = project / "rank_table_8p.json"
    if subject.target == "ascend" and table.is_file():
        results.append(rank_table_check(table, options.chip))
    else:
        results.append(Result("rank table", NA, "no rank table for this target"))
    results += [image_base(subject), image_cpu(subject)]
    return results


def rank_table_check(table: Path, chip: str) -> Result:
    """The table as `gen ranktable check` reads it; what is wrong with it is one ✗ line."""
    from generator.shipped.ranktable import tables as ranktable

    try:
        loaded = ranktable.load(table, chip=chip)
    # RankTableError is a ValueError (the module ships in projects, without gen's errors);
    # so is the UnicodeDecodeError of a file that is not text.
    except (GenError, ValueError, OSError) as err:
        said = "not UTF-8 text" if isinstance(err, UnicodeError) else str(err)
        return Result(
            "rank table",
            FAIL,
            f"{table.name}: {said.replace(f'{table}: ', '')}",
            "a table HCCL accepts",
            "gen ranktable check, then fix or regenerate it",
        )
    return Result("rank table", OK, f"{table.name}: {loaded.rank_size} ranks")


def image_base(subject: Subject) -> Result:
    from generator.engine import connect
    from generator.image.plan import default_tag

    name = "image base"
    assert subject.options is not None and subject.project_dir is not None
    tag = default_tag(subject.options, subject.target, subject.project_dir)
    try:
        image = connect(timeout_s=10).image(tag)
    except GenError:
        return Result(name, NA, "no engine to ask")
    if image is None:
        return Result(
            name, NA, f"{tag} is not built yet (gen image build --target {subject.target})"
        )
    base = image.labels.get("org.opencontainers.image.base.name", "")
    if base == subject.entry.base:
        return Result(name, OK, f"{tag} is built on {base}, the catalogue's")
    return Result(
        name,
        FAIL,
        f"{tag} is built on {base or 'an unrecorded base'}",
        f"{subject.entry.base} (the catalogue's {subject.entry.id})",
        f"gen image build --target {subject.target} again",
    )


def image_cpu(subject: Subject) -> Result:
    """The CPU the image is built for (before a build, the project's answer for it) against
    this host's: an aarch64 image stops on an x86_64 server with "exec format error"."""
    from generator.engine import connect
    from generator.image import arch as arches
    from generator.image.plan import default_tag

    name = "image CPU"
    assert subject.options is not None and subject.project_dir is not None
    if subject.root != "/":
        return Result(name, NA, "this host's CPU is not read from --root")
    tag = default_tag(subject.options, subject.target, subject.project_dir)
    try:
        image = connect(timeout_s=10).image(tag)
    except GenError:
        image = None
    if image is None:
        built, what = subject.options.image_arch(subject.target), "the project builds"
    else:
        built, what = arches.image_arch(image), f"{tag} is built"
    here = arches.host_arch()
    if built == here:
        return Result(name, OK, f"{what} for {built}, this host's CPU")
    return Result(
        name,
        FAIL,
        f"{what} for {built}; this host is {here}",
        f"an {here} image on this host",
        f"gen image build --target {subject.target} --arch {here}, or run it on {built} servers",
    )


def run(subject: Subject, *, with_engine: bool = True) -> list[Result]:
    results = engine_checks(subject) if with_engine else []
    if subject.target == "cuda":
        results += nvidia_checks(subject)
    else:
        chip = subject.options.chip if subject.options else catalog.model.DEFAULT_CHIP
        results += ascend_checks(subject, chip)
    return results + project_checks(subject)


def subject(
    project_dir: Path | None, options: Options | None, target: str | None, root: str
) -> Subject:
    """The target and catalogue entry to check: the project's, or --target's defaults."""
    if target is None:
        if options is None:
            raise GenError("outside a project, say which image: --target cuda or --target ascend")
        if options.target == "both":
            raise GenError("the project has two images: --target cuda or --target ascend")
        target = options.target
    framework = options.framework if options else "pytorch"
    chip = options.chip if options else None
    try:
        entry = catalog.load().default(target, framework, chip if target == "ascend" else None)
    except CatalogError as err:
        raise GenError(str(err)) from err
    return Subject(target, entry, options, project_dir, root)
