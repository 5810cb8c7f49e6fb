"""train.py's flags end to end: a mistyped option is one `error:` line naming the closest
known one, exit 2, nothing written; the arguments OpenI, C2Net and ModelArts add pass."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.training import runs

TYPOS = [
    (("--epochs", "0"), "unknown option --epochs (did you mean --epoch_size?)"),
    (("--learning_rate", "0.5"), "unknown option --learning_rate (did you mean --lr?)"),
    (("--bs", "8"), "unknown option --bs (did you mean --batch_size?)"),
    (("--lr=abc",), "argument --lr: 'abc' is not a number"),
    (("--epoch", "3"), "unknown option --epoch (did you mean --epoch_size?)"),
    (("epochs",), "unexpected argument 'epochs'"),
]
# Values a platform might pass; none may reach the log (they can hold credentials).
SECRET = "VALUE-NOT-LOGGED"


def _typo_run(
    project: Path, output: Path, typo: tuple[str, ...]
) -> subprocess.CompletedProcess[str]:
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output))
    return runs.run(project, *argv, *typo)


@pytest.mark.parametrize(("typo", "expected"), TYPOS)
def test_a_typo_stops_train_py_with_one_line(
    pytorch_project: Path, tmp_path: Path, typo: tuple[str, ...], expected: str
) -> None:
    output = tmp_path / "out"
    runs.assert_one_line_exit_2(_typo_run(pytorch_project, output, typo), expected)
    assert not output.exists()


@pytest.mark.parametrize(
    ("typo", "expected"),
    [
        (("--epochs", "0"), "did you mean --epoch_size?"),
        # MindSpore's own options (backend/options.py) are compared with too.
        (("--sink-size", "2"), "unknown option --sink-size (did you mean --sink_size?)"),
    ],
)
def test_a_typo_stops_the_mindspore_train_py_too(
    mindspore_projects: dict[str, Path], tmp_path: Path, typo: tuple[str, ...], expected: str
) -> None:
    output = tmp_path / "out"
    runs.assert_one_line_exit_2(_typo_run(mindspore_projects["model"], output, typo), expected)
    assert not output.exists()


def _platform_arguments(project: Path) -> list[str]:
    """The names in the project's own table (src/scaffold/config/platform_args.py)."""
    code = "from src.scaffold.config.platform_args import PLATFORM_ARGS; print(*PLATFORM_ARGS)"
    listed = runs.run(project, "-c", code)
    assert listed.returncode == 0, listed.stderr
    return [f"--{name}" for name in listed.stdout.split()]


@pytest.mark.slow
def test_a_run_with_every_platform_argument_trains(pytorch_project: Path, tmp_path: Path) -> None:
    names = _platform_arguments(pytorch_project)
    assert "--multi_data_url" in names and "--init_method" in names
    # Both forms, as the platforms write them: --x=v (OpenI NPU, C2Net) and --x v (ModelArts).
    extra = [
        word
        for i, name in enumerate(names)
        for word in ([f"{name}={SECRET}"] if i % 2 else [name, SECRET])
    ]
    output = tmp_path / "out"
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output))
    result = runs.run(pytorch_project, *argv, "--epoch_size", "1", "--max_steps", "5", *extra)
    console = result.stdout + result.stderr
    assert result.returncode == 0, console[-3000:]
    assert runs.metrics(output)[-1]["type"] == "test"
    # One line names them all, once each, in order; no value is logged.
    (line,) = [line for line in console.splitlines() if names[0] in line]
    assert all(line.count(name) == 1 for name in names), line
    assert [line.index(name) for name in names] == sorted(line.index(name) for name in names)
    assert SECRET not in console


# (framework, the image's accelerator): the warning names what each framework was asked.
UNSEEN = [
    ("pytorch", "npu", "torch_npu (torch.npu.is_available())", "/dev/davinci[0-9]*"),
    ("pytorch", "cuda", "torch.cuda.is_available()", "/dev/nvidia[0-9]*"),
    ("mindspore", "npu", "MindSpore's Ascend and GPU backends", "/dev/davinci[0-9]*"),
]


@pytest.mark.parametrize(("framework", "accelerator", "asked", "nodes"), UNSEEN)
def test_auto_in_an_accelerators_image_without_its_devices_warns(
    pytorch_project: Path,
    mindspore_projects: dict[str, Path],
    tmp_path: Path,
    framework: str,
    accelerator: str,
    asked: str,
    nodes: str,
) -> None:
    """The images set TRAIN_ACCELERATOR; this host has no NPU or GPU, as a container
    started without its devices."""
    project = pytorch_project if framework == "pytorch" else mindspore_projects["model"]
    argv = ("train.py", "--smoke", "--device_target", "auto", "--train_url", str(tmp_path / "o"))
    result = runs.run(project, *argv, env=runs.clean_env(TRAIN_ACCELERATOR=accelerator))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if " WARNING this image " in line]
    name = {"npu": "Ascend NPUs", "cuda": "CUDA GPUs"}[accelerator]
    assert f"built for {name} (TRAIN_ACCELERATOR={accelerator}) but none is usable" in line
    assert asked in line and f"device nodes {nodes} (none); training on the CPU" in line


ABSENT = {
    ("pytorch", "npu"): ("device_target npu", "needs torch_npu and an Ascend NPU"),
    ("pytorch", "gpu"): ("device_target cuda", "no CUDA GPU is available"),
    ("mindspore", "npu"): ("device_target npu", "MindSpore found no Ascend here"),
    ("mindspore", "gpu"): ("device_target cuda", "MindSpore found no GPU here"),
}


@pytest.mark.parametrize(("framework", "asked"), list(ABSENT), ids=["-".join(k) for k in ABSENT])
def test_an_accelerator_asked_for_and_absent_is_one_line(
    pytorch_project: Path,
    mindspore_projects: dict[str, Path],
    tmp_path: Path,
    framework: str,
    asked: str,
) -> None:
    project = pytorch_project if framework == "pytorch" else mindspore_projects["model"]
    argv = ("train.py", "--device_target", asked, "--train_url", str(tmp_path / "o"))
    image = {"gpu": "cuda"}.get(asked, asked)  # the image such a run would be in
    result = runs.run(project, *argv, env=runs.clean_env(TRAIN_ACCELERATOR=image))
    runs.assert_one_line_exit_2(result, *ABSENT[framework, asked])
    assert not (tmp_path / "o").exists()


def _host(root: Path, files: dict[str, str]) -> str:
    """A copy of a host's driver files (tests/data/doctor: real ones) under ``root``."""
    data = Path(__file__).resolve().parents[1] / "data" / "doctor"
    for name, fixture in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes((data / fixture).read_bytes())
    return str(root)


def test_the_start_up_host_check_is_one_line_and_stops_only_with_strict(
    pytorch_project: Path, tmp_path: Path
) -> None:
    """Inside a CUDA image (TRAIN_ACCELERATOR, the base's CUDA_VERSION) train.py compares the
    host's driver with the image's CUDA, as gen doctor does (scripts/hostcheck.py)."""
    proc = "proc/driver/nvidia/version"
    argv = ("train.py", "--smoke", "--device_target", "auto", "--train_url")

    def train(root: str, output: str, *more: str) -> subprocess.CompletedProcess[str]:
        env = runs.clean_env(
            TRAIN_ACCELERATOR="cuda", CUDA_VERSION="11.8.0", TRAIN_HOSTCHECK_ROOT=root
        )
        return runs.run(pytorch_project, *argv, str(tmp_path / output), *more, env=env)

    good = train(_host(tmp_path / "new", {proc: "nvidia-proc-version-open"}), "good")
    assert good.returncode == 0, good.stderr[-3000:]
    (line,) = [line for line in good.stdout.splitlines() if " host check: " in line]
    assert line.endswith(" host check: ✓ NVIDIA driver: 565.57.01 >= 520.61.05 for CUDA 11.8")
    old = _host(tmp_path / "old", {proc: "nvidia-proc-version-closed"})
    warned = train(old, "warned")
    assert warned.returncode == 0, warned.stderr[-3000:]
    (line,) = [line for line in warned.stdout.splitlines() if " host check: " in line]
    assert " WARNING host check: ✗ NVIDIA driver: 375.74 is older than CUDA 11.8 needs" in line
    stopped = train(old, "stopped", "--strict")
    assert stopped.returncode == 2
    assert stopped.stderr.splitlines()[-1].startswith(
        "error: host check: ✗ NVIDIA driver: 375.74 is older than CUDA 11.8 needs; needed: "
    )
    assert not (tmp_path / "stopped").exists()  # stopped before anything was written
