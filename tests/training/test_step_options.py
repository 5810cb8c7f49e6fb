"""The training step is the researcher's (PyTorch: src/step.py's train_step), and the
options of a Trainer: accumulate and clip_grad_norm; each README recipe applied as written.

Real training of the shipped digits on the CPU, in copies of the session's PyTorch project.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.training import runs

pytestmark = pytest.mark.slow
QUIET = ("--no_tensorboard", "--epoch_size", "1")


def copy(project: Path, dest: Path) -> Path:
    return Path(shutil.copytree(project, dest, ignore=shutil.ignore_patterns("output")))


def floor(project: Path) -> dict[str, str]:
    """Every file of the platform floor, by its SHA-256."""
    return {
        str(p.relative_to(project)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((project / "src" / "scaffold").rglob("*.py"))
    }


@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_accumulating_4_batches_of_8_makes_the_weights_of_batches_of_32(
    pytorch_project: Path, mindspore_projects: dict[str, Path], framework: str, tmp_path: Path
) -> None:
    project = pytorch_project if framework == "pytorch" else mindspore_projects["custom"]
    # The same samples make each optimizer step (the epoch's order is cut into global
    # batches: 4 of 8 are one of 32), at the same learning rate: the cosine schedule counts
    # optimizer steps, so the lr of step k is the same in both runs.
    cosine = ("--schedule_name", "cosine", *QUIET)
    whole = runs.train(
        project, tmp_path / "b32", "--batch_size", "32", "--max_steps", "10", *cosine
    )
    parts = runs.train(
        project,
        tmp_path / "b8x4",
        "--batch_size",
        "8",
        "--accumulate",
        "4",
        "--max_steps",
        "40",
        *cosine,
    )
    plain = runs.train(project, tmp_path / "b8", "--batch_size", "8", "--max_steps", "40", *cosine)
    want = runs.weights(runs.checkpoint(whole, 1, framework))
    got = runs.weights(runs.checkpoint(parts, 1, framework))
    other = runs.weights(runs.checkpoint(plain, 1, framework))
    # LeNet has no batch statistics, so only the order of float32 sums differs (a mean of
    # 4 means of 8 against one mean of 32): about 1e-7 relative on each gradient, over 10
    # steps at lr <= 0.01 on weights of order 0.1, far below 1e-6 (seen: 1.5e-8); 4x as
    # many steps of batch 8 move the weights by more than 1e-3 (the assertion can fail).
    assert got.keys() == want.keys()
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-6, err_msg=name)
    assert max(np.abs(other[name] - want[name]).max() for name in want) > 1e-3


# src/step.py's optimizer, recording the global gradient norm each step() is given.
SEEN_NORMS = """

import json as _json
import os as _os


class _Seen(torch.optim.SGD):
    def step(self, closure=None):
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        with open(_os.environ["SEEN_NORMS"], "a") as seen:
            seen.write(_json.dumps(norm.item()) + "\\n")
        return super().step(closure)


def optimizer(params, lr, momentum):
    return _Seen(params, lr=lr, momentum=momentum)
"""


def test_clip_grad_norm_bounds_the_norm_the_optimizer_sees(
    pytorch_project: Path, tmp_path: Path
) -> None:
    project = copy(pytorch_project, tmp_path / "project")
    step = project / "src" / "step.py"
    step.write_text(step.read_text(encoding="utf-8") + SEEN_NORMS, encoding="utf-8")
    norms = {}
    for name, extra in (("free", ()), ("clipped", ("--clip_grad_norm", "0.5"))):
        seen = tmp_path / f"{name}.jsonl"
        env = runs.clean_env(SEEN_NORMS=str(seen))
        # lr 0.1: steps large enough that many gradients exceed 0.5 unclipped.
        runs.train(
            project, tmp_path / name, "--max_steps", "30", "--lr", "0.1", *QUIET, *extra, env=env
        )
        norms[name] = [float(line) for line in seen.read_text().splitlines()]
    assert len(norms["free"]) == len(norms["clipped"]) == 30
    assert max(norms["free"]) > 0.5  # without the option the bound does not hold
    # clip_grad_norm_ scales by 0.5 / (norm + 1e-6): at most 0.5; the norm is computed
    # again in float32 by the test, a relative 1e-5 above at most.
    assert max(norms["clipped"]) <= 0.5 * (1 + 1e-5)


def recipes(readme: str) -> list[str]:
    """The python blocks of the README's Recipes part."""
    part = readme.split("### Recipes", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", part, re.S)


def apply(step: Path, block: str) -> None:
    """Write a recipe where the README says: its imports at the top (after the file's own),
    its other lines before the function, the function in place of the one of its name."""
    text = step.read_text(encoding="utf-8")
    tree = ast.parse(block)
    lines = block.splitlines()
    imports = [
        ast.get_source_segment(block, n)
        for n in tree.body
        if isinstance(n, ast.Import | ast.ImportFrom)
    ]
    (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    others = [
        ast.get_source_segment(block, n)
        for n in tree.body
        if not isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef)
    ]
    source = "\n".join(lines[function.lineno - 1 : function.end_lineno])
    own = ast.parse(text)
    (old,) = [n for n in own.body if isinstance(n, ast.FunctionDef) and n.name == function.name]
    last_import = max(n.end_lineno for n in own.body if isinstance(n, ast.Import | ast.ImportFrom))
    have = text.splitlines()
    new = (
        have[:last_import]
        + imports
        + have[last_import : old.lineno - 1]
        + [*others, "", ""] * bool(others)
        + source.splitlines()
        + have[old.end_lineno :]
    )
    step.write_text("\n".join(new) + "\n", encoding="utf-8")


@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_each_readme_recipe_written_where_it_says_trains_and_leaves_the_floor_alone(
    pytorch_project: Path, mindspore_projects: dict[str, Path], framework: str, tmp_path: Path
) -> None:
    source = pytorch_project if framework == "pytorch" else mindspore_projects["custom"]
    readme = (source / "README.md").read_text(encoding="utf-8")
    blocks = recipes(readme)
    part = readme.split("### Recipes", 1)[1].split("\n## ", 1)[0]
    settings = re.findall(r"`((?:accumulate|clip_grad_norm): [\d.]+)`", part)
    if framework == "pytorch":  # a second loss term, an EMA, another optimizer
        assert (len(blocks), settings) == (3, ["accumulate: 4", "clip_grad_norm: 1.0"])
    else:  # a second loss term, an EMA, another optimizer
        assert (len(blocks), settings) == (3, ["accumulate: 4", "clip_grad_norm: 1.0"])
    before = floor(source)
    # Each block in a project of its own; the two settings together in one more.
    for index, change in enumerate([*blocks, "\n".join(settings)]):
        project = copy(source, tmp_path / f"recipe{index}")
        if index == len(blocks):
            config = project / "config.yaml"
            for setting in settings:
                key = setting.split(":")[0]
                text = config.read_text(encoding="utf-8")
                text = re.sub(rf"^{key}: .*$", setting, text, flags=re.M)
                config.write_text(text, encoding="utf-8")
                assert setting in config.read_text(encoding="utf-8")
        else:
            apply(project / "src" / "step.py", change)
        # Two optimizer steps run the recipe's code as every step would (its loss, EMA or
        # optimizer; accumulate's 4 batches a step): the epoch's 40 add nothing checked here.
        output = runs.train(project, tmp_path / f"out{index}", "--max_steps", "2", *QUIET)
        assert [row["epoch"] for row in runs.epoch_rows(output) if row["type"] == "val"] == [1]
        assert floor(project) == before, change
        if framework == "mindspore" and "ema" in change:
            # The averaged weights are in the checkpoint, one for each weight.
            saved = runs.weights(runs.checkpoint(output, 1, framework))
            averaged = [name for name in saved if name.startswith("ema.")]
            assert averaged and all(name[4:] in saved for name in averaged)


def test_mindspore_custom_loop_clips_each_step_to_clip_grad_norm(
    mindspore_projects: dict[str, Path], tmp_path: Path
) -> None:
    # Momentum 0: a step moves the weights by lr x the clipped gradient, so the second
    # step's move (the run of 2 steps against the run of 1, same seed) is lr x its norm.
    project = mindspore_projects["custom"]
    plain = ("--momentum", "0", "--lr", "0.01", "--clip_grad_norm", "0.05", *QUIET)
    one = runs.train(project, tmp_path / "one", "--max_steps", "1", *plain)
    two = runs.train(project, tmp_path / "two", "--max_steps", "2", *plain)
    before = runs.weights(runs.checkpoint(one, 1, "mindspore"))
    after = runs.weights(runs.checkpoint(two, 1, "mindspore"))
    # The network's weights: not the optimizer's moments nor its step count.
    model = [n for n in before if not n.startswith(("moments.", "global_step", "learning_rate"))]
    moved = np.sqrt(sum(float(((after[n] - before[n]) ** 2).sum()) for n in model))
    # LeNet's raw gradient norm on the digits is of order 1, far above 0.05: clipped, the
    # move is exactly 0.01 x 0.05 but for float32 rounding (about 1e-6 relative, seen 2e-6);
    # unclipped it would be some 20 times larger.
    assert abs(moved - 0.01 * 0.05) <= 1e-4 * 0.01 * 0.05, moved
    # Model.train's step does not clip: one line, before anything is written.
    refused = runs.run(
        mindspore_projects["model"],
        "train.py",
        "--device_target",
        "cpu",
        "--clip_grad_norm",
        "0.05",
        "--train_url",
        str(tmp_path / "model"),
    )
    runs.assert_one_line_exit_2(
        refused,
        "error: clip_grad_norm 0.05 needs the custom training loop: Model.train's step "
        "neither accumulates nor clips, and resumes at an epoch's start only (gen update "
        "--set ms_train_loop=custom switches this project's loop)",
    )
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_early_stop_says_why_in_the_log_and_the_record(
    pytorch_project: Path, mindspore_projects: dict[str, Path], framework: str, tmp_path: Path
) -> None:
    project = pytorch_project if framework == "pytorch" else mindspore_projects["model"]
    quiet = ("--no_tensorboard", "--epoch_size", "5")
    # A learning rate too small to change a prediction: the accuracy of epoch 1 is never
    # beaten, so patience 2 stops the run after epoch 3, whatever the machine. --smoke's
    # epochs (2 steps, a fixed random validation batch) suffice: no accuracy moves at 1e-12.
    patient = runs.run(
        project,
        "train.py",
        "--device_target",
        "cpu",
        "--train_url",
        str(tmp_path / "flat"),
        "--lr",
        "1e-12",
        "--early_stop_patience",
        "2",
        "--smoke",
        *quiet,
    )
    reason = "val accuracy has not improved on "
    assert f"early stop after epoch 3: {reason}" in runs.ok(patient)
    rows = runs.epoch_rows(tmp_path / "flat")
    assert [r["epoch"] for r in rows if r["type"] == "val"] == [1, 2, 3]
    (stop,) = [r for r in rows if r["type"] == "stop"]
    assert stop["epoch"] == 3 and stop["reason"].startswith(reason)
    assert stop["reason"].endswith("for 2 validations (early_stop.patience 2)")
    suffix = runs.SUFFIX[framework]
    assert rows[-1]["type"] == "test" and rows[-1]["checkpoint"] == f"lenet_epoch3{suffix}"
    # A threshold below what the first epochs reach: the run stops at the first epoch
    # whose validation reaches it, and says so. validate_every 15 validates at every 15th
    # step of the run as well as at each epoch's end (40 steps an epoch: once where they
    # meet, as at step 120); early_stop reads the epochs' own.
    every = ("--early_stop_threshold", "0.3", "--validate_every", "15")
    reached = runs.train(project, tmp_path / "reached", *every, *quiet)
    rows = runs.epoch_rows(reached)
    (stop,) = [r for r in rows if r["type"] == "stop"]
    steps = [r["step"] for r in rows if r["type"] == "val"]
    end = 40 * stop["epoch"]
    assert steps == sorted({*range(15, end, 15), *range(40, end + 1, 40)})
    scores = [r["accuracy"] for r in rows if r["type"] == "val" and r["step"] % 40 == 0]
    assert scores[-1] >= 0.3 > max(scores[:-1], default=0) and len(scores) < 5
    assert stop["reason"] == f"val accuracy {scores[-1]:.4g} reached early_stop.threshold 0.3"
