"""Reading a classic-builder stream: the log, the failing step, the image it made."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import IO, Any

from generator.engine.sdk import RESTART, Sdk
from generator.engine.types import BuildContext, BuildSpec, ImageInfo, Lines
from generator.errors import BaseImageMissing, BuildFailed, EngineUnavailable

TAIL_LINES = 20


@dataclass
class _Log:
    """The build's log as it streams: written whole to a file, its tail kept for errors."""

    file: IO[str]
    on_line: Lines
    step: str = ""
    tail: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        for line in text.splitlines():
            self.file.write(line + "\n")
            if line.startswith("Step "):
                self.step = line
            if line.strip():
                self.tail.append(line)
                del self.tail[:-TAIL_LINES]
                self.on_line(line)

    def failed(self, message: str) -> BuildFailed:
        where = self.step or "the first step"
        return BuildFailed(
            f"build failed at {where}: {message}", self.step, self.tail, self.file.name
        )


def image_info(sdk: Sdk, ref: str) -> ImageInfo | None:
    """What the host knows of an image: size, user, labels, platform, parent."""
    attrs = sdk.inspect_image(ref)
    if attrs is None:
        return None
    config = attrs.get("Config") or {}
    return ImageInfo(
        attrs["Id"],
        int(attrs.get("Size") or 0),
        user=config.get("User") or "",
        labels=config.get("Labels") or {},
        architecture=str(attrs.get("Architecture") or "amd64"),
        parent=str(attrs.get("Parent") or ""),
    )


def build(
    sdk: Sdk, context: BuildContext, spec: BuildSpec, log: IO[str], on_line: Lines
) -> ImageInfo:
    """Build from a tar context with the classic builder, streaming each log line.

    Raises BaseImageMissing when FROM names an image that is not here (nothing is
    pulled), BuildFailed with the failing step and the log tail otherwise, and
    EngineUnavailable (with the step it was at) when the engine goes away.
    """
    record = _Log(log, on_line)
    stream = sdk.build(
        context.fileobj,
        dockerfile=context.dockerfile,
        tag=spec.tag,
        buildargs=spec.buildargs,
        nocache=spec.nocache,
        pull=False,
        network_mode=spec.network,
        labels=spec.labels or None,
        target=spec.target,
        platform=spec.platform,
    )
    image_id = None
    try:
        for chunk in stream:
            image_id = _read(chunk, record, spec.buildargs) or image_id
    except (EngineUnavailable, BuildFailed) as err:
        # A stopping engine kills the running step before it hangs up: a failed step
        # of an engine that takes no more requests is the engine's end, not the step's.
        if isinstance(err, BuildFailed) and sdk.ping():
            raise
        where = f", at {record.step}" if record.step else ""
        lost = EngineUnavailable(f"lost the Docker engine during the build{where}: {RESTART}")
        log.write(f"{lost}\n")
        raise lost from err
    built = image_info(sdk, image_id or spec.tag)
    if built is None:
        raise record.failed("the build ended without an image")
    return built


def _read(chunk: dict[str, Any], record: _Log, buildargs: dict[str, str]) -> str | None:
    """Log one chunk; return the image id it announces. An error chunk raises."""
    if "error" in chunk:
        message = " ".join(str(chunk["error"]).split())
        record.file.write(message + "\n")
        if re.match(r"Step \S+ : FROM ", record.step):
            base = _from_image(record.step, buildargs)
            raise BaseImageMissing(
                f"{base} is not on this host and cannot be pulled here: load it "
                "(docker load) or pass --base-image with a local image"
            )
        raise record.failed(message)
    record.add(str(chunk.get("stream", "")))
    aux = chunk.get("aux") or {}
    return aux.get("ID") if isinstance(aux, dict) else None


def _from_image(step: str, buildargs: dict[str, str]) -> str:
    """The image a FROM step names, with ${ARG} references filled in."""
    match = re.search(r"\bFROM\s+(\S+)", step, re.I)
    name = match.group(1) if match else "the base image"
    return re.sub(r"\$\{(\w+)\}", lambda m: buildargs.get(m.group(1), m.group(0)), name)
