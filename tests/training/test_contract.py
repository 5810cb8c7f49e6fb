"""The researcher's files are theirs: what a new user does to them, in both frameworks, from a
fresh project. The demo model renamed and replaced by the README's own, the accuracy metric
renamed and monitored: training and the project's own checks follow. A regression step (MSE
on a numeric CSV column, monitored by the validation loss, min) trains, keeps its best
checkpoint, and `gen report` plots it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.render.project import render
from tests.training import runs
from tests.training.test_byo import fresh, readme_section

FRAMEWORKS = ["pytorch", "mindspore"]
# Other combinations than the training tests' generic projects, whose own checks run here
# too: OpenI paths and Ascend extras; ModelArts paths, both targets, the custom loop.
COMBINATIONS = {
    "pytorch": {"target": "ascend", "platform": "openi"},
    "mindspore": {"target": "both", "platform": "modelarts", "ms_train_loop": "custom"},
}


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    """Replace ``old`` (found exactly ``count`` times) in a file, as a person would."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == count, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_renamed_model_and_metric_train_and_the_checks_pass(framework: str, tmp_path: Path) -> None:
    options = Options(project="mine", framework=framework, **COMBINATIONS[framework])
    project = render(options, tmp_path / "a")  # type: ignore[arg-type]
    # The README's own-model steps: its model appended to src/model.py, named in config.yaml.
    section = readme_section(project, "Bring your own model and data")
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    with open(project / "src" / "model.py", "a", encoding="utf-8") as model_file:
        model_file.write("\n\n" + code)
    edit(project / "config.yaml", "\nmodel: lenet\n", "\nmodel: mynet\n")
    # No model is called lenet any more: nothing may depend on the demo's name.
    edit(project / "src" / "model.py", '@model("lenet"', '@model("lenet5"')
    # The accuracy metric renamed, and monitored under its new name.
    edit(project / "src" / "step.py", '"accuracy":', '"acc":')
    edit(project / "config.yaml", "  metric: accuracy\n", "  metric: acc\n")

    data = str(project / "data")  # the platform's default path is not on this host
    # Two steps of epoch 1 train the renamed model and score the renamed metric as the
    # epoch's 40 would: its validation, test, checkpoint and pointer are written the same.
    args = ("--data_url", data, "--epoch_size", "1", "--max_steps", "2")
    output = runs.train(project, tmp_path / "out", *args)
    suffix = runs.SUFFIX[framework]
    pointer = json.loads((output / "latest.json").read_text())
    assert pointer["best"] == pointer["latest"] == f"mynet_epoch1{suffix}"
    assert pointer["monitor"] == {"metric": "acc", "mode": "max"}
    val, test = [r for r in runs.epoch_rows(output) if r["type"] in ("val", "test")]
    assert {"loss", "acc"} <= val.keys() & test.keys() and "accuracy" not in val

    checks = runs.run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", timeout=900)
    assert checks.returncode == 0, checks.stdout[-4000:] + checks.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_regression_step_trains_keeps_its_best_and_is_reported(
    framework: str, tmp_path: Path, table_dir: Path
) -> None:
    project = fresh(tmp_path, framework, "a")
    # The README's regression step replaces loss and metrics in src/step.py.
    section = readme_section(project, "Bring your own model and data")
    block = section[section.index("**Your metric, or a number to predict.**") :]
    code = re.search(r"```python\n(.*?)```", block, re.S).group(1)
    step = project / "src" / "step.py"
    text = step.read_text(encoding="utf-8")
    kept = re.sub(r"\ndef (loss|metrics)\(.*?(?=\ndef |\Z)", "\n", text, flags=re.S)
    step.write_text(kept.rstrip() + "\n\n\n" + code, encoding="utf-8")
    edit(project / "config.yaml", "  labels: classes\n", "  labels: values\n")
    edit(
        project / "config.yaml",
        "  metric: accuracy\n  mode: max\n",
        "  metric: loss\n  mode: min\n",
    )

    output = runs.train(
        project,
        tmp_path / "out",
        "--data_url",
        str(table_dir),
        "--model",
        "mlp",
        "--epoch_size",
        "2",
        "--lr",
        "0.001",
    )
    hparams = json.loads((output / "hparams.json").read_text())
    assert hparams["resolved"]["num_classes"] == 1  # one output: the value
    val = [r for r in runs.epoch_rows(output) if r["type"] == "val"]
    assert [sorted(r.keys() - {"run", "type", "epoch", "step", "time"}) for r in val] == [
        ["loss"],
        ["loss"],
    ]
    # The digits' values are 0..9: a variance of about 8.25. Two epochs of SGD on 64
    # normalised features bring the squared error well under it.
    assert val[-1]["loss"] < 8.25, val
    pointer = json.loads((output / "latest.json").read_text())
    best = min(pointer["scores"], key=pointer["scores"].get)
    assert pointer["best"] == best and (output / best).is_file()
    assert pointer["scores"][best] == min(r["loss"] for r in val)

    summary = runs.report(output, tmp_path / "report")
    assert "val loss" in summary and "accuracy" not in summary
    assert (tmp_path / "report" / "report.png").stat().st_size > 0
