"""gen job render's library checks: defaults from the project, names, images, the pushed
image record and targets; each refusal names the option and what is allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from generator.errors import GenError, ImageUnknown, KindDoesNotFit, OptionError
from generator.jobs import manifests
from generator.jobs import spec as jobs
from generator.render.options import Options

IMAGE = "registry.example.com/team/demo:cuda-1"


def _resolve(project_dir: Path = Path("/nonexistent"), record: Options | None = None, **asked: Any):
    record = record or Options(project="demo", nnodes=2, devices_per_node=4)
    asked.setdefault("kind", "pytorchjob")
    return jobs.resolve(record, jobs.JobRequest(**asked), project_dir)


def test_defaults_come_from_the_project_record() -> None:
    spec = _resolve(record=Options(project="My_Demo__", nnodes=3, devices_per_node=2), image=IMAGE)
    assert (spec.name, spec.nnodes, spec.devices_per_node) == ("my-demo", 3, 2)
    assert (spec.join_timeout, spec.namespace, spec.queue) == (600, None, None)


def test_given_values_win_over_the_record() -> None:
    spec = _resolve(image=IMAGE, nnodes=5, devices_per_node=8, name="run-7", join_timeout=30)
    assert (spec.name, spec.nnodes, spec.devices_per_node, spec.join_timeout) == ("run-7", 5, 8, 30)


BAD_VALUES = [
    ({"kind": "mpijob"}, "--kind", "choose one of trainjob"),
    ({"nnodes": 0}, "--nnodes", "from 1 to 1024"),
    ({"nnodes": 1025}, "--nnodes", "from 1 to 1024"),
    ({"devices_per_node": 3}, "--devices-per-node", "1, 2, 4, 8"),
    ({"join_timeout": 0}, "--join-timeout", "from 1 to"),
    ({"name": "Demo"}, "--name", "lower-case"),
    ({"name": "9lives"}, "--name", "starting with a letter"),
    ({"name": "demo-"}, "--name", "ending with a letter or digit"),
    ({"name": "a" * 64}, "--name", "at most 63"),
    ({"namespace": "Team_A"}, "--namespace", "lower-case"),
    ({"namespace": ""}, "--namespace", "not a namespace name"),
    ({"queue": "my queue"}, "--queue", "queue name"),
    ({"data_pvc": "Data"}, "--data-pvc", "PersistentVolumeClaim"),
    ({"output_pvc": "out/put"}, "--output-pvc", "PersistentVolumeClaim"),
    ({"image": "demo image:1"}, "--image", "[HOST[:PORT]/]NAME"),
    ({"image": ""}, "--image", "not an image reference"),
    ({"image": "https://registry.example.com/demo:1"}, "--image", "not an image reference"),
    ({"image": "Registry.example.com/Team/demo:1"}, "--image", "not an image reference"),
    ({"image": "demo@sha256:abc"}, "--image", "not an image reference"),
    ({"kind": "ascendjob", "chip": "310"}, "--chip", "910, 910b, 910_93"),
    (
        {"kind": "ascendjob", "chip": "910", "devices_per_node": 16},
        "--devices-per-node",
        "16 only on --chip 910b or 910_93",
    ),
    ({"kind": "ascendjob", "chip": "910_93", "devices_per_node": 32}, "--devices-per-node", "16"),
    ({"kind": "ascendjob", "accelerator_type": "a3"}, "--accelerator-type", "module-910b-8"),
    ({"kind": "pytorchjob", "accelerator_type": "module"}, "--accelerator-type", "runs on cuda"),
    ({"kind": "pytorchjob", "trainer_version": "2.1"}, "--trainer-version", "--kind trainjob"),
    ({"kind": "trainjob", "trainer_version": "2.3"}, "--trainer-version", "2.0, 2.1, 2.2+"),
    ({"kind": "ascendjob", "gang": "volcano"}, "--gang", "gangs already"),
    ({"kind": "trainjob", "gang": "kueue"}, "--gang", "volcano, coscheduling"),
    ({"kind": "trainjob", "gang": "coscheduling", "queue": "q"}, "--queue", "no"),
    ({"kind": "trainjob", "trainer_version": "2.0", "queue": "q"}, "--queue", "came in v2.1"),
    ({"kind": "trainjob", "trainer_version": "2.0", "gang": "volcano"}, "--gang", "coscheduling"),
]


@pytest.mark.parametrize(("asked", "option", "words"), BAD_VALUES)
def test_a_bad_value_names_the_option_and_what_is_allowed(
    asked: dict[str, Any], option: str, words: str
) -> None:
    asked = {"image": IMAGE, **asked}
    record = Options(project="demo", target="both", nnodes=2)
    with pytest.raises(OptionError) as caught:
        _resolve(record=record, **asked)
    assert str(caught.value).startswith(f"{option}: ")
    assert words in str(caught.value)


@pytest.mark.parametrize(
    "image",
    [
        "demo",
        "demo:cuda-0123abcdef01-dirty",
        "127.0.0.1:5000/team/demo:v1",
        "swr.cn-north-4.myhuaweicloud.com/my_team/demo:ascend-1",
        "localhost:5000/a/b/c@sha256:" + "0" * 64,
    ],
)
def test_image_references_kubelets_pull_are_accepted(image: str) -> None:
    assert _resolve(image=image).image == image


@pytest.mark.parametrize(
    ("kind", "fw", "nnodes", "longest"),
    [
        ("trainjob", "pytorch", 100, "-node-0-99"),
        ("pytorchjob", "pytorch", 12, "-worker-10"),
        ("ascendjob", "mindspore", 1, "-scheduler-0"),
        ("volcano", "mindspore", 2, "rings-config-"),
    ],
)
def test_a_name_is_refused_when_a_name_derived_from_it_outgrows_a_label(
    kind: str, fw: str, nnodes: int, longest: str
) -> None:
    record = Options(project="demo", framework=fw, target="ascend" if fw == "mindspore" else "cuda")
    room = 63 - len(longest)
    assert _resolve(record=record, kind=kind, image=IMAGE, nnodes=nnodes, name="a" * room)
    with pytest.raises(OptionError) as caught:
        _resolve(record=record, kind=kind, image=IMAGE, nnodes=nnodes, name="a" * (room + 1))
    assert f"use at most {room} characters" in str(caught.value)


def test_a_long_project_name_asks_for_name() -> None:
    record = Options(project="p" * 60, target="ascend")
    with pytest.raises(OptionError) as caught:
        _resolve(record=record, kind="volcano", image=IMAGE)
    assert str(caught.value).startswith("--name (default: the project name): ")


def _pushed(project: Path, target: str, text: str) -> None:
    (project / "logs").mkdir(exist_ok=True)
    (project / "logs" / f"image-{target}.pushed").write_text(text, encoding="utf-8")


def test_the_image_defaults_to_the_last_push_for_the_kinds_accelerator(tmp_path: Path) -> None:
    _pushed(tmp_path, "cuda", "registry.example.com/team/demo:cuda-1\n")
    _pushed(tmp_path, "ascend", "registry.example.com/team/demo:ascend-1\n")
    record = Options(project="demo", target="both")
    cuda = _resolve(tmp_path, record, kind="pytorchjob")
    ascend = _resolve(tmp_path, record, kind="ascendjob")
    assert (cuda.image, cuda.accelerator) == ("registry.example.com/team/demo:cuda-1", "cuda")
    assert (ascend.image, ascend.accelerator) == (
        "registry.example.com/team/demo:ascend-1",
        "ascend",
    )
    assert _resolve(tmp_path, record, kind="ascendjob", image=IMAGE).image == IMAGE


def test_no_image_and_no_push_says_what_to_do(tmp_path: Path) -> None:
    _pushed(tmp_path, "cuda", "registry.example.com/team/demo:cuda-1\n")
    with pytest.raises(ImageUnknown) as caught:
        _resolve(tmp_path, Options(project="demo", target="both"), kind="ascendjob")
    assert "pass --image" in str(caught.value)
    assert "gen image push --target ascend" in str(caught.value)


@pytest.mark.parametrize("text", ["", "\n", "not an image\n", "a b:1"])
def test_a_pushed_record_that_is_not_a_reference_is_refused(tmp_path: Path, text: str) -> None:
    _pushed(tmp_path, "cuda", text)
    with pytest.raises(ImageUnknown) as caught:
        _resolve(tmp_path)
    assert "image-cuda.pushed" in str(caught.value) and "--image" in str(caught.value)


TARGET_CASES = [
    # volcano runs either accelerator: a 'both' project must say which.
    ({"kind": "volcano"}, "both", OptionError, "pass --target cuda or --target ascend"),
    ({"kind": "volcano", "target": "ascend"}, "cuda", OptionError, "built for cuda only"),
    ({"kind": "ascendjob", "target": "cuda"}, "both", KindDoesNotFit, "Ascend NPUs only"),
    ({"kind": "trainjob"}, "ascend", KindDoesNotFit, "kinds that fit: volcano, ascendjob"),
]


@pytest.mark.parametrize(("asked", "target", "error", "words"), TARGET_CASES)
def test_targets(asked: dict[str, Any], target: str, error: type[GenError], words: str) -> None:
    with pytest.raises(error) as caught:
        _resolve(record=Options(project="demo", target=target), image=IMAGE, **asked)
    assert words in str(caught.value)


def test_volcano_on_a_both_project_takes_the_target_it_is_given() -> None:
    record = Options(project="demo", target="both", framework="mindspore")
    assert _resolve(record=record, kind="volcano", target="ascend", image=IMAGE).ascend
    assert not _resolve(record=record, kind="volcano", target="cuda", image=IMAGE).ascend


def test_the_ascend_chip_defaults_to_the_projects_and_names_the_ring_label() -> None:
    def label(record: Options, **asked: str) -> str:
        docs = manifests.documents(_resolve(record=record, kind="ascendjob", image=IMAGE, **asked))
        return docs[0]["metadata"]["labels"]["ring-controller.atlas"]

    assert label(Options(project="demo", target="ascend")) == "ascend-910b"
    assert label(Options(project="demo", target="ascend", chip="910")) == "ascend-910"
    assert label(Options(project="demo", target="ascend"), chip="910") == "ascend-910"
    assert label(Options(project="demo", target="ascend", chip="910_93")) == "ascend-910b"
