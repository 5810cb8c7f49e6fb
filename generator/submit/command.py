"""`gen submit`: a project's training job, created through the platform's own API.

ModelArts only: OpenI's package cannot create tasks, so OpenI stays the README's steps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from generator.errors import ImageUnknown, OptionError, SubmitError
from generator.jobs import names
from generator.jobs.spec import pushed_image
from generator.render.project import read_record
from generator.submit.modelarts import DEFAULT_RETRIES, MAX_RETRIES, JobSpec

# ModelArts' rule for metadata.name.
JOB_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
RECORD = "logs/modelarts-jobs.jsonl"


def job_spec(
    project_dir: Path,
    *,
    flavor: str,
    target: str | None = None,
    image: str | None = None,
    name: str | None = None,
    nodes: int | None = None,
    data_obs: str | None = None,
    output_obs: str | None = None,
    pool_id: str | None = None,
    parameters: Mapping[str, str] | None = None,
    environment: Mapping[str, str] | None = None,
    retries: int = DEFAULT_RETRIES,
    retry_any_failure: bool = False,
) -> JobSpec:
    """The job for ``project_dir``: its answers, its pushed image, and the flags."""
    options = read_record(project_dir)
    if options.platform != "modelarts":
        raise OptionError(
            "platform",
            f"this project was made for {options.platform}, whose jobs read other paths and "
            "variables; gen update --set platform=modelarts makes it a ModelArts project",
        )
    if options.target == "both" and target is None:
        raise OptionError("--target", "the project has two images: choose ascend or cuda")
    accelerator = target or options.target
    if image is None:
        image = pushed_image(project_dir, accelerator)
        if image is None:
            raise ImageUnknown(
                f"no image to run: gen image push --target {accelerator} --registry "
                "swr.<region>.myhuaweicloud.com/<organization> (it records "
                f"logs/image-{accelerator}.pushed), or pass --image"
            )
    else:
        image = names.check_image(image)
    job_name = name or options.project
    if not JOB_NAME_RE.fullmatch(job_name):
        raise OptionError("--name", f"{job_name!r}: use 1-64 letters, digits, '_' or '-'")
    if not flavor.strip():
        raise OptionError("--flavor", "give a flavor id (gen submit flavors lists them)")
    _check_retries(retries, retry_any_failure)
    return JobSpec(
        name=job_name,
        image=image,
        flavor=flavor,
        nodes=nodes or options.nnodes,
        data_obs=data_obs,
        output_obs=output_obs,
        pool_id=pool_id,
        description=f"train-template project {options.project} ({options.framework})",
        parameters=dict(parameters or {}),
        environment=dict(environment or {}),
        retries=retries,
        retry_any_failure=retry_any_failure,
    )


def _check_retries(retries: int, retry_any_failure: bool) -> None:
    """ModelArts takes 1-128 restarts (0 here: auto restart off); any failure needs some."""
    if not 0 <= retries <= MAX_RETRIES:
        raise OptionError(
            "--max-retries", f"{retries} is out of range; use 0 (none) to {MAX_RETRIES}"
        )
    if retry_any_failure and not retries:
        raise OptionError("--retry-any-failure", "needs restarts: leave out --max-retries 0")


def record(project_dir: Path, reply: Mapping[str, Any]) -> str:
    """Append the created job to logs/modelarts-jobs.jsonl; its id."""
    metadata = reply.get("metadata") or {}
    job_id = str(metadata.get("id") or "")
    if not job_id:
        raise SubmitError("ModelArts answered without a job id: see the console")
    path = project_dir / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"id": job_id, "name": metadata.get("name"), "phase": _phase(reply)}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
    return job_id


def _phase(reply: Mapping[str, Any]) -> str:
    status = reply.get("status") or {}
    return str(status.get("phase") or "?")


def describe(reply: Mapping[str, Any]) -> list[str]:
    """A job's state in a few lines."""
    status = reply.get("status") or {}
    metadata = reply.get("metadata") or {}
    lines = [f"{metadata.get('name', '?')} ({metadata.get('id', '?')}): {_phase(reply)}"]
    if status.get("secondary_phase"):
        lines[0] += f" / {status['secondary_phase']}"
    if status.get("duration"):
        lines.append(f"duration: {int(status['duration']) // 1000} s")
    if status.get("tasks"):
        lines.append(f"tasks: {', '.join(map(str, status['tasks']))} (gen submit logs ID --task T)")
    return lines
