"""`gen job render` as users run it, in generated projects: manifests on stdout or written
whole to -o, defaults from the project, and one error line for each mistake."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import RenderProject, gen
from tests.golden import Golden
from tests.k8s_schema import problems

IMAGE = "registry.example.com/team/demo:cuda-0123abcdef01"
ASCEND_IMAGE = "registry.example.com/team/demo:ascend-0123abcdef01"
# One manifest per kind, from the project's own answers and the recorded push.
GOLDEN = {
    "trainjob.yaml": ({"framework": "pytorch", "target": "cuda", "nnodes": 2}, []),
    "pytorchjob.yaml": (
        {"framework": "pytorch", "target": "cuda", "nnodes": 2},
        ["--data-pvc", "mnist", "--output-pvc", "runs", "--queue", "research"],
    ),
    "volcano.yaml": (
        {"framework": "mindspore", "target": "ascend", "nnodes": 2},
        ["--namespace", "team-a", "--join-timeout", "900"],
    ),
    "ascendjob.yaml": ({"framework": "pytorch", "target": "ascend", "nnodes": 2}, []),
}
GOLDEN_CASES = list(GOLDEN)


def _push_record(project: Path, target: str, reference: str) -> None:
    """What gen image push leaves behind: logs/image-<target>.pushed."""
    (project / "logs").mkdir(exist_ok=True)
    (project / "logs" / f"image-{target}.pushed").write_text(reference + "\n", encoding="utf-8")


def _project(render_project: RenderProject, **options: object) -> Path:
    project = render_project(**options)
    _push_record(project, "cuda", IMAGE)
    _push_record(project, "ascend", ASCEND_IMAGE)
    return project


def _one_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "Traceback" not in line
    for word in words:
        assert word in line, line


@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_each_kind_renders_its_golden_manifest(
    render_project: RenderProject, golden: Golden, case: str
) -> None:
    options, args = GOLDEN[case]
    project = _project(render_project, **options)
    result = gen("job", "render", "--kind", case.removesuffix(".yaml"), *args, cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for doc in yaml.safe_load_all(result.stdout):
        assert problems(doc) == []
    golden.check(case, result.stdout)


def test_a_both_project_runs_each_kind_on_its_own_image(render_project: RenderProject) -> None:
    project = _project(render_project, target="both")
    for kind, image in (("pytorchjob", IMAGE), ("ascendjob", ASCEND_IMAGE)):
        result = gen("job", "render", "--kind", kind, str(project), cwd=project.parent)
        assert result.returncode == 0, result.stderr
        assert f"image: {image}\n" in result.stdout
    volcano = gen("job", "render", "--kind", "volcano", "--target", "ascend", cwd=project)
    assert f"image: {ASCEND_IMAGE}\n" in volcano.stdout


def test_output_is_written_whole_and_never_replaced_without_force(
    render_project: RenderProject,
) -> None:
    project = _project(render_project)
    out = project / "job.yaml"
    first = gen("job", "render", "--kind", "trainjob", "-o", str(out), cwd=project)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"wrote {out}: trainjob demo")
    written = out.read_text(encoding="utf-8")
    assert yaml.safe_load(written)["kind"] == "TrainJob"

    again = gen("job", "render", "--kind", "volcano", "-o", str(out), cwd=project)
    _one_error(again, "exists", "--force")
    assert out.read_text(encoding="utf-8") == written
    forced = gen("job", "render", "--kind", "volcano", "-o", str(out), "--force", cwd=project)
    assert forced.returncode == 0, forced.stderr
    assert yaml.safe_load(out.read_text(encoding="utf-8"))["kind"] == "Job"
    assert sorted(p.name for p in project.glob("*job.yaml*")) == ["job.yaml"]


BAD = [
    (["--kind", "slurm"], "'slurm' is not one of"),
    (["--kind", "trainjob", "--nnodes", "0"], "--nnodes: 0 is out of range"),
    (["--kind", "trainjob", "--name", "My_Job"], "--name: 'My_Job' is not a DNS label"),
    (["--kind", "trainjob", "--image", "demo image:1"], "--image: 'demo image:1'"),
    (["--kind", "ascendjob"], "--kind ascendjob does not fit demo"),
    (["--kind", "volcano", "--data-pvc", "My Data"], "--data-pvc"),
]


@pytest.mark.parametrize(("args", "words"), BAD)
def test_a_mistake_is_one_error_line_and_writes_nothing(
    render_project: RenderProject, args: list[str], words: str
) -> None:
    project = _project(render_project)
    out = project / "job.yaml"
    result = gen("job", "render", *args, "-o", str(out), cwd=project)
    _one_error(result, words)
    assert not out.exists()


def test_no_image_says_to_pass_one_or_push(render_project: RenderProject) -> None:
    project = render_project()
    _one_error(gen("job", "render", "--kind", "trainjob", cwd=project), "--image", "gen image push")


def test_outside_a_project_says_so(tmp_path: Path) -> None:
    _one_error(gen("job", "render", "--kind", "trainjob", cwd=tmp_path), "not a project")
