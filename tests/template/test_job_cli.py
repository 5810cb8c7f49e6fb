"""`gen job render` as users run it, in generated projects: manifests on stdout or written
whole to -o, defaults from the project, and one error line for each mistake."""

from __future__ import annotations

import json
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
CUDA_2 = {"framework": "pytorch", "target": "cuda", "nnodes": 2}
GOLDEN = {
    "trainjob.yaml": (CUDA_2, []),
    # One per Trainer release, each with its own pod-override field, and the gangs.
    "trainjob-v2.0.yaml": (CUDA_2, ["--trainer-version", "2.0", "--data-pvc", "mnist"]),
    "trainjob-v2.1.yaml": (CUDA_2, ["--trainer-version", "2.1", "--data-pvc", "mnist"]),
    "trainjob-v2.2.yaml": (CUDA_2, ["--trainer-version", "2.2+", "--data-pvc", "mnist"]),
    "trainjob-v2.0-coscheduling.yaml": (
        CUDA_2,
        ["--trainer-version", "2.0", "--gang", "coscheduling"],
    ),
    "trainjob-v2.1-queue.yaml": (CUDA_2, ["--trainer-version", "2.1", "--queue", "research"]),
    "trainjob-v2.2-queue.yaml": (CUDA_2, ["--queue", "research", "--output-pvc", "runs"]),
    "pytorchjob.yaml": (
        {"framework": "pytorch", "target": "cuda", "nnodes": 2},
        ["--data-pvc", "mnist", "--output-pvc", "runs", "--queue", "research"],
    ),
    "volcano.yaml": (
        {"framework": "mindspore", "target": "ascend", "nnodes": 2},
        ["--namespace", "team-a", "--join-timeout", "900"],
    ),
    "ascendjob.yaml": ({"framework": "pytorch", "target": "ascend", "nnodes": 2}, []),
    # A whole Atlas A3 node: 16 NPUs, the super-pod handler's label and sp-block.
    "ascendjob-a3.yaml": (
        {"framework": "mindspore", "target": "ascend", "nnodes": 2, "chip": "910_93"},
        ["--devices-per-node", "16"],
    ),
    # The project's sweep as the job (issue: sweeps, item 6): one pod of the node's devices,
    # 4 trials side by side, on a project generated for 2 nodes.
    "pytorchjob-sweep.yaml": (
        {"framework": "pytorch", "target": "cuda", "nnodes": 2},
        ["--sweep", "--parallel", "4", "--output-pvc", "runs"],
    ),
    "ascendjob-sweep.yaml": (
        {"framework": "mindspore", "target": "ascend"},
        ["--sweep", "--parallel", "2", "--output-pvc", "runs"],
    ),
}
# Without a claim for /output, one line on stderr says what a restart loses and what to pass.
EPHEMERAL_WARNING = (
    "warning: no --output-pvc: the run's outputs and checkpoints die with the pod, and a "
    "restarted pod starts the run over; pass --output-pvc CLAIM to keep them and resume\n"
)
# The CRDs of the release a case renders for (tests/data/crds/<release>/).
RELEASES = {"v2.0": "trainer-v2.0", "v2.1": "trainer-v2.1", "v2.2": "trainer-v2.2"}
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
    kind, _, release = case.removesuffix(".yaml").partition("-")
    result = gen("job", "render", "--kind", kind, *args, cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ("" if "--output-pvc" in args else EPHEMERAL_WARNING)
    for doc in yaml.safe_load_all(result.stdout):
        assert problems(doc, RELEASES.get(release[:4], "")) == []
    golden.check(case, result.stdout)


@pytest.mark.parametrize("case", ["trainjob.yaml", "volcano.yaml", "ascendjob-a3.yaml"])
def test_a_language_models_project_renders_the_classifiers_manifests(
    render_project: RenderProject, golden: Golden, case: str
) -> None:
    # The job starts the project's launch script, whatever it trains: each framework's
    # language model renders the same manifest as its classifier, to the byte.
    options, args = GOLDEN[case]
    project = _project(render_project, **options, task="lm")
    kind = case.removesuffix(".yaml").partition("-")[0]
    result = gen("job", "render", "--kind", kind, *args, cwd=project)
    assert result.returncode == 0, result.stderr
    golden.check(case, result.stdout)


@pytest.mark.parametrize("kind", ["trainjob", "pytorchjob", "volcano"])
def test_without_an_output_claim_one_warning_line_says_a_restart_starts_over(
    render_project: RenderProject, kind: str
) -> None:
    project = _project(render_project)
    out = project / "job.yaml"
    bare = gen("job", "render", "--kind", kind, "-o", str(out), cwd=project)
    assert bare.returncode == 0
    assert bare.stderr == EPHEMERAL_WARNING
    assert bare.stdout.startswith(f"wrote {out}: {kind}")
    kept = gen("job", "render", "--kind", kind, "--output-pvc", "runs", cwd=project)
    assert kept.returncode == 0 and kept.stderr == ""
    assert "claimName: runs\n" in kept.stdout


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
    (["--kind", "trainjob", "--trainer-version", "2.0", "--queue", "q"], "came in v2.1"),
    (["--kind", "trainjob", "--gang", "yunikorn"], "'yunikorn' is not one of"),
    (["--kind", "pytorchjob", "--trainer-version", "2.1"], "--kind trainjob"),
    (["--kind", "pytorchjob", "--sweep", "--nnodes", "2"], "one node's devices"),
    (["--kind", "pytorchjob", "--sweep", "--parallel", "9"], "1 to 8 trials side by side"),
    (["--kind", "pytorchjob", "--parallel", "2"], "is for --sweep"),
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


def test_the_help_says_what_each_kind_guarantees(render_project: RenderProject) -> None:
    text = " ".join(gen("job", "render", "--help", cwd=render_project()).stdout.split())
    kinds = text.split("what each guarantees:")[1].split("torchrun-based kinds")[0]
    for kind, guarantee in (
        ("trainjob", "no gang: pods start as they are placed"),
        ("trainjob", "podGroupPolicy starts every node or none"),
        ("pytorchjob", "when the operator runs with a gang scheduler"),
        ("volcano", "Always a gang"),
        ("ascendjob", "A gang through Volcano"),
    ):
        assert kind in kinds and guarantee in kinds, (kind, guarantee)
    assert "scheduled as a gang" not in text  # said of every kind once, untrue of TrainJob


# --- Ascend: A3 super pods, the host network's port, the nodes' CPU (issue 33) ---------------

A3_PROJECT = {"framework": "mindspore", "target": "ascend", "nnodes": 2, "chip": "910_93"}
# ascend-for-volcano's super-pod handler (Ascend/mind-cluster component/ascend-for-volcano/
# internal/npu/ascend910/ascend910a3/superpod/frame.go): nodes x NPUs -> sp-block, or refused.
A3_ACCEPTED = [
    (["--nnodes", "1", "--devices-per-node", "8"], "8"),
    (["--nnodes", "1", "--devices-per-node", "16"], "16"),
    (["--nnodes", "2", "--devices-per-node", "16"], "32"),
    (["--nnodes", "64", "--devices-per-node", "16", "--sp-block", "512"], "512"),
]
SCHEDULER = "ascend-for-volcano"
A3_REFUSED = [
    (
        ["--nnodes", "2", "--devices-per-node", "8"],
        [SCHEDULER, "whole node", "--devices-per-node 16"],
    ),
    (["--nnodes", "64", "--devices-per-node", "8"], [SCHEDULER, "--devices-per-node 16"]),
    (["--nnodes", "64", "--devices-per-node", "16"], [SCHEDULER, "768", "--sp-block 512"]),
    (["--devices-per-node", "16", "--sp-block", "100"], [SCHEDULER, "--sp-block: 100", "of 16"]),
    (["--nnodes", "1", "--sp-block", "16"], [SCHEDULER, "--sp-block: 16", "its NPUs (8)"]),
    (["--devices-per-node", "16", "--port", "80"], ["--port: 80", "1024 to 65535"]),
]


def _job(text: str) -> dict:
    return list(yaml.safe_load_all(text))[-1]


def test_a3_shapes_render_with_their_sp_block_or_are_one_error_line(
    render_project: RenderProject,
) -> None:
    project = _project(render_project, **A3_PROJECT)
    for args, sp_block in A3_ACCEPTED:
        result = gen("job", "render", "--kind", "ascendjob", *args, cwd=project)
        assert result.returncode == 0, result.stderr
        assert _job(result.stdout)["metadata"]["annotations"] == {"sp-block": sp_block}
    for args, words in A3_REFUSED:
        result = gen("job", "render", "--kind", "volcano", *args, cwd=project)
        _one_error(result, *words)
        assert result.returncode == 2


def test_an_a3_project_made_with_defaults_renders_super_pod_jobs_without_flags(
    tmp_path: Path, golden: Golden
) -> None:
    # gen new's own defaults for --chip 910_93: 16 NPUs a node, what A3 super-pod jobs take.
    made = gen(
        "new",
        "demo",
        "--framework",
        "mindspore",
        "--target",
        "ascend",
        "--chip",
        "910_93",
        "--nnodes",
        "2",
        "--platform",
        "openi",
        "--no-input",
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    project = tmp_path / "demo"
    assert json.loads((project / ".train-template.json").read_text())["devices_per_node"] == "16"
    _push_record(project, "ascend", ASCEND_IMAGE)
    result = gen("job", "render", "--kind", "ascendjob", cwd=project)
    assert result.returncode == 0, result.stderr
    # The same manifest as the A3 golden one, which says --devices-per-node 16.
    golden.check("ascendjob-a3.yaml", result.stdout)
    volcano = gen("job", "render", "--kind", "volcano", cwd=project)
    assert volcano.returncode == 0, volcano.stderr
    assert _job(volcano.stdout)["metadata"]["annotations"] == {"sp-block": "32"}
    # The first 910's servers hold 8: 16 there is one line, and nothing is made.
    refused = gen(
        "new",
        "old",
        "--target",
        "ascend",
        "--chip",
        "910",
        "--devices-per-node",
        "16",
        "--no-input",
        cwd=tmp_path,
    )
    assert refused.returncode == 2 and not (tmp_path / "old").exists()
    assert refused.stderr.strip().splitlines() == [
        "error: devices_per_node: 16 is not allowed for chip 910: an Atlas training server "
        "(Ascend 910) holds 8 NPUs; choose one of 1, 2, 4, 8 (or auto)"
    ]
    for target, chip in (("cuda", "910b"), ("ascend", "910b")):
        sixteen = gen(
            "new",
            f"p{target}",
            "--target",
            target,
            "--chip",
            chip,
            "--devices-per-node",
            "16",
            "--platform",
            "generic",
            "--no-input",
            cwd=tmp_path,
        )
        assert sixteen.returncode == 0, sixteen.stderr
        table = tmp_path / f"p{target}" / "rank_table_8p.json"
        assert (
            not table.exists()
            or len(json.loads(table.read_text())["server_list"][0]["device"]) == 16
        )


def _ports(node: object) -> set[int]:
    """Every port a job's documents name: container ports, --port=, --master-port."""
    found: set[int] = set()
    if isinstance(node, dict):
        found |= {node["containerPort"]} if "containerPort" in node else set()
        for value in node.values():
            found |= _ports(value)
    elif isinstance(node, list):
        words = [w for w in node if isinstance(w, str)]
        found |= {int(w.removeprefix("--port=")) for w in words if w.startswith("--port=")}
        if "--master-port" in words:
            found.add(int(words[words.index("--master-port") + 1]))
        for value in node:
            found |= _ports(value)
    return found


def test_each_ascend_job_has_a_port_of_its_own_unless_told(render_project: RenderProject) -> None:
    project = _project(render_project, framework="pytorch", target="ascend")
    ports = []
    for name in ("run-a", "run-b"):
        result = gen("job", "render", "--kind", "ascendjob", "--name", name, cwd=project)
        assert result.returncode == 0, result.stderr
        # The same in the container and the launcher's command of every pod.
        (port,) = _ports(list(yaml.safe_load_all(result.stdout)))
        assert 20000 <= port <= 29999
        ports.append(port)
    assert ports[0] != ports[1]
    told = gen("job", "render", "--kind", "volcano", "--port", "31000", cwd=project)
    assert told.returncode == 0, told.stderr
    assert _ports(list(yaml.safe_load_all(told.stdout))) == {31000}


def test_ascend_nodes_are_selected_by_the_projects_cpu(render_project: RenderProject) -> None:
    for arch, label in (("auto", "huawei-arm"), ("x86_64", "huawei-x86")):
        project = _project(render_project, project=f"demo-{arch[:3]}", target="ascend", arch=arch)
        result = gen("job", "render", "--kind", "ascendjob", cwd=project)
        assert result.returncode == 0, result.stderr
        # Beside the accelerator-type in every pod's nodeSelector.
        selectors = result.stdout.count("accelerator-type: ")
        assert result.stdout.count(f"host-arch: {label}\n") == selectors > 0
    cuda = gen("job", "render", "--kind", "pytorchjob", cwd=_project(render_project, project="gpu"))
    assert cuda.returncode == 0 and "host-arch" not in cuda.stdout
