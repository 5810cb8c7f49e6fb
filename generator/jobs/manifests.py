"""The documents of one job, by kind, and their YAML."""

from __future__ import annotations

from collections.abc import Callable

from generator.jobs import ascendjob, pytorchjob, trainjob, volcano
from generator.jobs.pod import Doc
from generator.jobs.spec import JobSpec
from generator.jobs.yamlout import dump

BUILDERS: dict[str, Callable[[JobSpec], list[Doc]]] = {
    "trainjob": trainjob.documents,
    "pytorchjob": pytorchjob.documents,
    "volcano": volcano.documents,
    "ascendjob": ascendjob.documents,
}
UNITS = {"cuda": "GPUs", "ascend": "NPUs"}


def documents(spec: JobSpec) -> list[Doc]:
    """The manifests for ``spec``, in the order kubectl should apply them."""
    return BUILDERS[spec.kind](spec)


def render(spec: JobSpec) -> str:
    """Multi-document YAML for ``spec``, with a comment saying what it runs."""
    header = (
        f"gen job render --kind {spec.kind}: {spec.project} ({spec.framework}) on "
        f"{spec.nnodes} node(s) x {spec.devices_per_node} {UNITS[spec.accelerator]}"
    )
    return dump(documents(spec), header)
