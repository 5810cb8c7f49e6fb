"""shard: full (FSDP2) on CPU ranks over gloo: the language model and the classifier trained
sharded; a 2-rank sharded checkpoint resumed on 1 rank, that one's on 4; eval.py, predict.py
and export.py reading the shards; bad input, one line each."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from generator.render.options import Options
from tests.conftest import render_once
from tests.training import runs

# The demo's model made small (test_lm.py's), on the first 56 KiB of the shipped text: 896
# windows of 64 bytes, 5% held out for validation and 5% for the test, 25 steps of 32 an epoch.
# A constant lr: a run that stops at max_steps steps as the uninterrupted one does (a cosine's
# curve is the run's length).
BLOCK = 64
TINY = ("--model_args", "layers=2,heads=2,width=64", "--data_block_size", str(BLOCK))
ARGS = (*TINY, "--schedule_name", "constant", "--log_every", "1", "--epoch_size", "3")
STEPS = 25  # an epoch's
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")
TEXT = 28 * 32 * BLOCK + BLOCK  # bytes
# Ranks that train as one process does differ by the order their gradients are summed in:
# the epochs' mean train and val losses of the resumed runs agree with the uninterrupted run's
# to 5e-7 and 3e-6 here. A resume that loses the optimizer's state, or reads another batch
# order or schedule, is off by 5e-2 at its first step (seen while this was written): 1e-4.
LOSS_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_once(
        tmp_path_factory, Options("shard_lm", "pytorch", platform="generic", task="lm")
    )


@pytest.fixture(scope="module")
def text(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("text")
    shipped = (project / "data" / "pydoc-topics.txt").read_bytes()
    (data / "head.txt").write_bytes(shipped[:TEXT])
    return data


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return runs.clean_env(TRAIN_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def sharded(project: Path, text: Path, env: dict, tmp_path_factory) -> Path:
    """Two ranks, sharded, 3 epochs of 16 windows a rank: the run the others are held to."""
    output = tmp_path_factory.mktemp("sharded")
    args = (*ARGS, "--data_url", str(text), "--batch_size", "16", "--shard", "full")
    return runs.torchrun_train(project, output, *args, env=env)


def losses(output: Path, kind: str) -> dict[int, float]:
    """The ``kind`` rows' losses (train, val: by epoch; step: by step) of a run."""
    key = "step" if kind == "step" else "epoch"
    return {row[key]: row["loss"] for row in runs.metrics(output) if row["type"] == kind}


@pytest.mark.slow
def test_a_two_rank_checkpoint_resumes_on_one_rank_and_that_ones_on_four(
    project: Path, text: Path, env: dict, sharded: Path, tmp_path: Path
) -> None:
    data = ("--data_url", str(text), "--shard", "full")
    one, four = tmp_path / "one", tmp_path / "four"
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(one), *ARGS, *data)
    resume = ("--resume", str(sharded / "gpt_epoch1.pt"), "--max_steps", str(2 * STEPS))
    said = runs.ok(runs.run(project, *argv, "--batch_size", "32", *resume, env=env))
    assert "shard: full with one rank: it trains unsharded" in said
    resume = ("--resume", str(one / "gpt_epoch2.pt"), "--max_steps", str(3 * STEPS))
    runs.torchrun_train(project, four, *ARGS, *data, "--batch_size", "8", *resume, env=env, ranks=4)
    for output, epoch in ((one, 2), (four, 3)):
        for kind in ("train", "val"):
            got, expected = losses(output, kind), losses(sharded, kind)
            assert max(got) == epoch, got  # (a resumed run's record holds the earlier rows)
            assert got[epoch] == pytest.approx(expected[epoch], abs=LOSS_TOLERANCE), kind
    # A shard a rank: 2, then 1, then 4.
    for output, name, count in ((sharded, 1, 2), (one, 2, 1), (four, 3, 4)):
        files = sorted(p.name for p in (output / f"gpt_epoch{name}.shards").iterdir())
        assert files == [".metadata", *(f"__{rank}_0.distcp" for rank in range(count))]


@pytest.mark.slow
def test_the_first_50_steps_sharded_are_ddps(
    project: Path, text: Path, env: dict, sharded: Path, tmp_path: Path
) -> None:
    """The same seed, data and ranks, DDP's whole copies against FSDP2's shards: rank 0's loss
    at each step. FSDP2 averages gradients by reduce-scatter where DDP all-reduces: with 2
    ranks over gloo both add the same two halves, and the 50 losses agree exactly here; another
    backend or more ranks may sum in another order (1e-7 a step, which AdamW's steps of 2e-3
    carry on), within 1e-4, where one step of another batch moves the loss by 1e-2."""
    args = (*ARGS, "--data_url", str(text), "--batch_size", "16", "--max_steps", "50")
    ddp = runs.torchrun_train(project, tmp_path / "ddp", *args, env=env)
    got, expected = losses(sharded, "step"), losses(ddp, "step")
    assert sorted(expected) == list(range(1, 51))
    for step in expected:
        assert got[step] == pytest.approx(expected[step], abs=LOSS_TOLERANCE), step


@pytest.mark.slow
def test_eval_predict_and_export_read_the_shards(
    project: Path, text: Path, env: dict, sharded: Path, tmp_path: Path
) -> None:
    where = ("--train_url", str(sharded), "--data_url", str(text))
    scored = runs.ok(runs.run(project, "eval.py", *where, "--split", "val", env=env))
    # The same model on the same windows in one process: the training's last validation,
    # in another summation order (one process's threads, not a rank's): 1e-5 relative.
    val = float(scored.split("val loss ")[1].split()[0])
    assert val == pytest.approx(losses(sharded, "val")[3], rel=1e-5)
    said = runs.ok(
        runs.run(project, "predict.py", *where, "--prompt", "The ", "--max_new_tokens", "8")
    )
    assert said.strip()
    single = tmp_path / "single.pt"
    runs.ok(
        runs.run(project, "export.py", *where, "--format", "checkpoint", "--output", str(single))
    )
    # The shards gathered by torch's own converter (runs.weights): the export's, bit for bit.
    runs.assert_same_weights(single, sharded / "gpt_epoch3.pt")
    got = torch.load(single, weights_only=True)
    assert (got["epoch"], got["model_name"], got["data_shape"]) == (3, "gpt", [BLOCK])
    # The single file scores as the shards do; it is not a checkpoint to resume from.
    again = runs.ok(
        runs.run(project, "eval.py", "--checkpoint", str(single), *where[2:], *TINY[2:], env=env)
    )
    assert again.split("val loss")[0] and "test loss" in again
    refused = runs.run(
        project, "train.py", *TINY, "--resume", str(single), "--train_url", str(tmp_path)
    )
    runs.assert_one_line_exit_2(refused, "holds weights only", f"--pretrained {single}")


@pytest.mark.slow
def test_a_missing_shard_is_one_line_and_auto_resumes_before_it(
    project: Path, text: Path, env: dict, sharded: Path, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    shutil.copytree(sharded, output)
    (output / "gpt_epoch3.shards" / "__1_0.distcp").unlink()
    data = ("--data_url", str(text), "--device_target", "cpu")
    given = runs.run(project, "train.py", *data, "--resume", str(output / "gpt_epoch3.pt"), env=env)
    runs.assert_one_line_exit_2(
        given, "gpt_epoch3.pt is damaged (its shard gpt_epoch3.shards/__1_0.distcp is missing)"
    )
    # Its epoch 3 again, on one process (the record's batch was a rank's: 32 is the same steps).
    more = ("--batch_size", "32", "--train_url", str(output))
    said = runs.ok(runs.run(project, "train.py", *data, "--resume", "auto", *more, env=env))
    assert "resuming from gpt_epoch2.pt, the newest intact" in said
    # The record holds epoch 3 once: this run's (a resumed run's record is cut back to its start).
    trained = [row for row in runs.metrics(output) if row["type"] == "train"]
    assert [row["epoch"] for row in trained] == [1, 2, 3]
    assert trained[-1]["loss"] == pytest.approx(losses(sharded, "train")[3], abs=LOSS_TOLERANCE)
    # The damaged one replaced by one process's: a shard.
    files = sorted(p.name for p in (output / "gpt_epoch3.shards").iterdir())
    assert files == [".metadata", "__0_0.distcp"]


@pytest.mark.slow
def test_the_classifier_trains_sharded_as_one_process(
    pytorch_project: Path, digits_dir: Path, tmp_path: Path
) -> None:
    """LeNet names no blocks: sharded whole, with the WARNING; its epoch on 2 ranks of 16 is
    one process's of 32 to float32 summation order (test_pytorch_project.py's 1e-5)."""
    args = ("--data_url", str(digits_dir), "--epoch_size", "1")
    two = tmp_path / "two"
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(two), *args)
    said = runs.ok(
        runs.run(pytorch_project, *TORCHRUN, *argv, "--batch_size", "16", "--shard", "full")
    )
    assert "model lenet names no blocks: it is sharded whole" in said
    one = runs.train(pytorch_project, tmp_path / "one", *args, "--batch_size", "32")
    runs.assert_same_weights(two / "lenet_epoch1.pt", one / "lenet_epoch1.pt", 1e-5)
    # The same weights score the same test samples alike (one epoch of LeNet: about 0.23).
    (test,), (alone,) = ([r for r in runs.metrics(o) if r["type"] == "test"] for o in (two, one))
    assert test["accuracy"] == pytest.approx(alone["accuracy"], abs=0.01)
    hparams = json.loads((two / "hparams.json").read_text())
    assert hparams["resolved"]["shard"] == "full"


def test_a_mindspore_run_sharded_on_the_cpu_is_one_line(
    mindspore_projects: dict[str, Path], tmp_path: Path
) -> None:
    refused = runs.run(
        mindspore_projects["custom"],
        *("train.py", "--shard", "full", "--device_target", "cpu"),
        *("--train_url", str(tmp_path / "out")),
    )
    runs.assert_one_line_exit_2(refused, "needs Ascend or GPU", "--shard none")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_activation_checkpointing_trains_the_same_steps(
    project: Path, text: Path, env: dict, sharded: Path, tmp_path: Path
) -> None:
    """Each block's activations recomputed in the backward pass: the same operations on the
    same values, so the same gradients; the first 10 steps' losses are the sharded run's."""
    args = (*ARGS, "--data_url", str(text), "--batch_size", "16", "--shard", "full")
    args += ("--activation_checkpointing", "true", "--max_steps", "10")
    output = runs.torchrun_train(project, tmp_path / "recomputed", *args, env=env)
    got, expected = losses(output, "step"), losses(sharded, "step")
    assert [got[step] for step in range(1, 11)] == [expected[step] for step in range(1, 11)]
    hparams = json.loads((output / "hparams.json").read_text())
    assert hparams["shard_activation_checkpointing"] is True


@pytest.mark.slow
def test_sigterm_saves_every_ranks_shards_at_one_step_and_the_rerun_continues(
    project: Path, text: Path, env: dict, sharded: Path, tmp_path: Path
) -> None:
    """A preemption of a sharded run: the ranks, signalled apiece by torchrun, agree on one step,
    save their shards of it together and stop; the same command continues from that step and
    ends as the uninterrupted run does."""
    output = tmp_path / "out"
    argv = [*TORCHRUN, "train.py", "--device_target", "cpu", "--train_url", str(output)]
    argv += [*ARGS, "--data_url", str(text), "--batch_size", "16", "--shard", "full"]
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=project,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # 5 steps into epoch 2 (rank 0's progress line)
        if f" step {STEPS + 5}/{3 * STEPS} " in line:
            proc.send_signal(signal.SIGTERM)
            break
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode != 0, stdout[-2000:]
    steps = re.findall(r"stopped by SIGTERM: the checkpoint at step (\d+) is saved", stdout)
    assert len(steps) == 2 and steps[0] == steps[1], stdout[-3000:] + stderr[-3000:]
    latest = json.loads((output / "latest.json").read_text())["latest"]
    assert latest == f"gpt_epoch2_step{steps[0]}.pt"
    shards = sorted(p.name for p in (output / f"gpt_epoch2_step{steps[0]}.shards").iterdir())
    assert shards == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    again = runs.run(project, *argv, "--resume", "auto", env=env)
    assert f"resumed from {output / latest}" in runs.ok(again)
    for kind in ("train", "val"):
        got = losses(output, kind)[3]
        assert got == pytest.approx(losses(sharded, kind)[3], abs=LOSS_TOLERANCE), kind


@pytest.mark.slow
def test_a_steps_options_sharded_are_ddps(
    project: Path, text: Path, env: dict, tmp_path: Path
) -> None:
    """accumulate (2 batches a step), clip_grad_norm (over the sharded gradients: their norm
    gathered), validate_every and checkpoint_every, sharded and DDP on the same 2 ranks: rank
    0's losses and the validations agree (summation order, as the 50 steps above)."""
    args = (*ARGS, "--data_url", str(text), "--batch_size", "8", "--accumulate", "2")
    args += ("--clip_grad_norm", "0.5", "--validate_every", "4", "--checkpoint_every", "6")
    args += ("--max_steps", "24")
    ddp = runs.torchrun_train(project, tmp_path / "ddp", *args, env=env)
    sharded = runs.torchrun_train(project, tmp_path / "sharded", *args, "--shard", "full", env=env)
    for kind in ("step", "val"):
        got, expected = (
            [(r["step"], r["loss"]) for r in runs.metrics(o) if r["type"] == kind]
            for o in (sharded, ddp)
        )
        assert [step for step, _ in got] == [step for step, _ in expected], kind
        for (step, value), (_, wanted) in zip(got, expected, strict=True):
            assert value == pytest.approx(wanted, abs=LOSS_TOLERANCE), (kind, step)
    vals = [row["step"] for row in runs.metrics(sharded) if row["type"] == "val"]
    assert vals[:3] == [8, 16, 24]  # every 4 optimizer steps of 2 batches


@pytest.mark.slow
def test_bfloat16_sharded_keeps_float32_weights(
    project: Path, text: Path, env: dict, tmp_path: Path
) -> None:
    """amp (true here; auto on accelerators): blocks compute in bfloat16, reduce in float32,
    and the weights kept, checkpointed and hashed at the end are float32, the same on both."""
    args = (*ARGS, "--data_url", str(text), "--batch_size", "16", "--shard", "full")
    output = tmp_path / "bf16"
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output), *args)
    said = runs.ok(runs.run(project, *TORCHRUN, *argv, "--amp", "true", "--max_steps", "8"))
    digests = set(re.findall(r"finished, parameters ([0-9a-f]{16})", said))
    assert len(digests) == 1 and said.count("finished, parameters") == 2, said[-2000:]
    resolved = json.loads((output / "hparams.json").read_text())["resolved"]
    assert resolved["amp"] == "bfloat16"
    weights = runs.weights(output / "gpt_epoch1.pt")
    assert {value.dtype.name for value in weights.values()} == {"float32"}


# A MindSpore checkpoint as optimizer parallel on 2 ranks writes it (NPUs and GPUs only): each
# rank's slices (the first axis halved where 2 divides it), the strategy MindSpore saves (its
# JSON form), written by shards.save on two threads standing in for the ranks.
SPLIT = """
import json, sys, threading
from pathlib import Path
import mindspore as ms
from src.scaffold.backend import saved, shards
whole, path = Path(sys.argv[1]), Path(sys.argv[2])
params = ms.load_checkpoint(str(whole))
arrays = {k: v.asnumpy() for k, v in params.items() if k not in saved.BOOKKEEPING}
append = {k: v if isinstance(v, str) else int(v.asnumpy())
          for k, v in params.items() if k in saved.BOOKKEEPING}
halved = {k for k, a in arrays.items() if a.ndim and a.shape[0] % 2 == 0}
layout = {k: {"dev_matrix": [2], "tensor_map": [-1] * a.ndim, "field": 0,
              "opt_weight_shard_size": 2 if k in halved else 0,
              "opt_weight_shard_step": 1 if k in halved else 0} for k, a in arrays.items()}
strategy = path.with_name("strategy.json")
strategy.write_text(json.dumps({"parallel_layout_item": layout}))
barrier = threading.Barrier(2).wait
def rank(r):
    entries = [{"name": k, "data": ms.Tensor(a[r * len(a) // 2:(r + 1) * len(a) // 2]
                if k in halved else a)} for k, a in arrays.items()]
    shards.save(path, entries, append, strategy, (r, 2), barrier, 0)
threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
[t.start() for t in threads]; [t.join() for t in threads]
print(len(halved), "of", len(arrays), "halved")
"""


@pytest.mark.slow
def test_a_mindspore_sharded_checkpoint_is_read_whole_by_eval_and_resume(
    mindspore_projects: dict[str, Path], tmp_path: Path
) -> None:
    """MindSpore merges the slices back (ms.transform_checkpoints): eval.py scores the sharded
    checkpoint as the whole one, and a run resumed from either ends with the same weights."""
    project = mindspore_projects["custom"]
    first = runs.train(project, tmp_path / "first", "--epoch_size", "1", "--max_steps", "3")
    whole = first / "lenet_epoch1.ckpt"
    sharded = tmp_path / "split" / "lenet_epoch1.ckpt"
    sharded.parent.mkdir()
    said = runs.ok(runs.run(project, "-c", SPLIT, str(whole), str(sharded)))
    assert " halved" in said and not said.startswith("0 ")
    files = sorted(p.name for p in (tmp_path / "split" / "lenet_epoch1.shards").iterdir())
    assert files == ["rank_0.ckpt", "rank_1.ckpt", "strategy.json"]
    scores = [
        runs.ok(runs.run(project, "eval.py", "--train_url", str(first), "--checkpoint", str(path)))
        for path in (whole, sharded)
    ]
    tests = [[line for line in text.splitlines() if line.startswith("test ")] for text in scores]
    assert tests[0] and tests[0] == tests[1]
    ends = []
    for name, path in (("from_whole", whole), ("from_shards", sharded)):
        args = ("--epoch_size", "1", "--max_steps", "6", "--resume", str(path))
        output = runs.train(project, tmp_path / name, *args)
        (test,) = [row for row in runs.metrics(output) if row["type"] == "test"]
        ends.append({key: test[key] for key in ("step", "loss", "accuracy")})
    # The same weights and optimizer state resumed at step 3, the same 3 steps on: the same
    # test scores, exactly.
    assert ends[0]["step"] == 6 and ends[0] == ends[1]
