"""`gen image build` as a library call: the dependency image, built once per dependency
key and reused after, then the code image FROM it with a context of the code alone.

The dependency key hashes what the dependency image is made of: the base image's id,
the dependency part of the Dockerfile (comments aside), its build arguments (the
framework pin, the Python), the requirements and the digest of each wheel it needs.
A code edit changes none of these: it rebuilds the code layers only and sends
kilobytes; the wheels travel only when the key is new.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from generator import engine as engines
from generator.cache import JsonCache
from generator.engine import BuildSpec, Engine, ImageInfo, LayerProgress, Lines
from generator.errors import (
    BaseImageMissing,
    EngineUnavailable,
    GenError,
    PushFailed,
    WheelhouseMismatch,
)
from generator.image import arch as arches
from generator.image import python as pythons
from generator.image.context import code_files, deps_files, pack
from generator.image.dockerfile import normalized
from generator.image.plan import BuildPlan, BuildRequest, plan_build
from generator.image.wheels import Selection, WheelFacts, requirement_lines, select

DEPS_REPOSITORY = "train-template/deps"
KEY_LABEL = "io.train-template.deps-key"
KEY_FORMAT = 2


@dataclass(frozen=True)
class DepsStep:
    """The dependency image: its key and name, what went into it, and whether it was
    reused. ``key`` is None on a dry run that could not ask the engine (``unknown`` says why)."""

    dockerfile: str
    buildargs: dict[str, str]
    key: str | None = None
    python: pythons.Interpreter | None = None
    wheels: Selection = Selection(())
    unknown: str = ""
    reused: bool = False
    context_bytes: int = 0
    seconds: float = 0.0

    @property
    def ref(self) -> str | None:
        return f"{DEPS_REPOSITORY}:{self.key[:16]}" if self.key else None


@dataclass(frozen=True)
class BuildReport:
    """What one `gen image build` did (or, on a dry run, would do)."""

    plan: BuildPlan
    deps: DepsStep
    code_dockerfile: str
    code_args: dict[str, str]
    image: ImageInfo | None = None
    context_bytes: int = 0
    seconds: float = 0.0


def dependency_key(
    base_id: str,
    dockerfile: str,
    buildargs: dict[str, str],
    requirements: str,
    wheels: list[tuple[str, str]],
    arch: str = "x86_64",
) -> str:
    """The sha256 naming a dependency image: equal inputs, equal image."""
    lines = requirement_lines(requirements)
    document = {
        "format": KEY_FORMAT,
        "base": base_id,
        "dockerfile": normalized(dockerfile),
        "args": sorted(buildargs.items()),
        "requirements": lines if lines is not None else requirements,
        "wheels": sorted(wheels),
        "arch": arch,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def build_image(
    request: BuildRequest, *, on_line: Lines, connect: Callable[[], Engine] = engines.connect
) -> BuildReport:
    """Plan the build, then build (or reuse) the dependency image and build the code image.

    A dry run builds nothing: it reports both steps and the dependency key (when an
    engine answers and has the base image). Raises GenError subclasses only.
    """
    plan = plan_build(request)
    if request.dry_run:
        return _dry_run(plan, connect)
    engine = connect()
    start = time.monotonic()
    # Everything that can stop the build stops it here, before a log or a layer exists.
    emulator = arches.check_emulation(plan.arch, str(engine.info().get("Architecture", "")))
    base = engine.image(plan.base) or _pull_base(engine, plan, on_line)
    arches.check_base(base, plan.base, plan.arch)
    if emulator:
        on_line(f"building for {plan.arch} on a {arches.host_arch()} host, by {emulator}")
    deps = _resolve(engine, plan, base)
    with _log(plan.log_path) as log:
        deps = _deps_image(engine, plan, deps, log, on_line)
        assert deps.ref is not None
        code = plan.split.code(deps.ref)
        context = pack(code, code_files(plan.project_dir))
        log.write(f"# code image {plan.tag}, FROM {deps.ref}\n")
        spec = BuildSpec(
            plan.tag,
            plan.code_args(),
            plan.nocache,
            plan.network,
            labels={arches.LABEL: plan.arch},
            platform=arches.docker_platform(plan.arch),
        )
        with context.fileobj:
            built = engine.build(context, spec, log, on_line)
    seconds = time.monotonic() - start
    return BuildReport(plan, deps, code, plan.code_args(), built, context.size, seconds)


@contextmanager
def _log(path: Path) -> Iterator[IO[str]]:
    """The build log, line-buffered so that it can be followed (tail -f) during the build."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = path.open("w", encoding="utf-8", buffering=1)
    except OSError as err:
        raise GenError(f"cannot write the build log {path}: {err.strerror}") from err
    with log:
        yield log


def _dry_run(plan: BuildPlan, connect: Callable[[], Engine]) -> BuildReport:
    deps = DepsStep(plan.split.deps, plan.deps_args(plan.python), python=plan.python)
    try:
        engine = connect()
        base = engine.image(plan.base)
        if base is None:
            deps = replace(deps, unknown=f"{plan.base} is not on this host (a build pulls it)")
        else:
            deps = _resolve(engine, plan, base)
    except EngineUnavailable as err:
        deps = replace(deps, unknown=f"it hashes the base image's id, and {err}")
    code = plan.split.code(deps.ref or "<dependency image>")
    return BuildReport(plan, deps, code, plan.code_args())


def _pull_base(engine: Engine, plan: BuildPlan, on_line: Lines) -> ImageInfo:
    """Pull the base image (for the plan's CPU) the host lacks; BaseImageMissing when it
    cannot be had."""
    base = plan.base

    def show(event: LayerProgress) -> None:
        if event.status.startswith(("Pull complete", "Already exists", "Digest", "Status")):
            on_line(f"{event.layer}: {event.status}")

    try:
        engine.pull(base, auth=None, on_progress=show, platform=arches.docker_platform(plan.arch))
    except PushFailed as err:
        raise BaseImageMissing(
            f"{base} is not on this host and cannot be pulled here ({err}): load it "
            "(docker load) or pass --base-image with a local image"
        ) from err
    return engine.require_image(base, "the pull ended without it")


def _resolve(engine: Engine, plan: BuildPlan, base: ImageInfo) -> DepsStep:
    """The dependency image's inputs and key: the Python, the wheels, the arguments."""
    python = plan.python
    if python is None:
        command = plan.args["PYTHON"] if "PYTHON" in plan.given else "python3"
        probes = JsonCache("python")
        python = pythons.in_base(engine, base, plan.base, command, probes)
        probes.save()
    pythons.check_pin(python, plan.pin, plan.base)
    facts = WheelFacts(JsonCache("wheels"))
    wheels = Selection(())
    if plan.wheelhouse is not None:
        wanted = requirement_lines(plan.requirements)
        extra = " ".join(plan.args.get(k, "") for k in ("FRAMEWORK", "NPU_EXTRA")).split()
        wheels = select(
            plan.wheelhouse,
            None if wanted is None else [*extra, *wanted],
            python=python.version,
            machine=plan.arch,
            facts=facts,
        )
        if wheels.foreign:
            raise WheelhouseMismatch(f"{plan.wheelhouse}: {wheels.foreign[0]}")
    args = plan.deps_args(python)
    key = dependency_key(
        base.id,
        plan.split.deps,
        args,
        plan.requirements,
        [(path.name, facts.digest(path)) for path in wheels.files],
        plan.arch,
    )
    if facts.cache is not None:
        facts.cache.save()
    return DepsStep(plan.split.deps, args, key, python, wheels)


def _deps_image(
    engine: Engine, plan: BuildPlan, deps: DepsStep, log: IO[str], on_line: Lines
) -> DepsStep:
    """Reuse the dependency image its key names, or build it (sending only what it needs)."""
    assert deps.key is not None and deps.ref is not None
    found = engine.image(deps.ref)
    if found is not None and found.labels.get(KEY_LABEL) == deps.key and not plan.nocache:
        log.write(f"# dependency image {deps.ref}: reused (key {deps.key})\n")
        return replace(deps, reused=True)
    start = time.monotonic()
    context = pack(deps.dockerfile, deps_files(plan.requirements, deps.wheels.files))
    log.write(f"# dependency image {deps.ref} (key {deps.key})\n")
    spec = BuildSpec(
        deps.ref,
        deps.buildargs,
        plan.nocache,
        plan.network,
        labels={KEY_LABEL: deps.key, arches.LABEL: plan.arch},
        target=plan.split.runtime_stage,
        platform=arches.docker_platform(plan.arch),
    )
    with context.fileobj:
        engine.build(context, spec, log, on_line)
    return replace(deps, context_bytes=context.size, seconds=time.monotonic() - start)
