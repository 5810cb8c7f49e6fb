"""Plan an image build before the engine is touched: which Dockerfile and how it splits,
which build arguments each part gets, the tag, the requirements and the wheelhouse."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from generator import catalog
from generator.errors import GenError, OptionError
from generator.git import origin_url, public_url, revision
from generator.image.dockerfile import Split, arg_defaults, split
from generator.image.python import Interpreter, PinPythons, named
from generator.image.requirements import image_requirements
from generator.render.options import Options
from generator.render.project import read_record

TARGETS_OF = {"cuda": ("cuda",), "ascend": ("ascend",), "both": ("cuda", "ascend")}


@dataclass(frozen=True)
class BuildRequest:
    """What `gen image build` was asked for, as the command line says it."""

    project_dir: Path
    target: str
    base_image: str | None = None
    tag: str | None = None
    pip_index_url: str | None = None
    wheelhouse: Path | None = None
    build_args: Sequence[str] = ()
    catalog_entry: str | None = None
    framework_version: str | None = None
    nocache: bool = False
    network: str | None = None
    dry_run: bool = False
    arch: str | None = None  # the servers' CPU; None: the project's answer for the target


@dataclass(frozen=True)
class BuildPlan:
    """Everything one build does that can be decided without an engine."""

    project_dir: Path
    target: str
    dockerfile: str
    split: Split
    tag: str
    args: dict[str, str]  # every ARG with a value: the Dockerfile's defaults, then what was asked
    given: frozenset[str]  # the ARGs named on the command line
    wheelhouse: Path | None
    python: Interpreter | None  # known without asking the base (catalogue, --build-arg)
    pin: PinPythons | None
    nocache: bool = False
    network: str | None = None
    arch: str = "x86_64"  # the CPU of the servers the image runs on (aarch64, x86_64)

    @property
    def base(self) -> str:
        return self.args["BASE_IMAGE"]

    @property
    def requirements(self) -> str:
        """What the dependency image installs: requirements.txt and the extras config.yaml
        calls for (requirements.py)."""
        return image_requirements(self.project_dir)

    @property
    def log_path(self) -> Path:
        return self.project_dir / "logs" / f"image-{self.target}.log"

    def deps_args(self, python: Interpreter | None) -> dict[str, str]:
        """The dependency part's build arguments, with the interpreter found for the base."""
        args = {**self.args, **({"PYTHON": python.command} if python else {})}
        return {k: v for k, v in args.items() if k in arg_defaults(self.split.deps)}

    def code_args(self) -> dict[str, str]:
        """The last stage's build arguments: those it declares itself."""
        known = arg_defaults(self.split.body)
        return {k: v for k, v in self.args.items() if k in known}


def check_target(options: Options, target: str) -> None:
    """Refuse a target the project has no Dockerfile for."""
    if target not in TARGETS_OF[options.target]:
        raise OptionError(
            "--target",
            f"{options.project} was generated for {options.target} only; "
            f"choose {' or '.join(TARGETS_OF[options.target])}",
        )


def default_tag(options: Options, target: str, project_dir: Path) -> str:
    """``<project>:<target>-<commit>`` (``-local`` outside git): rebuilt per commit."""
    return f"{options.project.lower()}:{target}-{revision(project_dir) or 'local'}"


def parse_build_args(pairs: Sequence[str], known: set[str]) -> dict[str, str]:
    """--build-arg K=V pairs, each K one the Dockerfile declares."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise OptionError("--build-arg", f"{pair!r} is not KEY=VALUE")
        if key not in known:
            raise OptionError(
                "--build-arg", f"the Dockerfile has no ARG {key}; it has {', '.join(sorted(known))}"
            )
        values[key] = value
    return values


def framework_args(entry: catalog.Entry, framework: str) -> dict[str, str]:
    """The build arguments that pin ``framework`` as catalogue ``entry`` does."""
    pin = entry.pin(framework)
    args = {"BASE_IMAGE": entry.base}
    if isinstance(pin, catalog.PytorchPin):
        args["FRAMEWORK"] = f"torch=={pin.torch}"
        args["PIP_EXTRA_INDEX_URL"] = pin.index_url
        if pin.torch_npu:
            args["NPU_EXTRA"] = f"torch_npu=={pin.torch_npu}"
    elif pin is not None:
        args["FRAMEWORK"] = f"{pin.package}=={pin.version}"
    return args


def plan_build(request: BuildRequest) -> BuildPlan:
    """Decide the build; raises GenError subclasses for anything the user must fix."""
    project_dir = request.project_dir.resolve()
    options = read_record(project_dir)
    check_target(options, request.target)
    name = f"Dockerfile.{request.target}"
    path = project_dir / name
    if not path.is_file():
        raise GenError(f"{path} is missing; regenerate the project or restore it from git")
    if not (project_dir / "requirements.txt").is_file():
        raise GenError(f"{project_dir / 'requirements.txt'} is missing; the image installs it")
    text = path.read_text(encoding="utf-8")
    defaults = arg_defaults(text)
    args = {k: v for k, v in defaults.items() if v is not None}
    args["REVISION"] = revision(project_dir) or "unknown"
    remote = origin_url(project_dir)
    if remote:
        args["SOURCE"] = public_url(remote)
    cat = catalog.load()
    entry = cat.resolve(
        request.target,
        options.framework,
        framework_version=request.framework_version,
        entry_id=request.catalog_entry,
        chip=options.chip,
    )
    if request.catalog_entry or request.framework_version:
        args.update(framework_args(entry, options.framework))
    asked = {"BASE_IMAGE": request.base_image, "PIP_INDEX_URL": request.pip_index_url}
    if request.wheelhouse is not None:
        if not request.wheelhouse.is_dir():
            raise OptionError("--wheelhouse", f"{request.wheelhouse} is not a directory of wheels")
        # A wheelhouse is for hosts without an index: never reach for one.
        asked["PIP_NO_INDEX"] = "1"
    args.update({k: v for k, v in asked.items() if v})
    given = parse_build_args(request.build_args, set(defaults))
    args.update(given)
    args = {k: v for k, v in args.items() if k in defaults}
    return BuildPlan(
        project_dir=project_dir,
        target=request.target,
        dockerfile=name,
        split=split(name, text),
        tag=request.tag or default_tag(options, request.target, project_dir),
        args=args,
        given=frozenset(given),
        wheelhouse=_wheelhouse(request.wheelhouse, project_dir),
        python=_known_python(args, given, cat),
        pin=_pin(entry, options.framework, args, given),
        nocache=request.nocache,
        network=request.network,
        arch=request.arch or options.image_arch(request.target),
    )


def _wheelhouse(given: Path | None, project_dir: Path) -> Path | None:
    """--wheelhouse, else the project's own wheelhouse/ (what a plain docker build uses)."""
    if given is not None:
        return given.resolve()
    local = project_dir / "wheelhouse"
    return local if local.is_dir() else None


def _known_python(
    args: dict[str, str], given: dict[str, str], cat: catalog.Catalog
) -> Interpreter | None:
    """The interpreter known without the engine: named on the command line, or the
    catalogue's for a catalogued base; None: ask the base."""
    if "PYTHON" in given:
        return named(given["PYTHON"], "--build-arg PYTHON")
    for entry in cat.entries.values():
        if entry.base == args.get("BASE_IMAGE"):
            return Interpreter(f"python{entry.python}", entry.python, f"catalogue entry {entry.id}")
    return None


def _pin(
    entry: catalog.Entry, framework: str, args: dict[str, str], given: dict[str, str]
) -> PinPythons | None:
    """The Pythons the FRAMEWORK pin has wheels for, when it is the catalogue's pin."""
    pin = entry.pin(framework)
    if pin is None or "FRAMEWORK" in given:
        return None
    if framework_args(entry, framework).get("FRAMEWORK") != args.get("FRAMEWORK"):
        return None  # the Dockerfile pins something the catalogue no longer says
    return PinPythons(f"{catalog.LABELS[framework]} {pin.version}", pin.pythons)
