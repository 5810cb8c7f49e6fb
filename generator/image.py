"""Plan an image build for a generated project: Dockerfile, tag, build args, context extras."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from generator import catalog
from generator.errors import GenError, OptionError
from generator.git import origin_url, public_url, revision
from generator.options import Options
from generator.project import read_record

TARGETS_OF = {"cuda": ("cuda",), "ascend": ("ascend",), "both": ("cuda", "ascend")}


@dataclass(frozen=True)
class BuildPlan:
    """Everything one `gen image build` does, decided before the engine is touched."""

    project_dir: Path
    options: Options
    target: str
    dockerfile: str
    tag: str
    buildargs: dict[str, str]
    nocache: bool = False
    network: str | None = None
    extra: dict[str, Path] = field(default_factory=dict)

    @property
    def wheelhouse(self) -> Path | None:
        """Local wheels joining the build context, if any."""
        return self.extra.get("wheelhouse")

    @property
    def log_path(self) -> Path:
        return self.project_dir / "logs" / f"image-{self.target}.log"


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


def dockerfile_args(text: str) -> set[str]:
    """The ARG names a Dockerfile declares."""
    return set(re.findall(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)", text, re.M))


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


def catalog_args(options: Options, target: str, entry_id: str, version: str | None) -> dict:
    """BASE_IMAGE and FRAMEWORK from another catalogue entry or framework version."""
    entry = catalog.load().resolve(
        target, options.framework, framework_version=version, entry_id=entry_id or None
    )
    pin = entry.pin(options.framework)
    args = {"BASE_IMAGE": entry.base}
    if isinstance(pin, catalog.PytorchPin):
        args["FRAMEWORK"] = f"torch=={pin.torch}"
        args["PIP_EXTRA_INDEX_URL"] = pin.index_url
        if pin.torch_npu:
            args["NPU_EXTRA"] = f"torch_npu=={pin.torch_npu}"
    elif pin is not None:
        args["FRAMEWORK"] = f"{pin.package}=={pin.version}"
    return args


def plan_build(
    project_dir: Path,
    target: str,
    *,
    base_image: str | None = None,
    tag: str | None = None,
    pip_index_url: str | None = None,
    wheelhouse: Path | None = None,
    build_args: Sequence[str] = (),
    catalog_entry: str | None = None,
    framework_version: str | None = None,
    nocache: bool = False,
    network: str | None = None,
) -> BuildPlan:
    """Decide the build; raises GenError subclasses for anything the user must fix."""
    project_dir = project_dir.resolve()
    options = read_record(project_dir)
    check_target(options, target)
    dockerfile = f"Dockerfile.{target}"
    path = project_dir / dockerfile
    if not path.is_file():
        raise GenError(f"{path} is missing; regenerate the project or restore it from git")
    known = dockerfile_args(path.read_text(encoding="utf-8"))
    args: dict[str, str] = {"REVISION": revision(project_dir) or "unknown"}
    remote = origin_url(project_dir)
    if remote:
        args["SOURCE"] = public_url(remote)
    if catalog_entry or framework_version:
        args.update(catalog_args(options, target, catalog_entry or "", framework_version))
    if base_image:
        args["BASE_IMAGE"] = base_image
    if pip_index_url:
        args["PIP_INDEX_URL"] = pip_index_url
    extra: dict[str, Path] = {}
    if wheelhouse is not None:
        if not wheelhouse.is_dir():
            raise OptionError("--wheelhouse", f"{wheelhouse} is not a directory of wheels")
        extra["wheelhouse"] = wheelhouse.resolve()
        # A wheelhouse is for hosts without an index: never reach for one.
        args["PIP_NO_INDEX"] = "1"
    args.update(parse_build_args(build_args, known))
    return BuildPlan(
        project_dir=project_dir,
        options=options,
        target=target,
        dockerfile=dockerfile,
        tag=tag or default_tag(options, target, project_dir),
        buildargs={k: v for k, v in args.items() if k in known},
        nocache=nocache,
        network=network,
        extra=extra,
    )


REGISTRY_USER_ENV = "GEN_REGISTRY_USER"
REGISTRY_PASSWORD_ENV = "GEN_REGISTRY_PASSWORD"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REGISTRY = re.compile(
    rf"(?P<host>{_LABEL}(?:\.{_LABEL})*)(?::(?P<port>\d{{1,5}}))?"
    rf"/(?P<namespace>{_COMPONENT}(?:/{_COMPONENT})*)"
)


def registry_target(options: Options, registry: str, local_tag: str) -> tuple[str, str]:
    """``(HOST[:PORT]/NAMESPACE/<project>, <tag part of local_tag>)`` for --registry."""
    example = "e.g. swr.cn-north-4.myhuaweicloud.com/myteam or 127.0.0.1:5000/team"
    why = None
    match = REGISTRY.fullmatch(registry)
    if "://" in registry:
        why = "leave out the scheme"
    elif "@" in registry:
        why = f"leave out the user; the login comes from ${REGISTRY_USER_ENV} or docker login"
    elif match is None:
        why = "a host, an optional port and a lowercase namespace"
    elif not (match["port"] or "." in match["host"] or match["host"] == "localhost"):
        # Without a dot or a port, docker reads the host as a Docker Hub namespace.
        why = f"{match['host']} is not a registry host (it needs a dot or a port)"
    if why:
        raise OptionError(
            "--registry", f"{registry!r} is not HOST[:PORT]/NAMESPACE ({example}): {why}"
        )
    name, _, tag = local_tag.rpartition(":")
    if "/" in tag or not name:
        tag = "latest"
    return f"{registry}/{options.project.lower()}", tag


def registry_auth(environ: Mapping[str, str] = os.environ) -> dict[str, str] | None:
    """The login from $GEN_REGISTRY_USER and $GEN_REGISTRY_PASSWORD; None: docker login's."""
    user, password = environ.get(REGISTRY_USER_ENV), environ.get(REGISTRY_PASSWORD_ENV)
    if not user and not password:
        return None
    if not (user and password):
        raise GenError(
            f"set both {REGISTRY_USER_ENV} and {REGISTRY_PASSWORD_ENV}, or neither to use "
            "the login docker login stored"
        )
    return {"username": user, "password": password}
