"""The Dockerfiles come from one template (templates/Dockerfile.j2) and are compared whole
with golden files: each target and framework, and the last stage gen builds apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.image.dockerfile import instructions, split
from generator.render.project import template_dir
from tests.conftest import RenderProject, gen

FRAMEWORKS = ("pytorch", "mindspore")
TARGETS = ("cuda", "ascend")
CHIPS = ("910", "910b", "910_93")
GOLDEN_CASES = [
    *(f"{framework}-{target}.Dockerfile" for framework in FRAMEWORKS for target in TARGETS),
    *(f"code-{framework}-{target}.Dockerfile" for framework in FRAMEWORKS for target in TARGETS),
    *(f"dry-run-{framework}-{chip}.txt" for framework in FRAMEWORKS for chip in CHIPS),
]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from generator.render.options import Options
    from generator.render.project import render

    return {
        fw: render(Options("demo", framework=fw, target="both"), tmp_path_factory.mktemp(fw))
        for fw in FRAMEWORKS
    }


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("target", TARGETS)
def test_rendered_dockerfile_matches_its_golden_file(
    rendered: dict[str, Path], golden: object, framework: str, target: str
) -> None:
    text = (rendered[framework] / f"Dockerfile.{target}").read_text()
    golden.check(f"{framework}-{target}.Dockerfile", text)  # type: ignore[attr-defined]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("target", TARGETS)
def test_the_last_stage_gen_builds_apart_matches_its_golden_file(
    rendered: dict[str, Path], golden: object, framework: str, target: str
) -> None:
    parts = split(
        f"Dockerfile.{target}", (rendered[framework] / f"Dockerfile.{target}").read_text()
    )
    assert parts.runtime_stage == "runtime"
    # The dependency part installs; the code part only copies code and labels it.
    assert {i.keyword for i in instructions(parts.body)} == {"ARG", "COPY", "LABEL"}
    assert "pip install" in parts.deps and "COPY --chown" not in parts.deps
    golden.check(  # type: ignore[attr-defined]
        f"code-{framework}-{target}.Dockerfile", parts.code("train-template/deps:0123456789abcdef")
    )


def test_both_dockerfiles_are_one_template_that_never_reaches_a_project(
    rendered: dict[str, Path], render_project: RenderProject
) -> None:
    template = template_dir()
    for target in TARGETS:
        text = (template / "{{cookiecutter.project}}" / f"Dockerfile.{target}").read_text()
        assert text == f"{{% set target = '{target}' %}}{{% include 'Dockerfile.j2' -%}}\n"
    for project in rendered.values():
        assert not list(project.rglob("*.j2")) and not (project / "templates").exists()
    # What a project is generated for besides the target and the platform's user changes no
    # Dockerfile.
    for framework, both in rendered.items():
        for target in TARGETS:
            only = render_project(f"demo-{framework}-{target}", framework=framework, target=target)
            other = render_project(
                f"other-{framework}-{target}",
                framework=framework,
                target=target,
                platform="generic",
                devices_per_node=2,
                nnodes=4,
                ms_train_loop="custom",
                arch="x86_64",
            )
            expected = (both / f"Dockerfile.{target}").read_text()
            assert (only / f"Dockerfile.{target}").read_text().replace(
                only.name, "demo"
            ) == expected
            assert (other / f"Dockerfile.{target}").read_text().replace(
                other.name, "demo"
            ) == expected


@pytest.mark.parametrize("target", TARGETS)
def test_a_modelarts_image_runs_as_ma_user(render_project: RenderProject, target: str) -> None:
    """ModelArts runs custom images as ma-user (uid 1000) of ma-group (gid 100), home
    /home/ma-user; other platforms keep train (CUDA) or HwHiAiUser (Ascend)."""
    project = render_project(target=target, platform="modelarts")
    text = (project / f"Dockerfile.{target}").read_text()
    assert "groupadd --gid 100 ma-group" in text and "groupmod --new-name ma-group" in text
    assert "useradd --uid 1000 --gid 100 --shell /bin/bash ma-user" in text
    assert "\nUSER ma-user\n" in text and "USER 1000:1000" not in text
    assert "USER HwHiAiUser" not in text and "useradd --create-home --uid 1000" not in text
    assert text.count("--chown=ma-user:ma-group") == 4
    assert ("usermod --append --groups HwHiAiUser ma-user" in text) == (target == "ascend")


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_chip_chooses_the_base_image(
    render_project: RenderProject, golden: object, framework: str, chip: str
) -> None:
    """`gen image build --dry-run` of a project of each chip: the base and pins of the
    catalogue's entry for that chip (a CANN image carries one chip's operator kernels)."""
    project = render_project(framework=framework, target="ascend", chip=chip)
    result = gen("image", "build", "--target", "ascend", "--dry-run", cwd=project)
    assert result.returncode == 0, result.stderr
    # The plan's lines and the Dockerfile's own account of its base; not the key line,
    # which says whether the base is on this host.
    plan = ("# step 1", "# python:", "# build arg:", "# Base and pins", "# That base is")
    shown = [line for line in result.stdout.splitlines() if line.startswith(plan)]
    golden.check(f"dry-run-{framework}-{chip}.txt", "\n".join(shown) + "\n")  # type: ignore[attr-defined]
    base = next(line for line in shown if line.startswith("# build arg: BASE_IMAGE="))
    assert f"-{'a3' if chip == '910_93' else chip}-ubuntu" in base
