"""`gen image build` and `gen image smoke` on a real engine, for every target and framework."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from generator import engine
from generator.doctor import project as doctor
from generator.doctor.subject import subject as doctor_subject
from generator.render.options import Options
from generator.render.project import read_record
from generator.shipped.hostcheck import FAIL
from tests.conftest import gen
from tests.integration.conftest import (
    STANDIN_BASE,
    build_args,
    build_image,
    committed_project,
    share,
)
from tests.unit.test_wheels import binary_wheel

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _project(tmp_path: Path, framework: str, target: str = "both", task: str = "classify") -> Path:
    options = Options("imgtest", framework=framework, target=target, task=task)
    return committed_project(options, tmp_path)


# Every framework and target, each framework's classifier and language model once: the two
# tasks' images differ only in the project's code (the same dependencies).
@pytest.mark.parametrize(
    ("framework", "target", "task"),
    [
        ("pytorch", "cuda", "classify"),
        ("pytorch", "ascend", "lm"),
        ("mindspore", "cuda", "lm"),
        ("mindspore", "ascend", "classify"),
    ],
)
def test_build_then_smoke(
    tmp_path: Path,
    docker_engine: engine.Engine,
    wheelhouses: dict[str, Path],
    shared_images: set[str],
    created: None,
    framework: str,
    target: str,
    task: str,
) -> None:
    project = _project(tmp_path, framework, task=task)
    result = gen(
        "image",
        "build",
        "--target",
        target,
        *build_args(framework, wheelhouses[framework], target),
        cwd=project,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    share(docker_engine, shared_images, result.stdout)
    commit = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tag = f"imgtest:{target}-{commit}"
    assert f"built {tag}" in result.stdout
    assert (project / "logs" / f"image-{target}.log").read_text().count("Step ") > 5
    image = docker_engine.image(tag)
    assert image is not None and not image.runs_as_root
    assert image.labels["io.train-template.target"] == target
    assert image.labels["org.opencontainers.image.revision"] == commit
    assert image.labels["io.train-template.framework"].startswith(
        framework.replace("pytorch", "torch")
    )

    # gen doctor reads the image's recorded base: the stand-in, not the catalogue's.
    built_on = doctor.image_base(doctor_subject(project, read_record(project), target, "/"))
    assert built_on.status == FAIL and built_on.found == f"{tag} is built on {STANDIN_BASE}"

    result = gen("image", "smoke", "--target", target, "--timeout", "600", cwd=project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "no GPU or NPU: running on the CPU" in result.stdout
    # The start-up host check ran in the image (scripts/hostcheck.py): this host has no driver.
    check = {
        "cuda": "NVIDIA driver: no NVIDIA driver",
        "ascend": "Ascend devices: no /dev/davinci*",
    }
    assert f"WARNING host check: ✗ {check[target]}" in result.stdout
    assert "passed" in result.stdout
    # An accelerator's image started without its devices says so (TRAIN_ACCELERATOR).
    name = {"cuda": "CUDA GPUs", "ascend": "Ascend NPUs"}[target]
    assert f"WARNING this image is built for {name}" in result.stdout
    if framework == "pytorch" and target == "ascend":
        assert "NPU stack absent" in result.stdout
    outputs = project / "output" / f"smoke-{target}"
    assert (outputs / "metrics.jsonl").is_file() and (outputs / "artifacts.json").is_file()
    # predict.py ran in the image on its sample images (a language model: continued its sample
    # prompts), with the checkpoint just written.
    rows = [json.loads(line) for line in (outputs / "predictions.jsonl").read_text().splitlines()]
    if task == "lm":
        prompts = (project / "samples" / "prompts.txt").read_text().splitlines()
        assert [row["prompt"] for row in rows] == prompts and len(prompts) == 3
        assert all(isinstance(row["text"], str) and row["text"] for row in rows), rows
        assert "UTF-8 bytes stand in" not in result.stdout + result.stderr  # data.tokenizer: null
    else:
        names = sorted(Path(row["input"]).name for row in rows)
        assert names == [f"digit_{i}.png" for i in range(10)]
        assert all(row["class"] in [str(i) for i in range(10)] for row in rows)
    # Each target's two checks below, one per framework (the README's line and the image's
    # user are the target's, whichever framework): a smoke run in a container each.
    if (framework, target) in (("pytorch", "cuda"), ("mindspore", "ascend")):
        assert_the_readmes_docker_run_works(project, tag, target)
    else:
        assert_default_output_is_writable(docker_engine, tag, image.user)


def assert_the_readmes_docker_run_works(project: Path, tag: str, target: str) -> None:
    """The generated README's own `docker run` for this target, with the devices, the
    driver's files and the driver's group left out (this host has none): run_1p.sh's smoke
    run in place of the job, as the image's user, into the mounted ./output."""
    readme = (project / "README.md").read_text()
    marker = "--gpus all" if target == "cuda" else "--device=/dev/davinci0"
    blocks = [b.split("```")[0] for b in readme.split("```bash\n")[1:]]
    (block,) = [b for b in blocks if marker in b and "docker run" in b]
    script = re.sub(r" \\\n\s*", " ", block).replace("sudo ", "")  # root here
    for given in (r"--gpus all ", r"--device=\S+ ", r"-v /(usr|etc)/\S+ ", r'--group-add "[^"]+" '):
        script = re.sub(given, "", script)
    script = script.replace("docker run ", "docker run --network none ")
    script = script.replace(
        "IMAGE bash scripts/run_8p.sh", f"{tag} bash scripts/run_1p.sh -- --smoke"
    )
    assert script.count("docker run") == 1 and tag in script, script
    result = subprocess.run(["bash", "-ec", script], cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, script + result.stdout[-2000:] + result.stderr[-2000:]
    saved = [*(project / "output").glob("*.pt"), *(project / "output").glob("*.ckpt")]
    assert saved, sorted((project / "output").iterdir())


def assert_default_output_is_writable(docker_engine: engine.Engine, tag: str, user: str) -> None:
    """A job without an output volume trains into the launchers' default, /app/output, as the
    image's own user (no --user): the directory must be that user's, not root's. The image
    has what sweep.py needs."""
    # Optuna too, with Python's SQLite for its study: the project's sweep starts in the image.
    script = "bash scripts/run_1p.sh -- --smoke && python -c 'import optuna, sqlite3'"
    script += " && python sweep.py --help > /dev/null && ls output && id -un"
    spec = engine.ContainerSpec(tag, ["bash", "-c", script])
    result = docker_engine.run(spec, timeout_s=600, on_line=lambda line: None)
    assert result.exit_code == 0, result.log[-30:]
    assert any(line.endswith((".pt", ".ckpt")) for line in result.log), result.log[-30:]
    assert result.log[-1] == {"1000:1000": "train"}.get(user, user), (user, result.log[-3:])


def test_errors_are_one_clear_message(
    tmp_path: Path, docker_engine: engine.Engine, wheelhouses: dict[str, Path], created: None
) -> None:
    project = _project(tmp_path, "pytorch", target="cuda")
    wheels = wheelhouses["pytorch"]

    # Nothing can be pulled: a base that is not here is named, with what to do.
    result = build_image(
        "cuda",
        "--base-image",
        "nosuch/base:1",
        "--wheelhouse",
        str(wheels),
        cwd=project,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: nosuch/base:1 is not on this host and cannot be pulled")

    # A failing step: the step, the log tail and the full log's path.
    result = build_image(
        "cuda",
        "--base-image",
        STANDIN_BASE,
        "--wheelhouse",
        str(wheels),
        "--build-arg",
        "FRAMEWORK=torch==0.0.1",
        cwd=project,
    )
    assert result.returncode == 1
    first, *rest = result.stderr.strip().splitlines()
    assert first.startswith("error: build failed at Step ") and "-m venv /opt/venv" in first
    assert any("torch==0.0.1" in line for line in rest)
    assert rest[-1].startswith("full log: ")

    # The project has only a cuda Dockerfile.
    result = gen("image", "build", "--target", "ascend", cwd=project)
    assert result.returncode == 2
    assert "generated for cuda only" in result.stderr

    # Smoke before build.
    result = gen("image", "smoke", "--target", "cuda", cwd=project)
    assert result.returncode == 1
    assert "build it first" in result.stderr

    # An unknown build arg and a framework version the catalogue lacks: one line each.
    result = gen("image", "build", "--target", "cuda", "--build-arg", "TORCH=1", cwd=project)
    assert result.returncode == 2 and "the Dockerfile has no ARG TORCH" in result.stderr
    result = gen("image", "build", "--target", "cuda", "--framework-version", "9.9", cwd=project)
    assert result.returncode != 0 and "nearest" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

    # No engine at all.
    result = build_image(
        "cuda",
        cwd=project,
        env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"},
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: no Docker engine answers")


def test_a_wheel_of_another_cpu_is_one_line_before_any_build(
    tmp_path: Path, docker_engine: engine.Engine, created: None
) -> None:
    # MindSpore names its Linux aarch64 build cp311-none-any (PyPI): it installs "anywhere",
    # and would put aarch64 libraries into this x86_64 image.
    project = _project(tmp_path, "mindspore", target="cuda")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    binary_wheel(wheels, "mindspore-2.10.0-cp311-none-any.whl", 183)
    images = docker_engine.image_ids()
    result = build_image(
        "cuda",
        *("--arch", "x86_64", "--base-image", STANDIN_BASE, "--wheelhouse", str(wheels)),
        *("--build-arg", "FRAMEWORK=mindspore==2.10.0"),
        cwd=project,
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f"error: {wheels}: mindspore-2.10.0-cp311-none-any.whl holds aarch64 libraries (a "
        "none-any name does not say so), and this image is for x86_64: put a x86_64 build of "
        "mindspore==2.10.0 in the wheelhouse, or build for aarch64 (--arch aarch64)"
    ]
    # Before any build: no log, no layer.
    assert not (project / "logs").exists() or not list((project / "logs").glob("*.log"))
    assert docker_engine.image_ids() == images


def test_smoke_failure_and_timeout_leave_nothing_running(
    tmp_path: Path,
    docker_engine: engine.Engine,
    wheelhouses: dict[str, Path],
    shared_images: set[str],
    created: None,
) -> None:
    project = _project(tmp_path, "pytorch", target="cuda")
    train = project / "train.py"
    train.write_text(
        train.read_text().replace(
            "leave(main(train, sys.argv[1:]))", "raise SystemExit('broken on purpose')"
        )
    )
    subprocess.run(
        ["git", "commit", "-qam", "break", "--author", "t <t@t>"],
        cwd=project,
        check=True,
        env={"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"},
    )
    built = build_image(
        "cuda",
        *build_args("pytorch", wheelhouses["pytorch"]),
        cwd=project,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    share(docker_engine, shared_images, built.stdout)
    before = docker_engine.container_ids()

    result = gen("image", "smoke", "--target", "cuda", cwd=project)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert (
        lines[0].startswith("error: smoke test failed in imgtest:cuda-")
        and "exit code 1" in lines[0]
    )
    assert any("broken on purpose" in line for line in lines[1:])

    result = gen("image", "smoke", "--target", "cuda", "--timeout", "1", cwd=project)
    assert result.returncode == 1
    assert "timed out after 1 s; the container was killed" in result.stderr
    assert docker_engine.container_ids() == before
