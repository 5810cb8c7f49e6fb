"""The generated README's "When the job fails": one part for the project's platform, one line per
Kubernetes kind the project fits, and each fault setting it names is the one `gen job render` and
`gen submit modelarts` really set."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from generator.jobs import manifests
from generator.jobs import spec as jobs
from generator.render.project import read_record
from generator.submit import modelarts
from tests.conftest import RenderProject

HEADING = "## When the job fails"
PLATFORM_PARTS = {
    "openi": "- **OpenI (启智).**",
    "modelarts": "- **ModelArts.**",
    "generic": "- **Your own nodes.**",
}
IMAGE = "registry.example.com/team/demo:0123abcdef01"
CASES = {
    "openi-pytorch-cuda": {"platform": "openi", "framework": "pytorch", "target": "cuda"},
    "modelarts-mindspore-910b": {
        "platform": "modelarts",
        "framework": "mindspore",
        "target": "ascend",
        "chip": "910b",
    },
    "generic-pytorch-both-910": {
        "platform": "generic",
        "framework": "pytorch",
        "target": "both",
        "chip": "910",
    },
}


def _section(project: Path) -> str:
    text = (project / "README.md").read_text(encoding="utf-8")
    assert text.count(HEADING) == 1
    return text.split(HEADING, 1)[1].split("\n## ", 1)[0]


def _kind_lines(section: str) -> dict[str, str]:
    """Each kind's item under the Kubernetes part, its continuation lines joined."""
    found: dict[str, str] = {}
    for item in re.split(r"\n  - ", section.split("- **Kubernetes**", 1)[1])[1:]:
        kind = re.match(r"`(\w+)`", item)
        assert kind, item
        found[kind.group(1)] = " ".join(item.split())
    return found


def _job(project: Path, kind: str, **asked: Any) -> list[dict[str, Any]]:
    record = read_record(project)
    target = "ascend" if kind in ("ascendjob", "volcano") and record.target != "cuda" else None
    request = jobs.JobRequest(kind=kind, image=IMAGE, output_pvc="runs", target=target, **asked)
    return manifests.documents(jobs.resolve(record, request, project))


@pytest.mark.parametrize("case", CASES)
def test_the_section_has_its_platforms_part_and_every_kind_the_project_fits(
    render_project: RenderProject, case: str
) -> None:
    options = CASES[case]
    project = render_project(nnodes=2, **options)
    section = _section(project)
    assert "{%" not in section and "{{" not in section
    flat = " ".join(section.split())
    # What restarts (the launcher, then the platform), what resumes, what to set.
    for words in (
        "`TRAIN_MAX_RESTARTS`",
        "`--max-restarts N`",
        "default 2",
        "Exit status 2 is a configuration error",
        "**What resumes.** The same command",
        "every `checkpoint_every` optimizer steps",
        "(SIGTERM) saves a checkpoint at the current step",
        "skipped with one WARNING",
        "One output directory holds one live run",
        "**What to set.**",
    ):
        assert words in flat, words
    for platform, part in PLATFORM_PARTS.items():
        assert (part in section) == (platform == options["platform"]), platform
    kinds = _kind_lines(section)
    assert list(kinds) == jobs.fitting_kinds(read_record(project))
    assert "without `--output-pvc`" in flat.lower()


def test_each_kind_is_said_to_do_what_its_manifest_does(render_project: RenderProject) -> None:
    project = render_project(
        nnodes=2, platform="generic", framework="pytorch", target="both", chip="910"
    )
    kinds = _kind_lines(_section(project))
    (volcano,) = [d for d in _job(project, "volcano") if d["kind"] == "Job"]
    policies = volcano["spec"]["policies"]
    assert policies[0] == {"exitCode": 2, "action": "AbortJob"}
    assert "`exitCode: 2` → `AbortJob`, listed first" in kinds["volcano"]
    assert f"`maxRetry: {volcano['spec']['maxRetry']}`" in kinds["volcano"]
    assert {p.get("event") for p in policies[1:]} == {"PodFailed", "PodEvicted"}
    assert volcano["metadata"]["labels"]["fault-scheduling"] == "grace"
    assert "`fault-scheduling: grace`" in kinds["volcano"]

    (pytorchjob,) = _job(project, "pytorchjob")
    master = pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]
    assert f"`restartPolicy: {master['restartPolicy']}`" in kinds["pytorchjob"]

    runtime, _ = _job(project, "trainjob", gang="volcano")
    restarts = runtime["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"]
    assert f"`failurePolicy.maxRestarts: {restarts}`" in kinds["trainjob"]

    # The chip decides MindCluster's unconditional retry: this project's 910 has none.
    (ascendjob,) = _job(project, "ascendjob")
    labels = ascendjob["metadata"]["labels"]
    assert "fault-retry-times" not in labels and "fault-retry-times" not in kinds["ascendjob"]
    assert f"`backoffLimit: {ascendjob['spec']['runPolicy']['backoffLimit']}`" in kinds["ascendjob"]
    a2 = render_project("a2", nnodes=2, platform="generic", framework="pytorch", target="ascend")
    (a2_job,) = _job(a2, "ascendjob")
    retries = a2_job["metadata"]["labels"]["fault-retry-times"]
    assert f'`fault-retry-times: "{retries}"`' in _kind_lines(_section(a2))["ascendjob"]


def test_the_modelarts_part_names_the_annotations_gen_submit_sets(
    render_project: RenderProject,
) -> None:
    project = render_project(platform="modelarts", target="ascend")
    part = " ".join(_section(project).split("- **ModelArts.**", 1)[1].split("- **")[0].split())
    assert f"`--max-retries N`, default {modelarts.DEFAULT_RETRIES}" in part
    for name in (
        modelarts.RETRIES_ANNOTATION,
        modelarts.HANG_ANNOTATION,
        modelarts.UNCONDITIONAL_ANNOTATION,
    ):
        assert f"`{name}`" in part, name
    assert "`--retry-any-failure`" in part
