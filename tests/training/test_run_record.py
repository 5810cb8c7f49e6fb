"""The run's record is the truth for every command after it. On a fresh project of each
framework, the README's "Your own data" steps are followed as printed (named classes, images
of two sizes, --data_url and the resize on the command line, the README's own model), then
the README's evaluate, predict, export and resume commands as printed: each works and agrees
with the run. Each mistake on such a run is one line and exit 2, before the first step where
it can be, and leaves the output directory as it was."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from generator.render.options import Options
from tests.conftest import render_once
from tests.training import runs
from tests.training.byo import NAMED, write_named_classes
from tests.training.runs import ok

FRAMEWORKS = ("pytorch", "mindspore")
TRAIN = ("train.py", "--data_url", "mydata", "--model", "mynet", "--data_resize", "32,32")
# A line "test loss 0.123456" of eval.py: printed to 6 decimals.
PRINTED = 5e-7


def readme_commands(project: Path, heading: str) -> list[str]:
    """The commands of the bash blocks under ``## heading`` of the project's README, up to its
    next heading, comments and blank lines left out."""
    text = (project / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    following = re.search(r"\n##+ ", text[start + 1 :])
    section = text[start : start + 1 + following.start() if following else None]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.splitlines():
            command = line.split("  #", 1)[0].split(" # ", 1)[0].strip()
            if command:
                lines.append(command)
    return lines


def own_model(project: Path) -> str:
    """The README's "Your own model" code, as printed."""
    text = (project / "README.md").read_text(encoding="utf-8")
    start = text.index("**Your model** is one function")
    block = text.index("```python", start) + len("```python")
    return text[block : text.index("```", block)].strip("\n") + "\n"


def shell(project: Path, command: str, timeout: int = 600):
    """A README line run as printed: python is this test's interpreter."""
    words = shlex.split(command)
    env = runs.clean_env(PYTHON=sys.executable)
    if words[0] == "python":
        return runs.run(project, *words[1:], env=env, timeout=timeout)
    return subprocess.run(
        words,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory``, by path: compared before and after a refused command."""
    if not directory.exists():
        return {}
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def usual_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory):
    """``own(framework)``: a fresh project with the README's own model and a folder of
    named classes of two sizes, trained as the README says into ./output; made once each."""
    made: dict[str, tuple[Path, str]] = {}

    def get(framework: str) -> tuple[Path, str]:
        if framework not in made:
            target = "ascend" if framework == "mindspore" else "cuda"
            options = Options("mine", framework=framework, target=target, platform="generic")
            project = render_once(tmp_path_factory, options)
            with (project / "src" / "model.py").open("a", encoding="utf-8") as model:
                model.write("\n\n" + own_model(project))
            write_named_classes(project / "mydata", per_class=40)
            trained = runs.run(project, *TRAIN, "--epoch_size", "2")
            made[framework] = (project, ok(trained))
        return made[framework]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_readme_commands_after_your_own_data_work_as_printed(own, framework: str) -> None:
    project, log = own(framework)
    suffix = runs.SUFFIX[framework]
    output = project / "output"
    # The run's last word says which checkpoint its test scored.
    assert f"test (the last checkpoint, mynet_epoch2{suffix}) loss " in log
    for path in output.glob(f"*{suffix}"):
        assert path.stat().st_mode & 0o777 == usual_mode(), path  # MindSpore wrote 0400

    # Evaluate: the run's data, resize and model come from its record, not config.yaml.
    best, last = readme_commands(project, "Evaluate a run")
    said = ok(shell(project, best)).splitlines()
    pointer = json.loads((output / "latest.json").read_text())
    assert said[0].startswith(f"scoring the best checkpoint {pointer['best']}, epoch ")
    said = ok(shell(project, last)).splitlines()
    assert said[0] == f"scoring the last checkpoint mynet_epoch2{suffix}, epoch 2 on the val split"
    val = [row for row in runs.metrics(output) if row["type"] == "val"][-1]
    scores = dict(line.split()[1:] for line in said[1:])
    assert {k: float(v) for k, v in scores.items()} == {
        k: pytest.approx(val[k], abs=PRINTED) for k in scores
    }

    # Predict: what it skips and converts is said; a folder's undecodable file is skipped.
    mine = project / "data" / "my_images"
    mine.mkdir(parents=True)
    for path in sorted((project / "mydata" / "test" / "ant").iterdir())[:3]:
        shutil.copy(path, mine / path.name)
    (mine / "notes.txt").write_text("not an image\n")
    (mine / "fake.png").write_text("a text file named .png\n")
    Image.new("RGB", (40, 40), (200, 10, 10)).save(project / "a.png")
    Image.new("L", (28, 28), 90).save(project / "b.png")
    for command in readme_commands(project, "Predict"):
        if ".csv" in command:
            continue  # a table's rows: this project's model takes images
        result = shell(project, command)
        rows = ok(result).splitlines()
        if command.endswith("samples/"):
            assert len(rows) == 10
            assert (
                "note: converted as the run read its data: 10 from L to RGB, 10 from 28x28 "
                "to 32x32 pixels" in result.stderr.splitlines()
            )
        if command.endswith("data/my_images/"):
            assert len(rows) == 3 and all(r.split("\t")[1] in NAMED.values() for r in rows)
            notes = result.stderr.splitlines()
            assert (
                "note: skipped 1 file(s) that are not images (.png, .jpg, .jpeg): "
                "data/my_images/notes.txt (--verbose lists each)"
            ) in notes
            assert (
                "note: skipped: data/my_images/fake.png cannot be read as an image: it is no "
                "image format Pillow reads"
            ) in notes
    labelled = [json.loads(line) for line in (project / "labels.jsonl").read_text().splitlines()]
    assert [row["input"] for row in labelled] == ["a.png", "b.png"]
    assert all(len(row["top_k"]) == 3 and row["class"] in NAMED.values() for row in labelled)
    verbose = shell(project, "python predict.py --verbose data/my_images/")
    assert "note: skipped data/my_images/notes.txt: not images (.png, .jpg, .jpeg)" in (
        verbose.stderr.splitlines()
    )
    # Named on the command line, a file that cannot be read is the command's one line.
    runs.assert_one_line_exit_2(
        shell(project, "python predict.py data/my_images/fake.png"),
        "data/my_images/fake.png cannot be read as an image",
    )

    # Export, as printed; the files keep the user's usual mode.
    for command in readme_commands(project, "Export for inference"):
        if command.startswith("pip "):
            continue  # the export extra is installed in the test environment
        ok(shell(project, command))
    exported = sorted(p for p in (project / "export").iterdir() if not p.name.endswith(".json"))
    assert exported and all(p.stat().st_mode & 0o777 == usual_mode() for p in exported)
    # --checkpoint PATH alone: its directory's record gives the rest, for all three.
    first = f"output/mynet_epoch1{suffix}"
    fmt = "onnx" if framework == "pytorch" else "MINDIR"
    ok(shell(project, f"python export.py --format {fmt} --checkpoint {first}"))
    assert ok(shell(project, f"python eval.py --checkpoint {first}")).startswith(
        f"scoring the given checkpoint mynet_epoch1{suffix}, epoch 1 on the test split"
    )
    assert (
        len(ok(shell(project, f"python predict.py --checkpoint {first} a.png")).splitlines()) == 1
    )

    # Resume as the README writes it (here into ./output, one epoch more): the recorded
    # model, data and resize, with no option repeated.
    (go_on,) = [c for c in readme_commands(project, "Run it here (CPU is fine)") if "--resume" in c]
    go_on = go_on.replace("output/lr0.05", "output").replace("--epoch_size 20", "--epoch_size 3")
    resumed = ok(shell(project, go_on))
    assert f"resumed from {output}/mynet_epoch2{suffix} after epoch 2" in resumed
    assert "model mynet (config.yaml: lenet)" in resumed and "data.resize 32,32" in resumed
    test = [row for row in runs.metrics(output) if row["type"] == "test"][-1]
    said = ok(shell(project, "python eval.py --checkpoint last")).splitlines()
    assert said[0] == f"scoring the last checkpoint mynet_epoch3{suffix}, epoch 3 on the test split"
    scores = {k: float(v) for k, v in (line.split()[1:] for line in said[1:])}
    assert scores == {k: pytest.approx(test[k], abs=PRINTED) for k in scores}
    # Its row holds the run's own final numbers, exactly: the same weights, data and batches.
    row = runs.metrics(output)[-1]
    assert row["type"] == "eval" and {k: row[k] for k in scores} == {k: test[k] for k in scores}


def no_step(result) -> None:
    """The process stopped before its first training step (and wrote no record)."""
    assert "to the first step" not in result.stdout and "epoch 1/" not in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_mistakes_on_a_run_are_one_line_before_the_first_step(
    own, framework: str, tmp_path: Path
) -> None:
    project, _ = own(framework)
    run = tmp_path / "run"
    shutil.copytree(project / "output", run)
    latest = json.loads((run / "latest.json").read_text())["latest"]
    before = snapshot(run)
    cases = []
    # Another model than the checkpoint's: named both, before anything is built.
    cases.append(
        (
            project,
            ("train.py", "--train_url", str(run), "--resume", "auto", "--model", "lenet"),
            f"error: the checkpoint {run}/{latest} holds model mynet's weights; "
            "--model lenet is another model: leave --model out to use mynet",
        )
    )
    # The model's class changed since (16 channels now 8): one short line, never a
    # state-dict dump.
    changed = tmp_path / "changed"
    shutil.copytree(project, changed, ignore=shutil.ignore_patterns("output", "export", "e"))
    model = changed / "src" / "model.py"
    text = model.read_text(encoding="utf-8")
    head, mine = text.rsplit('@model("mynet"', 1)
    model.write_text(head + '@model("mynet"' + mine.replace(" 16,", " 8,").replace("(16,", "(8,"))
    mismatch = "was saved from another mynet than src/model.py's mynet now: its "
    cases.append((changed, ("train.py", "--train_url", str(run), "--resume", "auto"), mismatch))
    cases.append((changed, ("eval.py", "--train_url", str(run)), mismatch))
    for index, (where, argv, expected) in enumerate(cases):
        result = runs.run(where, *argv, "--device_target", "cpu")
        runs.assert_one_line_exit_2(result, expected)
        assert len(result.stderr) < 300, result.stderr  # short: no tensor listing
        no_step(result)
        if index == 0:
            assert "data: " not in result.stdout  # said before the data is even read
        assert snapshot(run) == before, argv

    # The loss monitored with max: refused before anything is read or written.
    fresh = tmp_path / "fresh"
    monitor = ("--monitor_metric", "loss", "--monitor_mode", "max", "--device_target", "cpu")
    refused = runs.run(project, *TRAIN, "--train_url", str(fresh), *monitor)
    runs.assert_one_line_exit_2(
        refused, "error: monitor.mode max with monitor.metric loss: a smaller loss is better"
    )
    assert refused.stdout == "" and not fresh.exists()  # before the device and the data
    # A metric renamed in src/step.py, monitor not told: said on the batch the model is
    # tried on, before the first step; the directory stays free for the next run.
    step = changed / "src" / "step.py"
    step.write_text(step.read_text(encoding="utf-8").replace('"accuracy":', '"acc":'))
    shutil.copy(project / "src" / "model.py", model)
    renamed = runs.run(changed, *TRAIN, "--train_url", str(fresh), "--device_target", "cpu")
    runs.assert_one_line_exit_2(
        renamed,
        "error: monitor.metric 'accuracy' is not among the metrics src/step.py returns "
        "(loss, acc): set monitor.metric in config.yaml",
    )
    no_step(renamed)
    assert rundir_outputs(fresh) == []
    short = ("--epoch_size", "1", "--max_steps", "2", "--device_target", "cpu")
    fixed = runs.run(changed, *TRAIN, "--train_url", str(fresh), "--monitor_metric", "acc", *short)
    assert "to the first step" in ok(fixed)


def rundir_outputs(directory: Path) -> list[str]:
    """What a run leaves that makes the next plain run refuse the directory."""
    if not directory.exists():
        return []
    return sorted(p.name for p in directory.iterdir())


# src/step.py's loss, held at the calls TEST_HOLD_AT names until the test lets it go on: a
# run caught mid-training, whatever the machine's speed.
BARRIER = """

import os as _os
import time as _time
from pathlib import Path as _Path

_calls = [0]
_loss = loss


def loss(outputs, labels):  # noqa: F811 (held, then the loss above)
    _calls[0] += 1
    if str(_calls[0]) in _os.environ.get("TEST_HOLD_AT", "").split(","):
        held = _Path(_os.environ["TEST_HOLD_DIR"]) / f"held-{_calls[0]}"
        held.touch()
        while not held.with_name(f"go-{_calls[0]}").exists():
            _time.sleep(0.05)
    return _loss(outputs, labels)
"""


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 300) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()[0][-3000:]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
def test_eval_of_a_run_in_progress_says_so_and_leaves_its_record_alone(own, tmp_path: Path) -> None:
    import socket

    project, _ = own("pytorch")
    held = tmp_path / "held"
    shutil.copytree(project, held, ignore=shutil.ignore_patterns("output", "export", "e"))
    with (held / "src" / "step.py").open("a", encoding="utf-8") as step:
        step.write(BARRIER)
    output = tmp_path / "out"
    # The shipped digits: 40 steps an epoch; held in epoch 1, then in epoch 2.
    env = runs.clean_env(TEST_HOLD_AT="2,45", TEST_HOLD_DIR=str(tmp_path))
    argv = [sys.executable, "train.py", "--train_url", str(output), "--epoch_size", "2"]
    training = subprocess.Popen(
        [*argv, "--device_target", "cpu"],
        cwd=held,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(tmp_path / "held-2", training)
        where = f"(pid {training.pid} on {socket.gethostname()}, since "
        early = runs.run(held, "eval.py", "--train_url", str(output), "--device_target", "cpu")
        runs.assert_one_line_exit_2(
            early,
            f"error: {output} holds no checkpoint yet (hparams.json, tensorboard): run ",
            f"is still training {where}",
            "has not finished its first epoch; try again after it",
        )
        (tmp_path / "go-2").touch()
        wait_for(tmp_path / "held-45", training)
        record = (output / "metrics.jsonl").read_bytes()
        live = runs.run(held, "eval.py", "--train_url", str(output), "--device_target", "cpu")
        first = ok(live) and live.stderr.splitlines()[0]
        assert first.startswith("note: run ") and where in first, live.stderr
        assert first.endswith("taking its newest finished checkpoint, lenet_epoch1.pt")
        assert live.stdout.startswith("scoring the newest checkpoint lenet_epoch1.pt, epoch 1 ")
        assert (output / "metrics.jsonl").read_bytes() == record
        (row,) = [json.loads(line) for line in (output / "eval.jsonl").read_text().splitlines()]
        assert (row["type"], row["checkpoint"], row["epoch"]) == ("eval", "lenet_epoch1.pt", 1)
        (tmp_path / "go-45").touch()
        assert training.wait(timeout=300) == 0, training.communicate()[0][-3000:]
    finally:
        training.kill()
        training.communicate()
    # Finished: no note, the best checkpoint, and the row goes to the run's own record.
    done = runs.run(held, "eval.py", "--train_url", str(output), "--device_target", "cpu")
    assert ok(done).startswith("scoring the best checkpoint ") and "still training" not in (
        done.stderr
    )
    assert runs.metrics(output)[-1]["type"] == "eval"
    assert not (output / ".running.json").exists()


@pytest.mark.slow
def test_a_mindspore_project_under_numpy_2_is_one_line_before_the_model(
    own, numpy2_site: Path, tmp_path: Path
) -> None:
    project, _ = own("mindspore")
    import importlib.metadata

    wrong = importlib.metadata.PathDistribution(next(numpy2_site.glob("numpy-*.dist-info")))
    env = runs.clean_env(PYTHONPATH=str(numpy2_site))
    output = tmp_path / "out"
    for script in ("train.py", "eval.py"):
        result = runs.run(project, script, "--train_url", str(output), env=env)
        runs.assert_one_line_exit_2(
            result,
            f"error: this Python ({sys.executable}) has numpy {wrong.version}; the project needs "
            "numpy<2 (MindSpore's compiled ops are built against NumPy 1.x: eager tensor ops "
            "fail on 2.x): pip install 'numpy<2' (or pip install -r requirements.txt)",
        )
        assert result.stdout == "" and not output.exists()
    # gen doctor says the same of the project's Python.
    doctor = runs.run(
        Path(__file__).resolve().parents[2],
        "-m",
        "generator",
        "doctor",
        str(project),
        env=runs.clean_env(PYTHONPATH=str(numpy2_site), PYTHON=sys.executable),
    )
    assert (
        f"✗ packages: {sys.executable} has numpy {wrong.version}; needed: numpy<2 (MindSpore's "
        "compiled ops are built against NumPy 1.x: eager tensor ops fail on 2.x); fix: pip "
        "install 'numpy<2' (or pip install -r requirements.txt)"
    ) in doctor.stdout.splitlines(), doctor.stdout
    assert (
        "✓ packages: "
        in runs.run(
            Path(__file__).resolve().parents[2],
            "-m",
            "generator",
            "doctor",
            str(project),
            env=runs.clean_env(PYTHON=sys.executable),
        ).stdout
    )
