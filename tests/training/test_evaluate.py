"""eval.py scores a run's checkpoint again: the run's own final test metrics reproduced
exactly from its last checkpoint (same weights, same data), in both frameworks; a resumed
run and a platform run (obs://, through the storage code the run used); bad input is one
line and writes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.training import runs
from tests.training.test_platform import bucket  # noqa: F401 (the stand-in OBS fixture)

SCORES = ("loss", "accuracy")


def scored(result) -> dict[str, float]:
    """eval.py's lines, 'test loss 0.123456', as {name: value}."""
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    pairs = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("test ")]
    return {name: float(value) for name, value in pairs}


def evaluate(project: Path, *args: str, env: dict | None = None):
    return runs.run(project, "eval.py", "--device_target", "cpu", *args, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytorch", "model"])
def test_eval_of_the_last_checkpoint_is_the_runs_own_test_and_is_recorded(
    pytorch_project: Path, mindspore_projects: dict, tmp_path: Path, name: str
) -> None:
    project = pytorch_project if name == "pytorch" else mindspore_projects[name]
    # 2 steps: the run's test and eval.py score the same checkpoint with the same code.
    output = runs.train(project, tmp_path / "out", "--epoch_size", "1", "--max_steps", "2")
    (test,) = [row for row in runs.metrics(output) if row["type"] == "test"]
    result = evaluate(project, "--train_url", str(output), "--checkpoint", "last")
    lines = scored(result)
    # Printed to 6 decimals; the recorded row holds the same numbers as the run's, exactly.
    assert lines == {key: pytest.approx(test[key], abs=5e-7) for key in SCORES}
    (row,) = [row for row in runs.metrics(output) if row["type"] == "eval"]
    assert {key: row[key] for key in SCORES} == {key: test[key] for key in SCORES}
    assert (row["split"], row["epoch"], row["step"]) == ("test", 1, test["step"])


@pytest.mark.slow
def test_eval_of_a_resumed_run_scores_its_last_epoch(pytorch_project: Path, tmp_path: Path) -> None:
    output = runs.train(pytorch_project, tmp_path / "out", "--epoch_size", "1")
    runs.train(pytorch_project, output, "--epoch_size", "2", "--resume", "auto")
    last_test = [row for row in runs.metrics(output) if row["type"] == "test"][-1]
    result = evaluate(pytorch_project, "--train_url", str(output), "--checkpoint", "last")
    row = runs.metrics(output)[-1]
    assert row["type"] == "eval" and row["epoch"] == 2 and scored(result)
    assert {key: row[key] for key in SCORES} == {key: last_test[key] for key in SCORES}


@pytest.mark.slow
def test_eval_of_a_platform_run_reads_its_obs_outputs(
    pytorch_project: Path,
    tmp_path: Path,
    bucket: dict,  # noqa: F811
) -> None:
    env = runs.clean_env(**bucket)
    urls = ("--data_url", "obs://bucket/digits", "--train_url", "obs://bucket/out")
    trained = runs.run(
        pytorch_project, "train.py", "--device_target", "cpu", *urls, "--epoch_size", "1", env=env
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    remote = Path(bucket["FAKE_OBS_ROOT"]) / "bucket" / "out"
    (test,) = [row for row in runs.metrics(remote) if row["type"] == "test"]
    # Another node: its cache holds nothing of the run.
    shutil.rmtree(bucket["TRAIN_CACHE_DIR"])
    result = evaluate(pytorch_project, *urls, env=env)
    assert scored(result) == {key: pytest.approx(test[key], abs=5e-7) for key in SCORES}
    # With one epoch the best checkpoint is the last: the eval row went back to the bucket.
    assert runs.metrics(remote)[-1]["type"] == "eval"


@pytest.mark.slow
def test_bad_input_is_one_line_and_writes_nothing(pytorch_project: Path, tmp_path: Path) -> None:
    output = runs.train(pytorch_project, tmp_path / "out", "--epoch_size", "1", "--max_steps", "2")
    before = (output / "metrics.jsonl").read_bytes()
    foreign = tmp_path / "foreign.pt"
    foreign.write_bytes(b"not a checkpoint")
    cases = [
        (("--checkpoint", str(tmp_path / "none.pt")), f"error: --checkpoint {tmp_path}/none.pt"),
        (
            ("--checkpoint", str(foreign)),
            f"error: --checkpoint {foreign} is not a PyTorch checkpoint",
        ),
        (("--split", "train"), "error: argument --split: 'train' is not one of test, val"),
        (
            ("--train_url", str(tmp_path / "empty")),
            f"error: {tmp_path}/empty does not exist: give the run's --train_url, or --checkpoint",
        ),
    ]
    for args, expected in cases:
        argv = ["--train_url", str(output), *args]
        runs.assert_one_line_exit_2(evaluate(pytorch_project, *argv), expected)
        assert (output / "metrics.jsonl").read_bytes() == before, args
