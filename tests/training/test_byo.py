"""Bring your own model and data, as a researcher does it from a freshly generated project:
the model the README shows, added the documented way, trained on an ImageFolder of RGB
PNGs; the shipped mlp on a CSV table; the files changed are the ones the README names."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.render.project import render
from tests.training import byo, runs

# Enough for 0.9 on the validation split with margin: PyTorch's mynet reaches 0.90 after 4
# epochs, 0.92 after 5; MindSpore's 0.96 after 2 (the runs are seeded: the same every time),
# so 2 epochs keep 0.06 of margin there.
EPOCHS = {"pytorch": 6, "mindspore": 2}
# One epoch at lr 0.5 (seeded: the same every run) takes the validation loss a character from
# ln(96) = 4.56, chance, to 2.39 (PyTorch) and 3.18 (MindSpore): 3.6 keeps 0.4 of margin. The
# sums divided by the samples instead of the characters would give 32 times the loss.
SEQUENCE_LOSS = 3.6


def readme_section(project: Path, title: str) -> str:
    text = (project / "README.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def where_to_change(project: Path) -> dict[str, str]:
    """The README's "Where to change what" table: what to change -> the one file to edit."""
    rows = re.findall(
        r"^\| ([^|]+?) \| `([^`]+)`", readme_section(project, "Where to change what"), re.M
    )
    return dict(rows)


def changed_files(project: Path, pristine: Path) -> set[str]:
    """Files added, removed or edited, relative to the project, outputs and caches aside."""

    def files(root: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.parts[len(root.parts)] != "output"
        }

    mine, theirs = files(project), files(pristine)
    return {name for name in mine.keys() | theirs.keys() if mine.get(name) != theirs.get(name)}


def fresh(tmp_path: Path, framework: str, name: str) -> Path:
    options = Options(project="mine", framework=framework, platform="generic")
    return render(options, tmp_path / name)


def val_accuracy(output: Path) -> float:
    return [m for m in runs.metrics(output) if m["type"] == "val"][-1]["accuracy"]


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_your_model_on_your_images(framework: str, tmp_path: Path, imagefolder: Path) -> None:
    project, pristine = fresh(tmp_path, framework, "a"), fresh(tmp_path, framework, "b")
    section = readme_section(project, "Bring your own model and data")
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    with open(project / "src" / "model.py", "a", encoding="utf-8") as model_file:
        model_file.write("\n\n" + code)
    config = project / "config.yaml"
    text = config.read_text(encoding="utf-8")
    assert text.count("\nmodel: lenet\n") == 1
    config.write_text(text.replace("\nmodel: lenet\n", "\nmodel: mynet\n"), encoding="utf-8")
    # The code users copy is as clean as ours.
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "src/model.py"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout

    output = runs.train(
        project,
        tmp_path / "out",
        "--data_url",
        str(imagefolder),
        "--epoch_size",
        str(EPOCHS[framework]),
    )
    assert val_accuracy(output) >= 0.9, runs.metrics(output)
    hparams = json.loads((output / "hparams.json").read_text())
    resolved = hparams["resolved"]
    assert resolved["model"] == "mynet" and resolved["data_format"] == "imagefolder"
    assert resolved["data_shape"] == [3, 32, 32] and resolved["num_classes"] == 10
    suffix = runs.SUFFIX[framework]
    assert (output / f"mynet_epoch{EPOCHS[framework]}{suffix}").is_file()

    # --smoke keeps working: in the shipped data's shape (1x28x28 here), and without data
    # in the model's declared input shape (3x32x32).
    for data, shape in (("data", "1x28x28"), (str(tmp_path / "none"), "3x32x32")):
        smoke = runs.run(
            project,
            "train.py",
            "--smoke",
            "--device_target",
            "cpu",
            "--data_url",
            data,
            "--train_url",
            str(tmp_path / f"smoke-{shape}"),
        )
        assert smoke.returncode == 0, smoke.stdout[-2000:] + smoke.stderr[-2000:]
        assert f"smoke run: random samples of {shape}" in smoke.stdout

    table = where_to_change(project)
    assert changed_files(project, pristine) == {
        table["the model"],
        table["which model and data, hyper-parameters"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_mlp_on_your_table(framework: str, tmp_path: Path, table_dir: Path) -> None:
    project = fresh(tmp_path, framework, "a")
    output = runs.train(
        project,
        tmp_path / "out",
        "--data_url",
        str(table_dir),
        "--model",
        "mlp",
        "--epoch_size",
        "5",
    )
    assert val_accuracy(output) >= 0.9, runs.metrics(output)
    hparams = json.loads((output / "hparams.json").read_text())
    resolved = hparams["resolved"]
    assert (resolved["data_format"], resolved["model"]) == ("csv", "mlp")
    assert resolved["data_shape"] == [64]


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_your_sequence_model(framework: str, tmp_path: Path) -> None:
    """A character-level GRU language model in a classification project, the README's way:
    a reader in src/data.py, the model in src/model.py, the README's step in src/step.py. It
    trains, evaluates, predicts and exports with the floor (src/scaffold/) as rendered."""
    project, pristine = fresh(tmp_path, framework, "a"), fresh(tmp_path, framework, "b")
    section = readme_section(project, "Bring your own model and data")
    step = re.search(r"\*\*A model of sequences\*\*.*?```python\n(.*?)```", section, re.S)
    code = {"data": byo.CHAR_READER, "model": byo.CHAR_MODEL[framework], "step": step.group(1)}
    for name, text in code.items():
        with open(project / "src" / f"{name}.py", "a", encoding="utf-8") as source:
            source.write("\n\n" + text)
    text = byo.write_text(tmp_path / "text")
    flags = ("--data_url", str(text), "--model", "chargru", "--device_target", "cpu")
    flags += ("--monitor_metric", "loss", "--monitor_mode", "min")
    # The model's width from --model_args: recorded, and taken by eval, predict and export.
    train = ("--epoch_size", "1", "--lr", "0.5", "--model_args", "width=48")
    output = runs.train(project, tmp_path / "out", *flags, *train)
    val = [m for m in runs.metrics(output) if m["type"] == "val"][-1]
    assert val["loss"] < SEQUENCE_LOSS, val
    assert val["perplexity"] == math.exp(val["loss"])  # derived from the same float
    hparams = json.loads((output / "hparams.json").read_text())
    resolved = hparams["resolved"]
    assert (resolved["data_format"], resolved["num_classes"]) == ("chars", 96)
    assert resolved["data_shape"] == [byo.BLOCK] and resolved["data_mean"] == []
    assert hparams["model_args"] == {"width": 48}

    if framework == "pytorch":  # the report reads the record alone: one framework suffices
        summary = runs.report(output, tmp_path / "r")
        assert "val loss (min)" in summary and "accuracy" not in summary

    at = ("--train_url", str(output), *flags)
    scored = runs.run(project, "eval.py", *at, "--split", "val")
    assert scored.returncode == 0, scored.stderr[-2000:]
    evaluated = [m for m in runs.metrics(output) if m["type"] == "eval"][-1]
    assert (evaluated["loss"], evaluated["perplexity"]) == (val["loss"], val["perplexity"])
    # The floor as rendered: only the three files the README names were edited.
    assert changed_files(project, pristine) == {"src/data.py", "src/model.py", "src/step.py"}

    # Ids to predict on, as a CSV row each: the most likely character at each position.
    (tmp_path / "ids.csv").write_text(
        ",".join(f"p{i}" for i in range(byo.BLOCK)) + "\n" + ",".join(["5"] * byo.BLOCK) + "\n"
    )
    rows = tmp_path / "rows.jsonl"
    predicted = runs.run(
        project, "predict.py", *at, str(tmp_path / "ids.csv"), "--output", str(rows)
    )
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    (row,) = [json.loads(line) for line in rows.read_text().splitlines()]
    vocabulary = set(text.joinpath("text.txt").read_text(encoding="utf-8"))
    assert len(row["classes"]) == byo.BLOCK and set(row["classes"]) <= vocabulary

    # Text from a prompt, a character at a time, by the run's own tokenizer: the same text for
    # the same seed; a prompt longer than the block is cut to its last 32 characters, said so.
    prompt = ("--prompt", "The class " * 4, "--max_new_tokens", "40", "--top_k", "10")
    written = [
        runs.run(project, "predict.py", *at, *prompt, "--output", str(tmp_path / f"{n}.jsonl"))
        for n in (1, 2)
    ]
    assert written[0].returncode == 0, written[0].stderr[-2000:]
    assert "WARNING: a prompt of 40 tokens is longer than the model's block of 32" in (
        written[0].stderr
    )
    (first,) = [json.loads(line) for line in (tmp_path / "1.jsonl").read_text().splitlines()]
    assert len(first["text"]) == 40 and set(first["text"]) <= vocabulary
    assert (tmp_path / "1.jsonl").read_bytes() == (tmp_path / "2.jsonl").read_bytes()
    unknown = runs.run(project, "predict.py", *at, "--prompt", "caf\u00e9")
    runs.assert_one_line_exit_2(unknown, "error: the text holds '\u00e9', not among the 96 char")

    fmt = {"pytorch": "onnx", "mindspore": "MINDIR"}[framework]
    model_file = tmp_path / f"lm.{fmt.lower()}"
    # A checkpoint apart from its run's record: it records the model_args itself.
    alone = tmp_path / "alone" / f"chargru_epoch1{runs.SUFFIX[framework]}"
    alone.parent.mkdir()
    shutil.copy2(output / alone.name, alone)
    at_alone = ("--checkpoint", str(alone), *flags, "--format", fmt)
    exported = runs.run(project, "export.py", *at_alone, "--output", str(model_file))
    assert exported.returncode == 0, exported.stderr[-2000:]
    sidecar = json.loads(model_file.with_name(model_file.name + ".json").read_text())
    assert sidecar["input"]["dtype"] == "int64" and sidecar["input"]["shape"] == [1, byo.BLOCK]
    assert sidecar["output"]["shape"] == [1, byo.BLOCK, 96]
    # ONNX takes sequences of any length up to the block (checked on half of it too).
    assert sidecar["input"]["dynamic_sequence"] is (framework == "pytorch")

    step_file = project / "src" / "step.py"
    kept = step_file.read_text(encoding="utf-8")
    for code, expected in byo.STEP_MISTAKES[framework]:
        step_file.write_text(kept + code, encoding="utf-8")
        result = runs.run(project, "train.py", *flags, "--train_url", str(tmp_path / "bad"))
        runs.assert_one_line_exit_2(result, expected)
    step_file.write_text(kept, encoding="utf-8")
    result = runs.run(project, "train.py", *flags, "--model_args", "depth=2")
    runs.assert_one_line_exit_2(result, "error: model_args depth: model chargru (src/model.py:")
    assert result.stderr.rstrip().endswith(") takes width")

    if framework == "mindspore":  # its ONNX export has no GRU: one line (after its WARNING)
        onnx_file = tmp_path / "lm.onnx"
        at_onnx = ("--checkpoint", str(alone), *flags, "--format", "ONNX")
        refused = runs.run(project, "export.py", *at_onnx, "--output", str(onnx_file))
        last = refused.stderr.splitlines()[-1]
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert last.startswith("error: mindspore cannot write model chargru as ONNX: "), last
        assert last.endswith("(try --format MINDIR, AIR)") and not onnx_file.exists()

    # --smoke: random ids below the data's largest, labels a position, as the data has them.
    smoke = runs.run(project, "train.py", *flags, "--smoke", "--train_url", str(tmp_path / "s"))
    assert smoke.returncode == 0, smoke.stdout[-2000:] + smoke.stderr[-2000:]
