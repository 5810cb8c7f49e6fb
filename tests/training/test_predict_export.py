"""After training, in both frameworks, for each shipped model and a researcher's own: eval.py
reproduces the run's own test numbers, predict.py labels the test images with the data's
class names (and its labels score what the run scored), and every export format loads back
and computes what the checkpoint does. Bad input to predict.py and export.py is one line,
a non-zero exit and nothing written."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from generator.render.options import Options
from generator.render.project import render
from tests.training import runs
from tests.training.byo import write_csv

# Folder names that are not digits: a row naming "zero" ... proves the names are used
# (in the order of the folders, sorted: the outputs are the classes in that order).
CLASSES = ("zero", "one", "two", "three")
SIZE = 16
FORMATS = {"pytorch": ("onnx", "torchscript"), "mindspore": ("MINDIR", "ONNX")}
SUFFIXES = {"onnx": ".onnx", "torchscript": ".torchscript", "MINDIR": ".mindir", "ONNX": ".onnx"}
MODELS = ("lenet", "mlp", "resnet", "mynet")


def own_model(source: str) -> str:
    """The example "your own model" of src/model.py's docstring, as printed there."""
    doc = ast.get_docstring(ast.parse(source)) or ""
    example = doc[doc.index('@model("mynet"') : doc.index("and in config.yaml")]
    return textwrap.dedent("    " + example.strip()) + "\n"


@pytest.fixture(scope="module")
def animals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four classes of the digits as 16x16 RGB PNGs in train/ and test/ folders named by
    word: zero/, one/, two/, three/."""
    from PIL import Image

    from tests.training.byo import _digits_rgb

    root = tmp_path_factory.mktemp("animals")
    for split, (images, labels) in _digits_rgb(SIZE).items():
        for index, (image, label) in enumerate(zip(images, labels, strict=True)):
            if label < len(CLASSES):
                folder = root / split / CLASSES[label]
                folder.mkdir(parents=True, exist_ok=True)
                Image.fromarray(image).save(folder / f"{index:04d}.png")
    return root


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A project per framework, with the example of src/model.py's docstring added to it
    (the README's "Bring your own model and data" shows the same)."""
    made = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        patch.delenv("COOKIECUTTER_CONFIG", raising=False)
        for framework, target in (("pytorch", "cuda"), ("mindspore", "ascend")):
            project = render(
                Options(f"infer_{framework}", framework, target, "generic"),
                tmp_path_factory.mktemp(framework),
            )
            model = project / "src" / "model.py"
            text = model.read_text(encoding="utf-8")
            model.write_text(f"{text}\n\n{own_model(text)}")
            made[framework] = project
    return made


@pytest.fixture(scope="module")
def trained(projects: dict[str, Path], animals: Path, tmp_path_factory):
    """``trained(framework, model)``: the output of a 1-epoch run on the animals, run once.

    Cut to 2 steps: what the tests compare is eval.py, predict.py and each export against
    the run's own checkpoint and test row (the same weights, however trained), and the
    errors of bad input; the epoch's other steps changed no assertion."""
    done: dict[tuple[str, str], Path] = {}

    def get(framework: str, model: str) -> Path:
        if (framework, model) not in done:
            output = tmp_path_factory.mktemp(f"{framework}-{model}")
            args = ("--data_url", str(animals), "--model", model, "--epoch_size", "1")
            args += ("--max_steps", "2")
            done[framework, model] = runs.train(projects[framework], output, *args)
        return done[framework, model]

    return get


def script(project: Path, name: str, output: Path, *args: str):
    return runs.run(project, name, "--device_target", "cpu", "--train_url", str(output), *args)


def files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("framework", FORMATS)
def test_each_model_evaluates_predicts_and_exports(
    projects: dict[str, Path], animals: Path, trained, framework: str, model: str
) -> None:
    project, output = projects[framework], trained(framework, model)
    (test,) = [row for row in runs.metrics(output) if row["type"] == "test"]

    # eval.py: the same checkpoint on the same data gives the run's own numbers, exactly.
    scored = script(project, "eval.py", output, "--checkpoint", "last")
    assert scored.returncode == 0, scored.stderr[-2000:]
    (row,) = [row for row in runs.metrics(output) if row["type"] == "eval"]
    assert {k: row[k] for k in ("loss", "accuracy")} == {k: test[k] for k in ("loss", "accuracy")}

    # predict.py: every test image labelled with a class name; read and normalised as the
    # run read them, the labels score the run's own test accuracy (the same logits).
    labels = output / "labels.jsonl"
    test_dir = animals / "test"
    args = ("--checkpoint", "last", "--output", str(labels), str(test_dir))
    labelled = script(project, "predict.py", output, *args)
    assert labelled.returncode == 0, labelled.stderr[-2000:]
    rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()]
    images = sorted(str(p) for p in test_dir.rglob("*.png"))
    assert [r["input"] for r in rows] == images
    assert {r["class"] for r in rows} <= set(CLASSES)
    for r in rows:
        assert [t["class"] for t in r["top_k"]][:1] == [r["class"]] and len(r["top_k"]) == 4
        assert sum(t["probability"] for t in r["top_k"]) == pytest.approx(1.0, abs=1e-5)
    right = sum(Path(r["input"]).parent.name == r["class"] for r in rows)
    # Counts of equal logits: the accuracy is the same fraction, to float rounding.
    assert right / len(rows) == pytest.approx(test["accuracy"], abs=1e-9)

    # export.py: each format written, loaded back and within the stated tolerance.
    for fmt in FORMATS[framework]:
        path = output / "export" / f"{model}{SUFFIXES[fmt]}"
        args = ("--checkpoint", "last", "--format", fmt, "--output", str(path))
        written = script(project, "export.py", output, *args)
        assert written.returncode == 0, written.stderr[-2000:]
        sidecar = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))
        parity = sidecar["parity"]
        assert parity["samples"] == 16
        assert parity["max_abs_diff"] <= parity["tolerance"] * parity["scale"]
        assert sidecar["classes"] == sorted(CLASSES) and sidecar["model_name"] == model
        assert sidecar["input"]["shape"] == [1, 3, SIZE, SIZE]
        print(f"{framework} {model} {fmt}: max |diff| {parity['max_abs_diff']:.2e}")


@pytest.mark.slow
def test_table_rows_are_predicted_by_column_name(projects: dict[str, Path], tmp_path: Path) -> None:
    project = projects["pytorch"]
    table = write_csv(tmp_path / "table")
    output = runs.train(project, tmp_path / "out", "--data_url", str(table), "--model", "mlp")
    # The columns in another order and without the label: the same rows, read by name.
    header, *lines = (table / "test.csv").read_text().splitlines()
    names = header.split(",")
    order = list(reversed(range(len(names) - 1)))
    shuffled = tmp_path / "rows.csv"
    shuffled.write_text(
        "\n".join(",".join(line.split(",")[i] for i in order) for line in [header, *lines]) + "\n"
    )
    result = script(project, "predict.py", output, "--top_k", "1", str(shuffled))
    assert result.returncode == 0, result.stderr[-2000:]
    printed = [line.split("\t") for line in result.stdout.splitlines()]
    assert [p[0] for p in printed] == [f"{shuffled}:{n}" for n in range(2, len(lines) + 2)]
    truth = [line.split(",")[-1] for line in lines]
    right = sum(p[1] == label for p, label in zip(printed, truth, strict=True))
    (test,) = [row for row in runs.metrics(output) if row["type"] == "test"]
    assert right / len(lines) == pytest.approx(test["accuracy"], abs=1e-9)

    # A table with other columns than the training data: one line naming it.
    other = tmp_path / "other.csv"
    other.write_text("f0,f1,extra\n1,2,3\n")
    runs.assert_one_line_exit_2(
        script(project, "predict.py", output, str(other)),
        f"error: {other} has other columns than the training data: lacks f2",
        "has extra that it had not",
    )


@pytest.mark.slow
@pytest.mark.parametrize("framework", FORMATS)
def test_bad_input_is_one_line_and_writes_nothing(
    projects: dict[str, Path], animals: Path, trained, framework: str, tmp_path: Path
) -> None:
    project, output = projects[framework], trained(framework, "lenet")
    before = files(output)
    image = next((animals / "test" / "one").iterdir())
    from PIL import Image

    larger = tmp_path / "larger.png"
    Image.new("RGB", (20, 18)).save(larger)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG not really")
    labels = tmp_path / "labels.jsonl"
    suffix = runs.SUFFIX[framework]
    # The model changed after training: the checkpoint no longer fits it.
    changed = tmp_path / "changed"
    shutil.copytree(project, changed, ignore=shutil.ignore_patterns("output", "__pycache__"))
    model = changed / "src" / "model.py"
    text = model.read_text(encoding="utf-8")
    assert text.count("120") == 3  # LeNet's first hidden layer: 100 units now, not 120
    model.write_text(text.replace("120", "100"))
    last = f"--checkpoint={output}/lenet_epoch1{suffix}"
    out = ("--output", str(labels))
    cases = [
        (project, "predict.py", (last, *out, str(larger)), "larger.png is 20x18 pixels"),
        (project, "predict.py", (last, *out, str(broken)), "broken.png cannot be read as an image"),
        (project, "predict.py", (last, *out, str(tmp_path / "no.png")), "no.png: no such file"),
        (project, "predict.py", ("--output", str(tmp_path / "l.txt"), str(image)), "write .jsonl"),
        (project, "predict.py", ("--checkpoint", f"{tmp_path}/none{suffix}", str(image)), "none"),
        (changed, "predict.py", (last, *out, str(image)), "was saved from another lenet than"),
        (changed, "export.py", (last, "--format", FORMATS[framework][0]), "from another lenet"),
        (project, "export.py", (last, "--format", "tflite"), "--format 'tflite' is not one of"),
    ]
    if framework == "mindspore":
        cases.append((project, "export.py", (last, "--format", "air"), "AIR needs an Ascend"))
    for where, name, args, expected in cases:
        result = script(where, name, output, *args)
        runs.assert_one_line_exit_2(result, expected)
        assert not labels.exists() and not (where / "export").exists(), (name, args)
        assert files(output) == before, (name, args)
    # The same input, well formed, through the one-device launcher: it works, so the
    # failures above were the input's.
    launcher = ("scripts/run_1p.sh", "--entry", "predict.py", "--output", str(output), "--")
    good = subprocess.run(
        [*launcher, last, *out, "--device_target", "cpu", str(image)],
        cwd=project,
        env=runs.clean_env(PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert good.returncode == 0 and labels.is_file(), good.stderr[-2000:]
    assert np.isfinite(json.loads(labels.read_text())["probability"])


@pytest.mark.slow
def test_the_atc_command_comes_from_the_sidecar_and_the_chip(
    projects: dict[str, Path], trained, tmp_path: Path
) -> None:
    project, output = projects["mindspore"], trained("mindspore", "lenet")
    model = tmp_path / "lenet.onnx"
    args = ("--checkpoint", "last", "--format", "ONNX", "--output", str(model))
    written = script(project, "export.py", output, *args)
    assert written.returncode == 0, written.stderr[-2000:]
    sidecar = model.with_name("lenet.onnx.json")
    name = json.loads(sidecar.read_text())["input"]["name"]
    # npu-smi as a 910B2C server prints it (tests/data/doctor): its chip's name wins.
    tools = tmp_path / "bin"
    tools.mkdir()
    table = Path(__file__).resolve().parents[1] / "data" / "doctor" / "npu-smi-info-910b.txt"
    (tools / "npu-smi").write_text(f"#!/bin/sh\ncat '{table}'\n")
    (tools / "npu-smi").chmod(0o755)
    expected = (
        f"atc --model={model} --framework=5 --output={tmp_path / 'lenet'} "
        f"--input_shape={name}:1,3,16,16 --input_format=NCHW --soc_version="
    )
    # Away from the server: the project's chip's usual name, said to be that.
    atc = runs.run(project, "scripts/atc.py", str(model))
    assert atc.returncode == 0 and atc.stdout == expected + "Ascend910B3\n", atc.stderr
    assert atc.stderr.startswith("note: no npu-smi here: --soc_version=Ascend910B3 is")
    on_server = runs.run(project, "scripts/atc.py", str(model), env=path_first(tools))
    assert on_server.stdout == expected + "Ascend910B2C\n", on_server.stderr
    # On the server without CANN's toolkit, --run says what to install.
    runs.assert_one_line_exit_2(
        runs.run(project, "scripts/atc.py", str(model), "--run", env=path_first(tools)),
        "error: atc is not on PATH: install CANN's toolkit",
    )
    # What the script checks without a device: the sidecar is there, and agrees.
    meta = json.loads(sidecar.read_text())
    meta["input"]["shape"][0] = 2
    sidecar.write_text(json.dumps(meta))
    runs.assert_one_line_exit_2(
        runs.run(project, "scripts/atc.py", str(model)),
        f"error: {model} takes [1, 3, 16, 16], its sidecar says [2, 3, 16, 16]; export again",
    )
    sidecar.unlink()
    runs.assert_one_line_exit_2(
        runs.run(project, "scripts/atc.py", str(model)), f"error: {sidecar}: no such file"
    )


def path_first(folder: Path) -> dict[str, str]:
    env = runs.clean_env()
    return env | {"PATH": f"{folder}:{env['PATH']}"}
