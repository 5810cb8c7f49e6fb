"""What one `gen job render` renders: the request, its defaults from the project, the checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from generator.errors import ImageUnknown, KindDoesNotFit, OptionError
from generator.jobs import ascend, names
from generator.jobs.sweep import sweep_parallel
from generator.render.options import DEVICES_PER_NODE, EIGHT_ONLY_CHIPS, MAX_NODES, Options

KINDS = ("trainjob", "pytorchjob", "volcano", "ascendjob")
ACCELERATORS = ("cuda", "ascend")
# (framework, accelerator) pairs each kind runs. Trainer's torch-distributed runtime and
# the training-operator start torchrun on NVIDIA GPUs (PET_*, NCCL); MindCluster's
# AscendJob exists for Ascend NPUs (both frameworks); a Volcano Job only injects
# MASTER_ADDR/RANK/WORLD_SIZE, which the launcher maps onto torchrun or msrun anywhere.
FITS = {
    "trainjob": (("pytorch", "cuda"),),
    "pytorchjob": (("pytorch", "cuda"),),
    "volcano": tuple((fw, acc) for fw in ("pytorch", "mindspore") for acc in ACCELERATORS),
    "ascendjob": (("pytorch", "ascend"), ("mindspore", "ascend")),
}
WHY_NOT = {
    "trainjob": "Trainer's torch-distributed runtime runs PyTorch on NVIDIA GPUs only",
    "pytorchjob": "the training-operator's PyTorchJob runs PyTorch on NVIDIA GPUs only",
    "ascendjob": "MindCluster's AscendJob runs on Ascend NPUs only",
    "volcano": "a Volcano Job runs every framework and target",
}
PROJECT_ACCELERATORS = {"cuda": ("cuda",), "ascend": ("ascend",), "both": ACCELERATORS}
# Kubeflow Trainer releases a TrainJob can be rendered for: each has its own pod-override
# field (podSpecOverrides, podTemplateOverrides, runtimePatches); "2.2+" is 2.2 and later.
TRAINER_VERSIONS = ("2.0", "2.1", "2.2+")
# Trainer's gang plugins; the other kinds are gangs by themselves (see gen job render --help).
GANGS = ("volcano", "coscheduling")
# Devices a node may give one pod: Atlas A3 (910_93) servers and Atlas A2 Box16 (910b)
# servers hold 16 NPUs, an Atlas training server (910) 8 (generator/render/options.py, from
# generator/shipped/ranktable/rules.py CHIPS, with sources).
DEFAULT_JOIN_TIMEOUT = 600
CLAIM = "PersistentVolumeClaim"
MAX_JOIN_TIMEOUT = 86400


@dataclass(frozen=True)
class JobRequest:
    """What the user asked for; None means "the project's default"."""

    kind: str
    image: str | None = None
    nnodes: int | None = None
    devices_per_node: int | None = None
    name: str | None = None
    namespace: str | None = None
    queue: str | None = None
    data_pvc: str | None = None
    output_pvc: str | None = None
    join_timeout: int = DEFAULT_JOIN_TIMEOUT
    target: str | None = None
    chip: str | None = None
    trainer_version: str | None = None
    gang: str | None = None
    accelerator_type: str | None = None
    sp_block: int | None = None
    port: int | None = None
    sweep: bool = False
    parallel: int | None = None


@dataclass(frozen=True)
class JobSpec:
    """One validated job: everything the kind modules need, nothing left to default."""

    kind: str
    project: str
    framework: str
    accelerator: str
    name: str
    image: str
    nnodes: int
    devices_per_node: int
    namespace: str | None = None
    queue: str | None = None
    data_pvc: str | None = None
    output_pvc: str | None = None
    join_timeout: int = DEFAULT_JOIN_TIMEOUT
    chip: str = ""
    trainer_version: str = TRAINER_VERSIONS[-1]
    # A TrainJob's gang plugin ("volcano" or "coscheduling"); "" when it is not a gang.
    gang: str = ""
    # Ascend: the nodes' accelerator-type label ascend-for-volcano picks its handler by.
    accelerator_type: str = ""
    # A3 super pods: the job's sp-block annotation (NPUs per logical super pod); 0 when none.
    sp_block: int = 0
    # The launcher's rendezvous port: the job's own where pods share the host's network.
    port: int = ascend.POD_PORT
    # Ascend: the servers' CPU (aarch64 or x86_64), for the host-arch node selector.
    arch: str = ""
    # The job runs the project's sweep (sweep.py) on its one node, this many trials at a time;
    # 0 when it trains.
    sweep_parallel: int = 0

    @property
    def ascend(self) -> bool:
        return self.accelerator == "ascend"


def fitting_kinds(record: Options) -> list[str]:
    """The kinds a project generated with ``record`` can run on."""
    accelerators = PROJECT_ACCELERATORS[record.target]
    return [
        kind for kind in KINDS if any((record.framework, acc) in FITS[kind] for acc in accelerators)
    ]


def pick_accelerator(record: Options, kind: str, target: str | None) -> str:
    """The accelerator ``kind`` runs this project on, or why it cannot."""
    if kind not in KINDS:
        raise OptionError("--kind", f"{kind!r} is not a kind; choose one of {', '.join(KINDS)}")
    built = PROJECT_ACCELERATORS[record.target]
    if target is not None and target not in built:
        raise OptionError(
            "--target", f"{record.project} was built for {record.target} only; leave out --target"
        )
    candidates = [target] if target else list(built)
    fits = [acc for acc in candidates if (record.framework, acc) in FITS[kind]]
    if not fits:
        where = target or record.target
        raise KindDoesNotFit(
            f"--kind {kind} does not fit {record.project} ({record.framework} on {where}): "
            f"{WHY_NOT[kind]}; kinds that fit: {', '.join(fitting_kinds(record)) or 'none'}"
        )
    if len(fits) > 1:
        raise OptionError(
            "--target",
            f"{kind} runs on cuda or ascend and {record.project} is built for both; "
            "pass --target cuda or --target ascend",
        )
    return fits[0]


def _number(option: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise OptionError(option, f"{value} is out of range; use a number from {low} to {high}")
    return value


def _devices(value: int, chip: str) -> int:
    eight = chip in EIGHT_ONLY_CHIPS
    allowed = tuple(n for n in DEVICES_PER_NODE if n < 16 or not eight)
    if value not in allowed:
        where = " (16 only on --chip 910b or 910_93)" if eight else ""
        raise OptionError(
            "--devices-per-node",
            f"{value} is not allowed; choose one of {', '.join(map(str, allowed))}{where}",
        )
    return value


def _trainer_version(request: JobRequest) -> str:
    """The Trainer release a TrainJob is for (default the newest); other kinds take none."""
    version = request.trainer_version
    if version is None:
        return TRAINER_VERSIONS[-1]
    if request.kind != "trainjob":
        raise OptionError("--trainer-version", f"is for --kind trainjob, not {request.kind}")
    if version not in TRAINER_VERSIONS:
        raise OptionError(
            "--trainer-version", f"{version!r} is not one of {', '.join(TRAINER_VERSIONS)}"
        )
    return version


def pushed_image(project_dir: Path, accelerator: str) -> str | None:
    """The reference `gen image push --target ACCELERATOR` last recorded, if any."""
    path = project_dir / "logs" / f"image-{accelerator}.pushed"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ImageUnknown(f"{path}: unreadable ({err}); pass --image") from err
    reference = lines[0].strip() if lines else ""
    if not names.IMAGE_RE.fullmatch(reference):
        raise ImageUnknown(
            f"{path}: {reference!r} is not an image reference; "
            f"run gen image push --target {accelerator} again or pass --image"
        )
    return reference


def _image(request: JobRequest, project_dir: Path, accelerator: str) -> str:
    if request.image is not None:
        return names.check_image(request.image)
    image = pushed_image(project_dir, accelerator)
    if image is None:
        raise ImageUnknown(
            f"no image for {request.kind}: pass --image, or push one with "
            f"gen image push --target {accelerator} --registry HOST/NAMESPACE "
            f"(it records logs/image-{accelerator}.pushed)"
        )
    return image


# MindCluster's ring-controller.atlas label by chip; its A3 jobs carry the A2 label.
RING_LABELS = {"910": "910", "910b": "910b", "910_93": "910b"}
# The accelerator-type node label of each chip's training servers, as MindCluster's install
# guide labels them (Atlas 800 = module, 800T A2 = module-910b-8, 900 A3 SuperPoD =
# module-a3-16-super-pod). Without one, ascend-for-volcano takes the 910 handler, which
# refuses nodes of more than 8 NPUs. The values its handlers know (util/constants.go):
ACCELERATOR_TYPES = {"910": "module", "910b": "module-910b-8", "910_93": "module-a3-16-super-pod"}
KNOWN_ACCELERATOR_TYPES = (
    "module",
    "half",
    "card",
    "module-910b-8",
    "module-910b-16",
    "module-a3-16",
    "module-a3-16-super-pod",
    "module-a3-8-super-pod",
)


def accelerator_type(chip: str, given: str | None, devices: int = 8) -> str:
    """The node label value for ``chip``'s servers (an A2 pod of 16: Box16's), or the one
    given (a known value)."""
    if given is None:
        return "module-910b-16" if (chip, devices) == ("910b", 16) else ACCELERATOR_TYPES[chip]
    if given not in KNOWN_ACCELERATOR_TYPES and not given.startswith("card"):
        raise OptionError(
            "--accelerator-type",
            f"{given!r} is not a value ascend-for-volcano knows; choose one of "
            f"{', '.join(KNOWN_ACCELERATOR_TYPES)} (or card-*)",
        )
    return given


def ascend_chip(project_chip: str, chip: str | None) -> str:
    """``chip`` (910, 910b or 910_93), else the one the project was generated for."""
    if chip is None:
        return project_chip
    if chip not in RING_LABELS:
        raise OptionError(
            "--chip", f"{chip!r} is not a chip; choose one of {', '.join(RING_LABELS)}"
        )
    return chip


def _gang(request: JobRequest, version: str) -> str:
    """A TrainJob's gang plugin: --gang's, else Volcano's for a --queue, else none."""
    gang = request.gang
    if request.kind != "trainjob":
        if gang is not None:
            raise OptionError(
                "--gang", f"is for --kind trainjob; {request.kind} jobs are gangs already"
            )
        return ""
    if gang is not None and gang not in GANGS:
        raise OptionError("--gang", f"{gang!r} is not one of {', '.join(GANGS)}")
    if gang is None:
        gang = "volcano" if request.queue is not None else ""
    if gang == "coscheduling" and request.queue is not None:
        raise OptionError("--queue", "names a Volcano queue; --gang coscheduling has none")
    if gang == "volcano" and version == "2.0":
        option = "--gang" if request.gang else "--queue"
        raise OptionError(
            option,
            "needs Trainer's Volcano plugin, which came in v2.1: pass --trainer-version 2.1 "
            "or later, or --gang coscheduling",
        )
    return gang


def resolve(record: Options, request: JobRequest, project_dir: Path) -> JobSpec:
    """Fill ``request``'s gaps from the project and check every value.

    Raises OptionError (a value breaks a rule), KindDoesNotFit or ImageUnknown;
    the kind, numbers and names are checked before the image is looked for.
    """
    accelerator = pick_accelerator(record, request.kind, request.target)
    # A sweep's trials share one node's devices (sweep.py divides them): one node by default.
    nnodes = (1 if request.sweep else record.nnodes) if request.nnodes is None else request.nnodes
    devices = (
        record.devices_per_node if request.devices_per_node is None else request.devices_per_node
    )
    nnodes = _number("--nnodes", nnodes, 1, MAX_NODES)
    chip = ascend_chip(record.chip, request.chip) if accelerator == "ascend" else ""
    if request.accelerator_type is not None and not chip:
        raise OptionError("--accelerator-type", "labels Ascend nodes; this job runs on cuda")
    devices = _devices(devices, chip)
    parallel = sweep_parallel(request.sweep, request.parallel, nnodes, devices)
    node_type = accelerator_type(chip, request.accelerator_type, devices) if chip else ""
    name = _job_name(record, request, accelerator, nnodes)
    # Keyword arguments run in order: the image, which may read a file, comes last.
    return JobSpec(
        kind=request.kind,
        project=record.project,
        framework=record.framework,
        accelerator=accelerator,
        name=name,
        nnodes=nnodes,
        devices_per_node=devices,
        namespace=_optional(request.namespace, names.check_namespace),
        queue=_optional(request.queue, names.check_subdomain, "--queue", "queue"),
        data_pvc=_optional(request.data_pvc, names.check_subdomain, "--data-pvc", CLAIM),
        output_pvc=_optional(request.output_pvc, names.check_subdomain, "--output-pvc", CLAIM),
        join_timeout=_number("--join-timeout", request.join_timeout, 1, MAX_JOIN_TIMEOUT),
        chip=chip,
        accelerator_type=node_type,
        sp_block=ascend.sp_block(node_type, nnodes, devices, request.sp_block),
        # Ascend pods run on the host's network (pod.placement).
        port=ascend.port(request.port, bool(chip), name, request.namespace),
        arch=record.image_arch("ascend") if chip else "",
        trainer_version=_trainer_version(request),
        gang=_gang(request, _trainer_version(request)),
        sweep_parallel=parallel,
        image=_image(request, project_dir, accelerator),
    )


def _job_name(record: Options, request: JobRequest, accelerator: str, nnodes: int) -> str:
    if request.name is None:
        option, name = "--name (default: the project name)", names.default_name(record.project)
    else:
        option, name = "--name", request.name
    names.check_job_name(name, option)
    derived = derived_names(request.kind, name, nnodes, record.framework, accelerator)
    names.check_derived(name, derived, request.kind, option)
    return name


def _optional(value: str | None, check: Callable[..., str], *args: str) -> str | None:
    """None when not given; anything given, even "", must pass ``check``."""
    return None if value is None else check(value, *args)


def derived_names(kind: str, name: str, nnodes: int, framework: str, accelerator: str) -> list[str]:
    """Names the operators make from the job name: pod hostnames, Services, ConfigMaps."""
    if kind == "trainjob":
        # JobSet pods: <jobset>-<replicated job>-<job index>-<pod index>.
        return [f"{name}-node-0-{nnodes - 1}"]
    leader = "scheduler" if kind == "ascendjob" and framework == "mindspore" else "master"
    found = [f"{name}-{leader}-0"]
    if nnodes > 1:
        found.append(f"{name}-worker-{nnodes - 2}")
    if kind == "volcano" and accelerator == "ascend":
        found.append(f"rings-config-{name}")
    return found
