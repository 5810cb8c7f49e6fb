"""The boot file as the platforms start it (launch.py, both frameworks): OpenI C2Net with its
variables and the real c2net package, ModelArts with its appended arguments (obs:// through
the moxing stand-in). The data comes from the platform's dataset, the outputs go where the
platform collects them, and nothing is written into the code directory. Where the platform
has started one process per card already (ModelArts' Ascend launcher, torchrun, msrun), each
boot file is that one rank: one training process per card, counted."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.render.options import Options
from tests.conftest import render_once
from tests.training.byo import NAMED, write_named_classes
from tests.training.runs import FAKE_MOXING, c2net_env, clean_env, free_port, ok

FRAMEWORKS = ("pytorch", "mindspore")
# The platforms' job settings (运行参数, hyperparameters): short runs.
SHORT = ("--epoch_size=1", "--max_steps=3", "--device_target=cpu")
PLACEMENT = re.compile(r"^rank (\d+) of (\d+) on [^:\n]*$", re.MULTILINE)
STARTED = "launch.py: the platform started this process as one rank ("


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory):
    """``code(framework)``: a project as a platform holds it (OpenI's code directory), its
    ./data the shipped digits (10 classes), made once."""
    made: dict[str, Path] = {}

    def get(framework: str) -> Path:
        if framework not in made:
            # GPU jobs: on this CPU the launchers (torchrun, msrun) run as there; an Ascend
            # node's would need its rank table.
            options = Options("boot", framework=framework, target="cuda", platform="openi")
            made[framework] = render_once(tmp_path_factory, options)
        return made[framework]

    return get


@pytest.fixture(scope="module")
def animals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The platform's dataset: four named classes, not the project's ten digits."""
    return write_named_classes(tmp_path_factory.mktemp("animals"), sizes=(28,), per_class=12)


def files(directory: Path) -> set[str]:
    """The code directory's files (bytecode aside, which the platform's Python may write)."""
    return {
        str(p.relative_to(directory))
        for p in directory.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def boot(project: Path, *args: str, env: dict[str, str], timeout: int = 600):
    """``python launch.py ARGS`` as the platform starts it, its one node meeting on a free port:
    another test may hold the launchers' default (29500) meanwhile."""
    return subprocess.run(
        [sys.executable, "launch.py", *args],
        cwd=project,
        env={"MASTER_PORT": str(free_port()), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def classes(output: Path) -> list[str]:
    return json.loads((output / "hparams.json").read_text())["resolved"]["classes"]


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_openi_c2net_runs_the_boot_file_on_the_jobs_own_paths(
    code, animals: Path, tmp_path: Path, framework: str
) -> None:
    project = code(framework)
    before = files(project)
    env = c2net_env(tmp_path / "c2net", "MOUNT")
    shutil.make_archive(str(Path(env["LOCAL_DATASET_PATH"]) / "Animals"), "zip", animals)
    ok(boot(project, *SHORT, env=clean_env(PYTHON=sys.executable, **env)))
    output = Path(env["LOCAL_OUTPUT_PATH"])
    # The job's dataset was read (its four classes), the outputs are where OpenI takes them.
    assert classes(output) == sorted(NAMED.values())
    assert (output / "latest.json").is_file() and (output / "logs").is_dir()
    assert files(project) == before, "the boot file wrote into the code directory"


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_modelarts_runs_the_boot_file_with_its_obs_arguments(
    code, animals: Path, tmp_path: Path, framework: str
) -> None:
    project = code(framework)
    before = files(project)
    root = tmp_path / "obs"
    shutil.copytree(animals, root / "bucket" / "animals")
    env = clean_env(
        PYTHON=sys.executable,
        PYTHONPATH=str(FAKE_MOXING),
        FAKE_OBS_ROOT=str(root),
        TRAIN_CACHE_DIR=str(tmp_path / "cache"),
        MA_VJ_NAME="modelarts-job-boot",
    )
    urls = ("--data_url=obs://bucket/animals/", "--train_url=obs://bucket/out/")
    ok(boot(project, *urls, *SHORT, env=env))
    collected = root / "bucket" / "out"
    assert classes(collected) == sorted(NAMED.values())
    assert {"latest.json", "metrics.jsonl", "hparams.json"} <= {p.name for p in collected.iterdir()}
    assert files(project) == before, "the boot file wrote into the code directory"


def rank_env(style: str, rank: int, size: int, port: int) -> dict[str, str]:
    """What a platform sets for the process it starts for card ``rank`` of ``size``."""
    master = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if style == "modelarts":  # ModelArts' Ascend launcher (davincirunsdk fmk.py) and OpenI
        return {"RANK_ID": str(rank), "RANK_SIZE": str(size), "DEVICE_ID": str(rank), **master}
    if style == "torchrun":
        return {
            "RANK": str(rank),
            "WORLD_SIZE": str(size),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(size),
            **master,
        }
    # msrun: a scheduler (rank -1 here) and the workers.
    role = "MS_SCHED" if rank < 0 else "MS_WORKER"
    return {
        "MS_ROLE": role,
        "MS_WORKER_NUM": str(size),
        "MS_SCHED_HOST": "127.0.0.1",
        "MS_SCHED_PORT": str(port),
        **({"MS_NODE_ID": str(rank)} if rank >= 0 else {}),
        "RANK_SIZE": str(size),
    }


# (framework, how the platform started the ranks, cards). MindSpore on the CPU joins a group
# through msrun's scheduler only (a rank table needs Ascend): its ModelArts case is one card.
STARTS = [
    ("pytorch", "modelarts", 2),
    ("pytorch", "torchrun", 2),
    ("mindspore", "modelarts", 1),
    ("mindspore", "msrun", 2),
]


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "style", "cards"), STARTS)
def test_a_boot_file_the_platform_started_per_card_is_one_rank(
    code, tmp_path: Path, framework: str, style: str, cards: int
) -> None:
    project, port = code(framework), free_port()
    output = tmp_path / "out"
    ranks = list(range(cards)) + ([-1] if style == "msrun" else [])
    procs = [
        subprocess.Popen(
            [sys.executable, "launch.py", *SHORT, f"--train_url={output}"],
            cwd=project,
            env=clean_env(PYTHON=sys.executable, **rank_env(style, rank, cards, port)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in ranks
    ]
    said = [proc.communicate(timeout=600)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * len(procs), [s[-2000:] for s in said]
    places = []
    for text in said:
        # Each boot file became train.py itself: no launcher of its own, no rank of another.
        assert text.count(STARTED) == 1 and "ranks of node" not in text, text[-2000:]
        places += [(int(rank), int(size)) for rank, size in PLACEMENT.findall(text)]
    # One training process per card: ranks 0..N-1 of N, each once (msrun's scheduler trains
    # nothing and has no place).
    assert sorted(places) == [(rank, cards) for rank in range(cards)]
    assert (output / "latest.json").is_file()


def _sweep_space(tmp_path: Path) -> Path:
    """Three lrs in a grid, no pruner: each trial runs to its end."""
    config = tmp_path / "sweep.yaml"
    space = {"space": {"lr": [0.05, 0.1, 0.02]}, "sampler": "grid", "trials": 2, "pruner": "none"}
    config.write_text(json.dumps(space))  # YAML reads JSON
    return config


def _trial_rows(table: Path) -> dict[int, str]:
    """trials.md's rows: the state of each trial by its number."""
    lines = table.read_text().splitlines()[2:]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return {int(row[0]): row[1] for row in cells}


@pytest.mark.slow
def test_a_modelarts_sweep_uploads_each_trial_as_a_run_and_its_restart_continues_it(
    code, animals: Path, tmp_path: Path
) -> None:
    """launch.py --sweep in a ModelArts job (obs:// through the moxing stand-in): each trial is a
    run of its own obs:// directory, uploaded as any run's; the study and table go up too. The
    job restarted on another node (an empty cache) continues the sweep from OBS."""
    project = code("pytorch")
    before = files(project)
    root = tmp_path / "obs"
    shutil.copytree(animals, root / "bucket" / "animals")
    job = {"MA_VJ_NAME": "modelarts-job-sweep", "MA_NUM_HOSTS": "1"}
    env = clean_env(PYTHON=sys.executable, PYTHONPATH=str(FAKE_MOXING), FAKE_OBS_ROOT=str(root))
    args = ("--sweep", f"--sweep_config={_sweep_space(tmp_path)}", *SHORT)
    args += ("--data_url=obs://bucket/animals/", "--train_url=obs://bucket/out/")
    said = ok(boot(project, *args, env={**env, **job, "TRAIN_CACHE_DIR": str(tmp_path / "node1")}))
    assert "launch.py: a sweep: sweep.py --resume auto" in said
    collected = root / "bucket" / "out" / "sweep"
    for trial in (0, 1):
        # Each trial's run, uploaded by the run itself: the job's dataset, its whole record.
        assert classes(collected / str(trial)) == sorted(NAMED.values())
        names = {p.name for p in (collected / str(trial)).iterdir()}
        assert {"latest.json", "metrics.jsonl", "hparams.json"} <= names
    assert _trial_rows(collected / "trials.md") == {0: "finished", 1: "finished"}
    assert {"study.db", "best.yaml"} <= {p.name for p in collected.iterdir()}
    # Restarted on a node of its own (a new cache) with one trial more, of 2 ranks (the
    # project's launcher, train.py's obs:// train_url): the study from OBS, trials 0 and 1
    # kept, trial 2 run and uploaded as a 2-rank run's outputs are.
    again = {**env, **job, "TRAIN_CACHE_DIR": str(tmp_path / "node2")}
    ok(boot(project, *args, "--trials=3", "--ranks=2", "--batch_size=8", env=again))
    assert _trial_rows(collected / "trials.md") == {0: "finished", 1: "finished", 2: "finished"}
    assert (collected / "2" / "latest.json").is_file()
    hparams = json.loads((collected / "2" / "hparams.json").read_text())
    assert hparams["resolved"]["world_size"] == 2, hparams["resolved"]
    assert not (tmp_path / "node2" / "output" / "sweep" / "0").exists()
    assert files(project) == before, "the boot file wrote into the code directory"


@pytest.mark.slow
def test_an_openi_c2net_sweep_goes_up_with_the_jobs_output(
    code, animals: Path, tmp_path: Path
) -> None:
    """launch.py --sweep in a C2Net job (MindSpore; MOXING, the real c2net package): the sweep in
    the job's LOCAL_OUTPUT_PATH, uploaded whole to OUTPUT_URL as c2net copies it."""
    project = code("mindspore")
    root = tmp_path / "obs"
    shutil.make_archive(str(root / "bucket" / "MnistDataset"), "zip", animals)
    (root / "bucket" / "code").mkdir()  # the job's CODE_URL, which c2net fetches first
    env = c2net_env(tmp_path / "c2net", "MOXING")
    env |= {"PYTHONPATH": str(FAKE_MOXING), "FAKE_OBS_ROOT": str(root)}
    env |= {"TRAIN_CACHE_DIR": str(tmp_path / "cache")}
    args = ("--sweep", f"--sweep_config={_sweep_space(tmp_path)}", *SHORT)
    ok(boot(project, *args, env=clean_env(PYTHON=sys.executable, **env)))
    local = Path(env["LOCAL_OUTPUT_PATH"]) / "sweep"
    assert classes(local / "1") == sorted(NAMED.values())
    remote = root / "bucket" / "c2net-out" / "sweep"
    assert _trial_rows(remote / "trials.md") == {0: "finished", 1: "finished"}
    assert (remote / "1" / "latest.json").is_file() and (remote / "study.db").is_file()


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"MA_NUM_HOSTS": "2"}, "this job has 2 nodes (MA_NUM_HOSTS)"),
        ({"RANK_ID": "0", "RANK_SIZE": "8"}, "started this process as one rank (RANK_ID)"),
    ],
)
def test_a_sweep_the_boot_file_cannot_run_is_one_line(
    code, tmp_path: Path, environ: dict[str, str], words: str
) -> None:
    result = boot(code("pytorch"), "--sweep", *SHORT, env=clean_env(**environ), timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: launch.py --sweep: ") and words in line, line
