"""The offline API-server check (tests/k8s_schema.py) refuses what a server would: each case
breaks one rule in a valid manifest and must be caught, so a green run means something."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from generator.jobs import manifests
from generator.jobs import spec as jobs
from generator.render.options import Options
from tests import k8s_schema

Doc = dict[str, Any]


def _job(kind: str, target: str = "cuda") -> list[Doc]:
    target = "ascend" if kind == "ascendjob" else target
    options = Options(project="demo", nnodes=2, target=target)
    request = jobs.JobRequest(kind=kind, image="registry.example.com/t/demo:1")
    return manifests.documents(jobs.resolve(options, request, Path("/nonexistent")))


def _trainer(doc: Doc) -> Doc:
    return doc["spec"]["trainer"]


def _master(doc: Doc) -> Doc:
    return doc["spec"]["pytorchReplicaSpecs"]["Master"]


# (kind, how to break it, words the problem must contain)
BREAKS: list[tuple[str, Callable[[Doc], None], str]] = [
    # CEL rule on the TrainJob: RFC 1035 names.
    ("trainjob", lambda d: d["metadata"].update(name="9demo"), "RFC 1035"),
    # CEL rule with a message, on a field.
    ("trainjob", lambda d: _trainer(d).update(numProcPerNode=0), "greater than or equal to 1"),
    # list-type=map: env names are keys.
    ("trainjob", lambda d: _trainer(d).update(env=[{"name": "A"}, {"name": "A"}]), "duplicate"),
    # A misspelt field would be pruned by the server, silently.
    ("trainjob", lambda d: _trainer(d).update(nprocPerNode=8), "'nprocPerNode' was unexpected"),
    ("pytorchjob", lambda d: _master(d).update(restartpolicy="Never"), "was unexpected"),
    # Types, int32 ranges and quantities.
    ("pytorchjob", lambda d: _master(d).update(replicas="1"), "is not of type 'integer'"),
    ("pytorchjob", lambda d: _master(d).update(replicas=2**40), "int32"),
    ("pytorchjob", lambda d: d["spec"].update(nprocPerNode=8), "is not of type 'string'"),
    # Volcano's own patterns and enums.
    ("volcano", lambda d: d["spec"].update(queue="Team A"), "does not match"),
    ("volcano", lambda d: d["spec"]["policies"].append({"event": "Oops"}), "is not one of"),
    # ObjectMeta, whatever the CRD's schema says about metadata.
    ("ascendjob", lambda d: d["metadata"].update(label={"a": "b"}), "'label' was unexpected"),
    ("ascendjob", lambda d: d["spec"].update(runPolicy={"backoffLimit": "3"}), "integer"),
]


@pytest.mark.parametrize(("kind", "breaks", "words"), BREAKS)
def test_a_broken_manifest_is_refused(kind: str, breaks: Callable[[Doc], None], words: str) -> None:
    doc = copy.deepcopy(_job(kind)[-1])
    assert k8s_schema.problems(doc) == []
    breaks(doc)
    found = k8s_schema.problems(doc)
    assert any(words in problem for problem in found), found


def test_int_or_string_quantities_take_both() -> None:
    doc = _job("trainjob")[-1]
    for value in (8, "8", "500m"):
        _trainer(doc)["resourcesPerNode"]["limits"]["nvidia.com/gpu"] = value
        assert k8s_schema.problems(doc) == []
    _trainer(doc)["resourcesPerNode"]["limits"]["nvidia.com/gpu"] = "eight"
    assert k8s_schema.problems(doc)


def test_a_pod_template_is_checked_against_the_core_schema() -> None:
    template = copy.deepcopy(_master(_job("pytorchjob")[-1])["template"])
    assert k8s_schema.pod_template_problems(template) == []
    template["spec"]["containers"][0]["volumeMount"] = []
    assert "'volumeMount' was unexpected" in k8s_schema.pod_template_problems(template)[0]


def test_a_config_map_is_checked_against_the_core_schema() -> None:
    config_map = copy.deepcopy(_job("volcano", target="ascend")[0])
    assert config_map["kind"] == "ConfigMap"
    assert k8s_schema.problems(config_map) == []
    config_map["data"]["hccl.json"] = {"status": "initializing"}
    assert k8s_schema.problems(config_map)


def test_every_crd_file_keeps_its_provenance_line() -> None:
    kinds = {"TrainJob", "TrainingRuntime", "PyTorchJob", "Job", "AscendJob"}
    for release in ("", "trainer-v2.0", "trainer-v2.1", "trainer-v2.2"):
        found = k8s_schema.crds(release)
        # Each release directory also keeps its ClusterTrainingRuntime, for reference.
        assert {kind for _, kind in found} - {"ClusterTrainingRuntime"} == kinds, release
        for crd in found.values():
            assert " @ " in crd.provenance and "Apache-2.0" in crd.provenance, crd.path
            if release and crd.kind.startswith("Train"):
                assert crd.path.parent.name == release
                assert f"@ v{release.removeprefix('trainer-v')}." in crd.provenance
