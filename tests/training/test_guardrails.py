"""Guardrails for model authors, as a new user meets them, in both frameworks: each everyday
mistake is one line with its exit code, and the output directory's files are as they were
(or, for a run that started, kept as it left them); a start that failed leaves the directory
free; a run off the platform writes into the project."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from generator.render.options import Options
from generator.render.project import render
from tests.training import runs

FRAMEWORKS = ["pytorch", "mindspore"]
# Models a new user gets wrong, in each framework's words: a head of 5 outputs for 10
# classes, a tuple, a Linear/Dense of the wrong size, an error in the model function.
MODELS = {
    "pytorch": """

class Pair(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(784, classes)

    def forward(self, x):
        return self.fc(x.flatten(1)), x


@model("five", input_shape=(1, 28, 28))
def five(shape: DataShape) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 5))


@model("pair", input_shape=(1, 28, 28))
def pair(shape: DataShape) -> nn.Module:
    return Pair(shape.num_classes)


@model("badlinear", input_shape=(1, 28, 28))
def badlinear(shape: DataShape) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(100, shape.num_classes))


@model("raises", input_shape=(1, 28, 28))
def raises(shape: DataShape) -> nn.Module:
    width, height = shape.input
    return nn.Linear(width, height)
""",
    "mindspore": """

class Pair(nn.Cell):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(784, classes)

    def construct(self, x):
        return self.fc(self.flatten(x)), x


@model("five", input_shape=(1, 28, 28))
def five(shape: DataShape) -> nn.Cell:
    return nn.SequentialCell(nn.Flatten(), nn.Dense(784, 5))


@model("pair", input_shape=(1, 28, 28))
def pair(shape: DataShape) -> nn.Cell:
    return Pair(shape.num_classes)


@model("badlinear", input_shape=(1, 28, 28))
def badlinear(shape: DataShape) -> nn.Cell:
    return nn.SequentialCell(nn.Flatten(), nn.Dense(100, shape.num_classes))


@model("raises", input_shape=(1, 28, 28))
def raises(shape: DataShape) -> nn.Cell:
    width, height = shape.input
    return nn.Dense(width, height)
""",
}


def fresh(tmp_path: Path, framework: str, platform: str = "generic") -> Path:
    target = "ascend" if framework == "mindspore" else "cuda"
    return render(Options("mine", framework, target, platform), tmp_path / "project")


def files(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path, with its bytes."""
    if not directory.exists():
        return {}
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def train(project: Path, output: Path, *args: str, env: dict | None = None):
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output), *args)
    return runs.run(project, *argv, env=env)


def line_of(path: Path, text: str) -> int:
    """The number of the line of ``path`` that holds ``text``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def write_images(root: Path, classes: tuple[str, ...], count: int = 12) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for name in classes:
            (root / split / name).mkdir(parents=True)
            for i in range(count):
                pixels = rng.integers(0, 256, (16, 16), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / name / f"{i}.png")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_data_mistakes_are_one_line_and_leave_the_output_as_it_was(
    framework: str, tmp_path: Path
) -> None:
    project = fresh(tmp_path, framework)
    output = tmp_path / "out"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    before = files(output)
    one = write_images(tmp_path / "one", ("cat",))
    truncated = write_images(tmp_path / "trunc", ("ant", "bee"))
    png = truncated / "train" / "ant" / "3.png"
    png.write_bytes(png.read_bytes()[:60])
    few = write_images(tmp_path / "few", ("ant", "bee"), count=2)
    table = tmp_path / "nan"
    table.mkdir()
    rows = ["x,y,label", "1,2,0", "3,nan,1", "4,5,0", "6,7,1"]
    (table / "train.csv").write_text("\n".join(rows) + "\n")
    cases = [
        (
            ("--data_url", str(one)),
            "error: the training data holds one class (cat): a classifier needs two or more "
            "(a number to predict instead: data: labels: values)",
        ),
        (
            ("--data_url", str(table), "--model", "mlp"),
            f"error: {table / 'train.csv'} line 3, column 'y': 'nan' is not a finite number "
            "(fill or drop the row)",
        ),
        (
            ("--data_url", str(truncated), "--model", "mlp"),
            f"error: {png} cannot be read as an image: ",
        ),
        (
            ("--data_url", str(truncated), "--model", "mlp", "--data_in_memory", "false"),
            f"error: {png} cannot be read as an image: ",
        ),
        (
            ("--data_url", str(few), "--model", "mlp"),
            "error: batch_size 4 x 1 devices = 4 exceeds the 3 training samples; lower "
            "--batch_size",
        ),
        (
            ("--smoke", "--skip_layers", "head"),
            "error: --skip_layers applies to the weights --pretrained loads: give --pretrained "
            "too, or leave skip_layers empty",
        ),
    ]
    for args, expected in cases:
        result = train(project, output, *args, "--batch_size", "4", "--epoch_size", "1")
        runs.assert_one_line_exit_2(result, expected)
        assert files(output) == before, args


@pytest.mark.slow
def test_a_png_mindspores_decoder_rejects_mid_epoch_is_named(tmp_path: Path) -> None:
    """Streamed plain PNGs are decoded by MindSpore's ImageFolderDataset. Given the mean and
    std, nothing decodes an image before training, so the broken one is met in the epoch:
    MindSpore logs its own lines first, then the run ends on the file's name, exit 2."""
    project = fresh(tmp_path, "mindspore")
    data = write_images(tmp_path / "data", ("ant", "bee"))
    png = data / "train" / "bee" / "5.png"
    png.write_bytes(png.read_bytes()[:60])
    stats = ("--data_mean", "128", "--data_std", "64", "--data_in_memory", "false")
    args = ("--data_url", str(data), "--model", "mlp", "--batch_size", "4", *stats)
    result = train(project, tmp_path / "out", *args)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: {png} cannot be read as an image: MindSpore's decoder finds it broken "
        "(truncated or damaged) or unreadable"
    )


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_model_mistakes_name_the_model_the_shape_and_the_place(
    framework: str, tmp_path: Path
) -> None:
    project = fresh(tmp_path, framework)
    model_file = project / "src" / "model.py"
    with model_file.open("a", encoding="utf-8") as stream:
        stream.write(MODELS[framework])
    output = tmp_path / "out"
    place = f"src/model.py:{line_of(model_file, 'width, height = shape.input')} (raises)"
    cases = {
        "five": "error: model five returns (4, 5) for a batch of 4 samples; the data has 10 "
        "classes: it must return (4, 10) (its last layer gives shape.num_classes outputs)",
        "pair": "error: model pair returns a tuple, not one tensor: it must return (4, 10), a "
        "score for each class a sample",
        "badlinear": "error: model badlinear fails on a batch of shape (4, 1, 28, 28): ",
        "raises": "error: model raises cannot be built for samples of shape (1, 28, 28) and "
        f"10 outputs at {place}: ValueError: ",
    }
    for name, expected in cases.items():
        result = train(project, output, "--model", name)
        if framework == "mindspore" and name == "badlinear":
            # MindSpore prints its graph compiler's own report first: ours is the last line.
            assert result.returncode == 2 and result.stderr.splitlines()[-1].startswith(expected)
        else:
            runs.assert_one_line_exit_2(result, expected)
        assert not output.exists(), name
    # --debug: the whole traceback instead of the line.
    debug = train(project, output, "--model", "raises", "--debug")
    assert debug.returncode != 0 and "Traceback (most recent call last)" in debug.stderr
    assert "width, height = shape.input" in debug.stderr

    # A second model or reader of a name already taken: refused, both places named.
    text = model_file.read_text(encoding="utf-8")
    model_file.write_text(text.replace('@model("five"', '@model("lenet"'), encoding="utf-8")
    # Each place is where its @model line is.
    first = line_of(model_file, '@model("lenet", input_shape=(1, 28, 28), head=')
    second = line_of(model_file, '@model("lenet", input_shape=(1, 28, 28))')
    result = train(project, output, "--smoke")
    expected = (
        f"error: two models are called 'lenet': src/model.py:{first} and "
        f"src/model.py:{second}; rename one"
    )
    runs.assert_one_line_exit_2(result, expected)
    model_file.write_text(text, encoding="utf-8")
    data_file = project / "src" / "data.py"
    with data_file.open("a", encoding="utf-8") as stream:
        stream.write(
            "\n\nfrom src.scaffold import Reader, reader  # noqa: E402\n\n\n"
            '@reader("csv")\nclass MyCsv(Reader):\n    looks_for = "mine"\n'
        )
    result = train(project, output, "--smoke")
    runs.assert_one_line_exit_2(
        result, "error: two readers are called 'csv': src/scaffold/data/tables.py:", "src/data.py:"
    )


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_diverging_run_stops_in_one_line_and_the_directory_stays_free(
    framework: str, tmp_path: Path
) -> None:
    project = fresh(tmp_path, framework)
    output = tmp_path / "out"
    result = train(project, output, "--lr", "1e6", "--epoch_size", "2")
    runs.assert_one_line_exit_2(result, "error: the training loss is ", "learning rate 1e+06")
    assert "try a lower --lr" in result.stderr
    # It stopped in its first epoch: what it wrote is a failed start's, and the next run
    # takes the directory, saying so.
    assert not list(output.glob("lenet_epoch*"))
    again = train(project, output, "--epoch_size", "1", "--max_steps", "3")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "stopped before its first epoch" in again.stdout and "cleared" in again.stdout


@pytest.mark.slow
def test_a_read_only_output_directory_is_one_line(tmp_path: Path, pytorch_project: Path) -> None:
    read_only = tmp_path / "ro"
    read_only.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(read_only)], check=True
    )
    try:
        result = train(pytorch_project, read_only, "--smoke")
    finally:
        subprocess.run(["umount", str(read_only)], check=True)
    runs.assert_one_line_exit_2(
        result,
        f"error: cannot write to the output directory {read_only}: Read-only file system; "
        "give another --train_url",
    )


def run_1p(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/run_1p.sh", *args],
        cwd=project,
        env=runs.clean_env(PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_the_scripts_refusal_names_their_own_option(tmp_path: Path, pytorch_project: Path) -> None:
    output = tmp_path / "out"
    first = run_1p(pytorch_project, "--output", str(output), "--", "--smoke")
    assert first.returncode == 0, first.stderr[-2000:]
    # Another configuration (the same command would continue the run: a restart).
    again = run_1p(pytorch_project, "--output", str(output), "--", "--smoke", "--lr", "0.5")
    # env.sh's notes about this host come first; train.py's one line is the last.
    assert again.returncode == 2 and again.stderr.splitlines()[-1].startswith("error: ")
    assert "continue it with --resume auto, or give another --output" in again.stderr


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_readme_own_model_and_data_commands_run_as_printed_inside_the_project(
    framework: str, tmp_path: Path, imagefolder: Path, table_dir: Path
) -> None:
    """On an OpenI project, where /dataset and /model are the platform's: off the platform
    the run says so and writes into the project."""
    from tests.training.test_byo import readme_section

    project = fresh(tmp_path, framework, "openi")
    section = readme_section(project, "Bring your own model and data")
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    with (project / "src" / "model.py").open("a", encoding="utf-8") as stream:
        stream.write("\n\n" + code)
    os.symlink(imagefolder, project / "mydata")
    os.symlink(table_dir, project / "mytable")
    config = project / "config.yaml"
    # One epoch, cut to 2 steps: each command still reads its data, builds its model and
    # writes its output as printed (the assertions), without 40 steps of training.
    text = config.read_text().replace("\nepoch_size: 12\n", "\nepoch_size: 1\n")
    config.write_text(text.replace("\nmax_steps: null\n", "\nmax_steps: 2\n"))
    assert "\nmax_steps: 2\n" in config.read_text()
    commands = re.findall(r"^python train\.py .*$", section, re.M)
    assert len(commands) == 2, commands
    for number, command in enumerate(commands):
        words = command.split()
        result = runs.run(project, *words[1:])
        assert result.returncode == 0, (command, result.stderr[-2000:])
        assert "(auto: no platform's directories here)" in result.stdout
        assert (project / "output" / "hparams.json").is_file()
        assert not Path("/model").exists()
        (project / "output").rename(project / f"output-{number}")


@pytest.mark.slow
def test_gen_new_next_line_trains_right_after_the_quickstart(tmp_path: Path) -> None:
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "generator",
            "new",
            "demo",
            "--no-input",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    command = made.stdout.splitlines()[-1].removeprefix("next: ")
    assert f"PYTHON={sys.executable}" in command or "pip install" not in command
    project = tmp_path / "demo"
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("\nepoch_size: 12\n", "\nepoch_size: 1\n"))
    # What tools/quickstart.sh does next: a run into output/quickstart.
    quick = subprocess.run(
        ["bash", "scripts/run_1p.sh", "--output", "output/quickstart"],
        cwd=project,
        env=runs.clean_env(PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert quick.returncode == 0, quick.stderr[-2000:]
    env = {k: v for k, v in runs.clean_env().items() if k != "PYTHON"}
    nxt = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert nxt.returncode == 0, nxt.stderr[-2000:]
    assert (project / "output" / "hparams.json").is_file()


INTERRUPTED = """
import json, sys
from pathlib import Path
from src.scaffold.outputs.tensorboard import EventWriter
output, step = Path(sys.argv[1]), int(sys.argv[2])
# What an attempt killed in its second epoch leaves: steps after the checkpoint's.
writer = EventWriter(output / "tensorboard")
with (output / "metrics.jsonl").open("a") as lines:
    for n in (step + 1, step + 2):
        writer.scalars(n, {"train/loss": 9.0})
        lines.write(json.dumps({"run": "x", "type": "step", "epoch": 2, "step": n, "loss": 9.0}))
        lines.write("\\n")
writer.close()
"""


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_resume_keeps_every_attempt_and_each_step_once(framework: str, tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    project = fresh(tmp_path, framework)
    data = write_images(tmp_path / "bugs", ("ant", "bee"), count=20)
    output = tmp_path / "out"
    common = ("--data_url", str(data), "--model", "mlp", "--batch_size", "4", "--log_every", "1")
    first = train(project, output, *common, "--epoch_size", "1", "--lr", "0.01")
    assert first.returncode == 0, first.stderr[-2000:]
    step = max(row["step"] for row in runs.metrics(output))
    cut = runs.run(project, "-c", INTERRUPTED, str(output), str(step))
    assert cut.returncode == 0, cut.stderr
    again = train(project, output, *common, "--epoch_size", "2", "--lr", "0.02", "--resume", "auto")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "are not loaded" not in again.stdout + again.stderr  # MindSpore's resume warning

    hparams = json.loads((output / "hparams.json").read_text())
    assert [attempt["lr"] for attempt in hparams["attempts"]] == [0.01, 0.02]
    assert hparams["lr"] == 0.02 and hparams["resolved"]["classes"] == ["ant", "bee"]
    rows = runs.metrics(output)
    assert [(r["type"], r["epoch"]) for r in rows if r["type"] == "test"] == [
        ("test", 1),
        ("test", 2),
    ]
    assert all(r["loss"] != 9.0 for r in rows)  # the interrupted attempt's steps went
    board = EventAccumulator(str(output / "tensorboard"))
    board.Reload()
    steps = [event.step for event in board.Scalars("train/loss")]
    assert len(steps) == len(set(steps)) and all(
        e.value != 9.0 for e in board.Scalars("train/loss")
    )
    assert max(steps) == max(r["step"] for r in rows)

    # Every checkpoint says which output is which class, and how inputs were normalised.
    code = (
        "import json, sys; from pathlib import Path; "
        "from src.scaffold.backend.core import read_meta; "
        "print(json.dumps(read_meta(Path(sys.argv[1]))))"
    )
    checkpoint = output / f"mlp_epoch2{runs.SUFFIX[framework]}"
    meta = runs.run(project, "-c", code, str(checkpoint))
    assert meta.returncode == 0, meta.stderr[-2000:]
    read = json.loads(meta.stdout.splitlines()[-1])
    assert read["classes"] == ["ant", "bee"] and read["model_name"] == "mlp"
    assert read["data_shape"] == [1, 16, 16] and len(read["data_mean"]) == 1
    # hparams.json rounds to 6 decimals, the checkpoint keeps the float: 5e-7 apart at most.
    assert read["data_mean"] == pytest.approx(hparams["resolved"]["data_mean"], abs=1e-6)


def bare_python(root: Path) -> Path:
    """A Python with what train.py needs but the framework: numpy and PyYAML, linked from
    this one's site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    import numpy
    import yaml

    linked = root / "linked"
    linked.mkdir()
    for module in (numpy, yaml):
        package = Path(module.__file__).parent
        os.symlink(package, linked / package.name)
    libs = Path(numpy.__file__).parent.parent / "numpy.libs"  # numpy's own shared objects
    if libs.exists():
        os.symlink(libs, linked / "numpy.libs")
    site = next((root / "lib").glob("python3*/site-packages"))
    (site / "linked.pth").write_text(str(linked) + "\n")
    return root / "bin" / "python"


@pytest.mark.slow
def test_the_launchers_check_the_python_the_cores_and_say_a_ranks_error(
    tmp_path: Path, pytorch_project: Path
) -> None:
    python = bare_python(tmp_path / "bare")
    env = runs.clean_env(PYTHON=str(python))
    launch = ["bash", "scripts/run_8p.sh", "--nproc", "2", "--output", str(tmp_path / "a")]
    result = subprocess.run(
        [*launch, "--", "--smoke"],
        cwd=pytorch_project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: this Python ({python}) has no torch, which train.py imports: pip install -r "
        "requirements.txt into it, or name the Python that has it with PYTHON=..."
    )
    assert not (tmp_path / "a").exists()

    note = runs.run(
        pytorch_project,
        "-m",
        "src.scaffold.run.preflight",
        "--train_url",
        str(tmp_path / "b"),
        env=runs.clean_env(TRAIN_RANKS="64", TRAIN_NODES="1"),
    )
    assert note.returncode == 0, note.stderr
    assert re.fullmatch(
        r"note: 64 ranks on \d+ CPU cores and no GPU or NPU here: each step trains a global "
        r"batch of 64 x 32 = 2048 samples, .*",
        note.stdout.strip(),
    ), note.stdout

    failed = subprocess.run(
        ["bash", "scripts/run_8p.sh", "--nproc", "2", "--output", str(tmp_path / "c"), "--"]
        + ["--smoke", "--model", "nope"],
        cwd=pytorch_project,
        env=runs.clean_env(PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert failed.returncode != 0
    # The launcher's own line (its log's last lines follow it, indented).
    said = next(line for line in failed.stderr.splitlines() if line.startswith("error: rank"))
    assert re.match(
        r"error: rank \d exited with status 2: unknown model 'nope'; src/model\.py has lenet", said
    )
