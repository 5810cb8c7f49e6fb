"""The base-image catalogue: sound as shipped, resolves every pair, and says one line
naming the field or the nearest valid choice when something does not fit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from generator import catalog as cat
from generator.errors import CatalogError, GenError

SHIPPED = Path(__file__).resolve().parents[2] / "images" / "catalog.yaml"


@pytest.fixture(scope="module")
def catalog() -> cat.Catalog:
    return cat.load()


def test_default_location_is_the_template_images_dir(catalog: cat.Catalog) -> None:
    assert cat.load(SHIPPED.parent) == cat.load(SHIPPED) == catalog


def test_shipped_catalogue_breaks_no_rule(catalog: cat.Catalog) -> None:
    assert cat.problems(catalog) == []


def test_every_pin_is_built_for_its_base_python(catalog: cat.Catalog) -> None:
    for entry in catalog.entries.values():
        pins = [entry.pin(framework) for framework in cat.FRAMEWORKS]
        assert any(pins), entry.id
        for pin in filter(None, pins):
            assert entry.python in pin.pythons, entry.id


def test_bases_are_pinned_runtime_or_cann_images(catalog: cat.Catalog) -> None:
    for entry in catalog.entries.values():
        name, _, tag = entry.base.rpartition(":")
        if entry.target == "cuda":
            assert name == "nvidia/cuda" and "-runtime-" in tag, entry.id
        else:
            assert name == "ascendai/cann" and tag.endswith(f"-py{entry.python}"), entry.id
            assert entry.pytorch is None or entry.pytorch.torch_npu, entry.id


def test_every_entry_and_ascend_pin_says_where_it_comes_from(catalog: cat.Catalog) -> None:
    for entry in catalog.entries.values():
        assert entry.notes, entry.id
        if entry.target == "ascend":
            assert "cann-container-image" in entry.notes, entry.id
            # Each pin names the CANN it was made for, and the table that says so.
            for pin in filter(None, (entry.pytorch, entry.mindspore)):
                assert f"CANN {entry.cann}" in pin.notes, entry.id


def test_atlas_a3_entries_use_the_a3_tags_and_their_910b_siblings_pins(
    catalog: cat.Catalog,
) -> None:
    a3 = [e for e in catalog.entries.values() if e.chip == "a3"]
    assert a3 and "a3" in cat.CHIPS
    for entry in a3:
        assert entry.base.startswith(f"ascendai/cann:{entry.cann.lower()}-a3-"), entry.id
        sibling = catalog.entry(entry.id.replace("-a3-", "-910b-"))
        assert (sibling.pytorch, sibling.mindspore) == (entry.pytorch, entry.mindspore)


@pytest.mark.parametrize(("chip", "tag"), [("910", "910"), ("910b", "910b"), ("910_93", "a3")])
@pytest.mark.parametrize("framework", cat.FRAMEWORKS)
def test_an_ascend_base_is_the_projects_chips_own(
    catalog: cat.Catalog, framework: str, chip: str, tag: str
) -> None:
    entry = catalog.default("ascend", framework, chip)
    assert entry.chip == tag and f"-{tag}-" in entry.base
    assert catalog.resolve("ascend", framework, chip=chip) == entry


def test_a_base_of_another_chip_is_refused_naming_the_projects() -> None:
    with pytest.raises(CatalogError) as err:
        cat.load().resolve(
            "ascend", "pytorch", entry_id="cann8.5.0-910b-ubuntu22.04", chip="910_93"
        )
    assert str(err.value) == (
        "cann8.5.0-910b-ubuntu22.04 is not a base for ascend with pytorch on chip a3; "
        "use torch 2.9.0 (cann8.5.0-a3-ubuntu22.04)"
    )
    with pytest.raises(CatalogError) as err:
        cat.load().resolve("ascend", "pytorch", framework_version="2.9", chip="910")
    assert str(err.value) == (
        "torch 2.9 has no ascend 910 build in the catalogue; "
        "nearest: torch 2.6.0 (cann8.2.rc1-910-ubuntu22.04)"
    )


@pytest.mark.parametrize("target", cat.TARGETS)
@pytest.mark.parametrize("framework", cat.FRAMEWORKS)
def test_defaults_resolve_for_every_target_and_framework(
    catalog: cat.Catalog, target: str, framework: str
) -> None:
    entry = catalog.resolve(target, framework)
    assert entry == catalog.default(target, framework)
    assert entry.target == target and entry.pin(framework) is not None
    assert catalog.resolve(target, framework, python=entry.python, entry_id=entry.id) == entry


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("cuda", "pytorch", "3.8"), "cuda11.8-ubuntu20.04"),
        (("cuda", "pytorch", "3.8.10", "2.4"), "cuda11.8-ubuntu20.04"),
        (("cuda", "pytorch", None, "2.7.1+cu118"), "cuda11.8-ubuntu22.04"),
        (("cuda", "pytorch", None, "1.13"), "cuda11.6-ubuntu20.04"),
        (("ascend", "pytorch", None, "2.5"), "cann8.1.rc1-910b-ubuntu22.04"),
        (("ascend", "mindspore", "py3.11"), "cann8.5.0-910b-ubuntu22.04"),
        (("ascend", "mindspore", "3.11", "2.7.0"), "cann8.2.rc1-910-ubuntu22.04"),
        (("ascend", "mindspore", "3.10", "2.6.0"), "cann8.1.rc1-910b-ubuntu22.04"),
        (("ascend", "mindspore", None, "2.9"), "cann9.0.0-910b-ubuntu22.04"),
        (("ascend", "pytorch", None, "2.9.0"), "cann8.5.0-910b-ubuntu22.04"),
        (("cuda", "mindspore", "3.9", "2.9"), "cuda11.6-ubuntu20.04"),
    ],
)
def test_resolve_by_python_and_version(
    catalog: cat.Catalog, args: tuple[str | None, ...], expected: str
) -> None:
    assert catalog.resolve(*args).id == expected


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        (
            {"target": "ascend", "framework": "pytorch", "entry_id": "cann8.0.0-910b-ubuntu20.04"},
            "unknown base image 'cann8.0.0-910b-ubuntu20.04'; "
            "did you mean cann8.0.0-910b-ubuntu22.04?",
        ),
        (
            {"target": "cuda", "framework": "pytorch", "framework_version": "2.9"},
            "torch 2.9 has no cuda build in the catalogue; "
            "nearest: torch 2.7.1 (cuda11.8-ubuntu22.04)",
        ),
        (
            {"target": "ascend", "framework": "mindspore", "framework_version": "2.10"},
            "nearest: mindspore 2.9.0 (cann9.0.0-910b-ubuntu22.04)",
        ),
        (
            {"target": "ascend", "framework": "mindspore", "python": "3.13"},
            "nearest: Python 3.11 with mindspore 2.9.0 (cann9.0.0-910b-ubuntu22.04)",
        ),
        (
            {"target": "cuda", "framework": "pytorch", "python": "3.8", "framework_version": "2.7"},
            "no cuda base image has torch 2.7 with Python 3.8; "
            "for Python 3.8 the nearest is torch 2.4.1 (cuda11.8-ubuntu20.04)",
        ),
        (
            {"target": "cuda", "framework": "pytorch", "python": "3.12"},
            "no cuda base image with pytorch runs Python 3.12; "
            "nearest: Python 3.10 with torch 2.7.1 (cuda11.8-ubuntu22.04)",
        ),
        (
            {"target": "cuda", "framework": "mindspore", "python": "3.10"},
            "nearest: Python 3.9 with mindspore 2.9.0 (cuda11.6-ubuntu20.04)",
        ),
        (
            {
                "target": "cuda",
                "framework": "pytorch",
                "python": "3.8",
                "entry_id": "cuda11.8-ubuntu22.04",
            },
            "cuda11.8-ubuntu22.04 has torch 2.7.1 on Python 3.10, not Python 3.8; "
            "use torch 2.4.1 (cuda11.8-ubuntu20.04)",
        ),
        (
            {"target": "cuda", "framework": "mindspore", "entry_id": "cuda11.8-ubuntu22.04"},
            "cuda11.8-ubuntu22.04 is not a base for cuda with mindspore; "
            "use mindspore 2.9.0 (cuda11.6-ubuntu20.04)",
        ),
        (
            {"target": "cuda", "framework": "pytorch", "entry_id": "cann8.0.0-910b-ubuntu22.04"},
            "is not a base for cuda with pytorch; use torch 2.7.1 (cuda11.8-ubuntu22.04)",
        ),
        ({"target": "cude", "framework": "pytorch"}, "unknown target 'cude'; did you mean cuda?"),
        ({"target": "both", "framework": "pytorch"}, "choose one of cuda, ascend"),
        ({"target": "ascend", "framework": "mindspor"}, "did you mean mindspore?"),
        ({"target": "cuda", "framework": "pytorch", "python": "3.1O"}, "like 3.10"),
        ({"target": "cuda", "framework": "pytorch", "framework_version": "two"}, "like 2.7.1"),
    ],
)
def test_what_does_not_fit_is_one_line_with_the_nearest_choice(
    catalog: cat.Catalog, kwargs: dict[str, str], says: str
) -> None:
    with pytest.raises(CatalogError) as err:
        catalog.resolve(**kwargs)
    assert isinstance(err.value, GenError)
    assert says in str(err.value)
    assert err.value.lines() == [str(err.value)] and "\n" not in str(err.value)


def test_entries_are_plain_data_for_templates(catalog: cat.Catalog) -> None:
    data = catalog.default("ascend", "mindspore").as_dict()
    assert data["pytorch"]["torch_npu"] and data["mindspore"]["package"] == "mindspore"
    assert yaml.safe_dump(data)


Edit = Callable[[dict], None]


def _set(path: str, value: object) -> Edit:
    """An edit setting the value at a dotted path (ids contain dots: keys joined by '/')."""

    def edit(data: dict) -> None:
        *parents, last = path.split("/")
        for key in parents:
            data = data[key]
        data[last] = value

    return edit


CUDA = "entries/cuda11.8-ubuntu22.04"
CUDA_OLD = "entries/cuda11.8-ubuntu20.04"
CANN = "entries/cann8.0.0-910b-ubuntu22.04"
A3 = "entries/cann9.0.0-a3-ubuntu22.04"


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            _set(f"{CUDA}/python", 3.10),
            "entries.cuda11.8-ubuntu22.04.python: must be a quoted string (got float 3.1)",
        ),
        (_set(f"{CANN}/chip", 910), "entries.cann8.0.0-910b-ubuntu22.04.chip: must be a quoted"),
        (_set(f"{CUDA}/target", "rocm"), "entries.cuda11.8-ubuntu22.04.target: 'rocm' is not"),
        (_set(f"{CUDA}/cann", "8.0.0"), "entries.cuda11.8-ubuntu22.04.cann: unknown field"),
        (
            _set(f"{CANN}/pytorch/torch-npu", "2.4.0"),
            "entries.cann8.0.0-910b-ubuntu22.04.pytorch.torch-npu: unknown field",
        ),
        (
            _set(f"{CUDA_OLD}/pytorch/pythons", ["3.9", "3.10"]),
            "entries.cuda11.8-ubuntu20.04.pytorch.pythons: torch 2.4.1 is built for Python "
            "3.9, 3.10, not the base's 3.8",
        ),
        (
            _set(f"{CUDA}/python", "3.8"),
            "entries.cuda11.8-ubuntu22.04.python: apt on ubuntu22.04 offers Python 3.10, 3.11",
        ),
        (
            _set(f"{CANN}/python", "3.11"),
            "entries.cann8.0.0-910b-ubuntu22.04.base: tag "
            "'8.0.0-910b-ubuntu22.04-py3.10' does not say '8.0.0-910b-ubuntu22.04-py3.11'",
        ),
        (
            _set(f"{CUDA}/base", "nvidia/cuda"),
            "entries.cuda11.8-ubuntu22.04.base: 'nvidia/cuda' "
            "is not an image reference with a pinned tag",
        ),
        (
            _set(f"{CUDA}/pytorch/index_url", "https://download.pytorch.org/whl/cu117"),
            "entries.cuda11.8-ubuntu22.04.pytorch.index_url: not the cu118 index",
        ),
        (
            _set(f"{CANN}/pytorch/torch_npu", "2.3.1.post4"),
            "entries.cann8.0.0-910b-ubuntu22.04.pytorch.torch_npu: must be a build for torch 2.4.0",
        ),
        (_set(f"{CANN}/chip", "910c"), "entries.cann8.0.0-910b-ubuntu22.04.chip: '910c' is not"),
        (
            _set(f"{A3}/chip", "A3"),
            "entries.cann9.0.0-a3-ubuntu22.04.chip: 'A3' is not one of 910, 910b, a3",
        ),
        (
            _set(f"{A3}/base", "ascendai/cann:9.0.0-910b-ubuntu22.04-py3.11"),
            "entries.cann9.0.0-a3-ubuntu22.04.base: tag '9.0.0-910b-ubuntu22.04-py3.11' "
            "does not say '9.0.0-a3-ubuntu22.04-py3.11'",
        ),
        (
            _set("defaults/cuda/pytorch", "cuda11.8-ubuntu24.04"),
            "defaults.cuda.pytorch: no entry 'cuda11.8-ubuntu24.04'; did you mean",
        ),
        (
            _set("defaults/ascend/pytorch/910b", "cuda11.8-ubuntu22.04"),
            "defaults.ascend.pytorch.910b: cuda11.8-ubuntu22.04 is not a base for ascend "
            "with pytorch on chip 910b",
        ),
        (
            _set("defaults/ascend/mindspore/a3", "cann8.5.0-910b-ubuntu22.04"),
            "defaults.ascend.mindspore.a3: cann8.5.0-910b-ubuntu22.04 is not a base for ascend "
            "with mindspore on chip a3",
        ),
        (
            _set("defaults/ascend/pytorch", "cann8.0.0-910b-ubuntu22.04"),
            "defaults.ascend.pytorch: a str, not a mapping",
        ),
        # A default's base must be one Ascend/cann-container-image builds: the 8.0.0 910b
        # tag is published, but its Dockerfile is not in the repository's main branch.
        (
            _set("defaults/ascend/pytorch/910b", "cann8.0.0-910b-ubuntu22.04"),
            "defaults.ascend.pytorch.910b: cann8.0.0-910b-ubuntu22.04 names no dockerfile in "
            "Ascend/cann-container-image",
        ),
        (
            _set(
                f"{A3}/dockerfile",
                "Ascend/cann-container-image@c5a67b3a:cann/9.0.0-910b/Dockerfile",
            ),
            "entries.cann9.0.0-a3-ubuntu22.04.dockerfile: 'Ascend/cann-container-image@c5a67b3a:"
            "cann/9.0.0-910b/Dockerfile' is not Ascend/cann-container-image@<commit>:cann/"
            "9.0.0-a3-ubuntu22.04-py3.11/Dockerfile",
        ),
        (
            _set("defaults/ascend/pytorch", {"910b": "cann8.0.0-910b-ubuntu22.04"}),
            "defaults.ascend.pytorch.910: missing, though entries have it",
        ),
        (
            _set("defaults/cuda", {"pytorch": "cuda11.8-ubuntu22.04"}),
            "defaults.cuda.mindspore: missing",
        ),
        (_set(f"{CUDA}/pytorch", None), "entries.cuda11.8-ubuntu22.04.pytorch: missing"),
    ],
)
def test_a_corrupted_copy_is_refused_naming_the_field(
    tmp_path: Path, edit: Edit, says: str
) -> None:
    data = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    edit(data)
    copy = tmp_path / "catalog.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(CatalogError) as err:
        cat.load(tmp_path)
    message = str(err.value)
    assert message.startswith("catalog.yaml: ") and says in message


def test_a_repeated_id_is_refused(tmp_path: Path) -> None:
    text = SHIPPED.read_text(encoding="utf-8")
    block = text[text.index("  cuda11.6-ubuntu20.04:") : text.index("  cann8.0.0-910b")]
    (tmp_path / "catalog.yaml").write_text(text + block, encoding="utf-8")
    with pytest.raises(CatalogError, match="duplicate key 'cuda11.6-ubuntu20.04'.* line"):
        cat.load(tmp_path)


def test_a_missing_catalogue_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read the base-image catalogue"):
        cat.load(tmp_path)
