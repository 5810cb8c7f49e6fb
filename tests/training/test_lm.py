"""`gen new --task lm`: a small GPT on the shipped text, in both frameworks, as users run it:
train, evaluate, generate from a prompt, export; two ranks; bad text, one line each."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.shipped.report import metric_names
from generator.shipped.report_runs import load_run
from tests.conftest import render_once
from tests.training import runs

FRAMEWORKS = ("pytorch", "mindspore")
# A model small enough for a test (the shipped one is 4 layers of width 128, context 128).
BLOCK = 64
TINY = ("--model_args", "layers=2,heads=2,width=64", "--data_block_size", str(BLOCK))
# One epoch of the shipped text (204 steps of 32 windows of 64 bytes) takes the validation loss a
# byte from ln 256 = 5.55, chance, to 2.36 (PyTorch) and 2.34 (MindSpore); the runs are seeded,
# the same every time, so 2.7 keeps a margin of 0.34.
LM_LOSS = 2.7
EXPORT = {"pytorch": "onnx", "mindspore": "MINDIR"}
# 12 AdamW steps, the gradients of 2 ranks averaged in another order than one process sums
# them: the weights agree to 7.5e-9 here (the token embeddings, either framework); a batch
# read in another order moves them by about the learning rate (2e-3) a step.
ATOL_TWO_RANKS = 1e-5


@pytest.fixture(scope="module")
def lm_projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A language-model project per framework, generic machine, rendered once, shared read-only."""
    return {
        framework: render_once(
            tmp_path_factory,
            Options(f"lm_{framework}", framework, platform="generic", task="lm"),
        )
        for framework in FRAMEWORKS
    }


def cached(tmp_path: Path) -> dict[str, str]:
    """The environment of a run whose tokens go to a cache of the test's own."""
    return runs.clean_env(TRAIN_CACHE_DIR=str(tmp_path / "cache"))


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_shipped_language_model_trains_evaluates_generates_and_exports(
    framework: str, lm_projects: dict[str, Path], tmp_path: Path
) -> None:
    project, env = lm_projects[framework], cached(tmp_path)
    # The README's commands, which this test runs with the flags of a smaller model.
    readme = (project / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## A language model\n", 1)[1].split("\n## ", 1)[0]
    for command in (
        "bash scripts/run_1p.sh",
        "python eval.py --split val",
        'python predict.py --prompt "The class " --max_new_tokens 200 --temperature 0.8',
        f"python export.py --format {EXPORT[framework]}",
    ):
        assert f"\n{command}" in section, command
    output = runs.train(project, tmp_path / "out", *TINY, "--epoch_size", "1", env=env)
    val = [m for m in runs.metrics(output) if m["type"] == "val"][-1]
    assert val["loss"] < LM_LOSS, val
    assert val["perplexity"] == math.exp(val["loss"])  # derived from the same float
    resolved = json.loads((output / "hparams.json").read_text())["resolved"]
    assert (resolved["data_format"], resolved["num_classes"]) == ("text", 256)
    assert resolved["data_shape"] == [BLOCK]
    # Tokenized once, into the cache: the text's bytes, one a token.
    (tokens,) = (tmp_path / "cache" / "tokens").glob("*.bin")
    assert tokens.stat().st_size == len((project / "data" / "pydoc-topics.txt").read_bytes())

    if framework == "pytorch":  # the report reads the record alone: one framework suffices
        summary = runs.report(output, tmp_path / "report")
        assert "val loss (min)" in summary and "accuracy" not in summary, summary
        # The loss panel's curves, and the metrics panel's: the perplexity alone.
        assert metric_names(load_run(output)) == ["perplexity"]

    at = ("--train_url", str(output), "--device_target", "cpu")
    scored = runs.run(project, "eval.py", *at, "--split", "val", env=env)
    assert scored.returncode == 0, scored.stderr[-2000:]
    evaluated = [m for m in runs.metrics(output) if m["type"] == "eval"][-1]
    assert (evaluated["loss"], evaluated["perplexity"]) == (val["loss"], val["perplexity"])

    # The same text for the same seed; a prompt longer than the block is cut to its last
    # 64 bytes, with a WARNING.
    prompt = ("--prompt", "The class " * 8, "--max_new_tokens", "40", "--temperature", "0.8")
    written = [
        runs.run(
            project, "predict.py", *at, *prompt, "--output", str(tmp_path / f"{n}.jsonl"), env=env
        )
        for n in (1, 2)
    ]
    assert written[0].returncode == 0, written[0].stderr[-2000:]
    assert "WARNING: a prompt of 80 tokens is longer than the model's block of 64" in (
        written[0].stderr
    )
    (first,) = [json.loads(line) for line in (tmp_path / "1.jsonl").read_text().splitlines()]
    assert first["text"].strip() and first["prompt"] == "The class " * 8
    assert (tmp_path / "1.jsonl").read_bytes() == (tmp_path / "2.jsonl").read_bytes()

    fmt = EXPORT[framework]
    model_file = tmp_path / f"gpt.{fmt.lower()}"
    exported = runs.run(
        project, "export.py", *at, "--format", fmt, "--output", str(model_file), env=env
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert "outputs within" in exported.stdout, exported.stdout
    sidecar = json.loads(model_file.with_name(model_file.name + ".json").read_text())
    assert sidecar["input"]["dtype"] == "int64" and sidecar["input"]["shape"] == [1, BLOCK]
    assert sidecar["output"]["shape"] == [1, BLOCK, 256]
    assert sidecar["input"]["dynamic_sequence"] is (framework == "pytorch")


def write(root: Path, name: str, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.mark.slow
def test_bad_text_and_tokenizers_are_one_line_each(
    lm_projects: dict[str, Path], tmp_path: Path
) -> None:
    project, env = lm_projects["pytorch"], cached(tmp_path)
    cases = [
        (write(tmp_path / "empty", "empty.txt", ""), (), "holds no tokens"),
        (
            write(tmp_path / "short", "short.txt", "print('hello')\n" * 8),
            (),
            "the text holds 120 tokens: too few for a window of block_size 64 in each of train, "
            "val and test",
        ),
        (
            write(tmp_path / "jsonl", "docs.jsonl", '{"text": "a"}\n{"body": "b"}\n'),
            (),
            "docs.jsonl:2 has no text field 'text'",
        ),
        (
            tmp_path / "short",
            ("--data_tokenizer", str(write(tmp_path / "tok", "tokenizer.json", "{not json"))),
            "does not load as a tokenizer.json",
        ),
        (
            tmp_path / "short",
            ("--data_tokenizer", str(tmp_path / "empty")),
            "is a directory without tokenizer.json",
        ),
    ]
    for data, extra, expected in cases:
        args = ("train.py", "--device_target", "cpu", "--data_url", str(data), *TINY, *extra)
        result = runs.run(project, *args, "--train_url", str(tmp_path / "out"), env=env)
        runs.assert_one_line_exit_2(result, expected)
        assert not (tmp_path / "out" / "hparams.json").exists()


@pytest.mark.slow
def test_a_tokenizer_json_tokenizes_the_text_and_travels_with_the_checkpoint(
    lm_projects: dict[str, Path], tmp_path: Path
) -> None:
    """A BPE tokenizer trained here (the tokenizers library, as a Hugging Face tokenizer
    directory holds it): the run's vocabulary is its, and predict.py encodes and decodes with
    it from the checkpoint alone, the directory gone."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    project, env = lm_projects["pytorch"], cached(tmp_path)
    text = (project / "data" / "pydoc-topics.txt").read_text(encoding="utf-8")
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]"])
    tokenizer.train_from_iterator([text[i : i + 4096] for i in range(0, len(text), 4096)], trainer)
    directory = tmp_path / "hf-tokenizer"
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))
    size = tokenizer.get_vocab_size()

    flags = ("--data_tokenizer", str(directory), "--max_steps", "3", *TINY)
    output = runs.train(project, tmp_path / "out", *flags, env=env)
    resolved = json.loads((output / "hparams.json").read_text())["resolved"]
    assert resolved["num_classes"] == size
    (tokens,) = (tmp_path / "cache" / "tokens").glob("*.bin")
    assert tokens.stat().st_size == 2 * len(tokenizer.encode(text).ids)  # uint16 ids

    alone = tmp_path / "alone" / "gpt_epoch1.pt"
    alone.parent.mkdir()
    alone.write_bytes((output / alone.name).read_bytes())
    for path in directory.iterdir():
        path.unlink()
    directory.rmdir()
    at = ("--checkpoint", str(alone), "--device_target", "cpu")
    prompt = ("--prompt", "def ", "--max_new_tokens", "5", "--temperature", "0")
    result = runs.run(project, "predict.py", *at, *prompt, "--output", str(tmp_path / "t.jsonl"))
    assert result.returncode == 0, result.stderr[-2000:]
    (row,) = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    # Five BPE tokens, decoded by the recorded tokenizer: text, not ids.
    assert row["text"] and tokenizer.encode(row["prompt"]).ids == tokenizer.encode("def ").ids


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_ranks_end_with_the_weights_of_one(
    framework: str, lm_projects: dict[str, Path], tmp_path: Path
) -> None:
    """torchrun's or msrun's 2 ranks of 16 windows a step: the weights of one process of 32,
    as the classifier's runs; the ranks, racing, tokenized the text once, into one cache."""
    project, steps = lm_projects[framework], (*TINY, "--max_steps", "12")
    alone = runs.clean_env(TRAIN_CACHE_DIR=str(tmp_path / "cache-one"))
    single = runs.train(project, tmp_path / "one", *steps, "--batch_size", "32", env=alone)
    launch = runs.torchrun_train if framework == "pytorch" else runs.two_workers
    two = launch(project, tmp_path / "two", *steps, "--batch_size", "16", env=cached(tmp_path))
    name = f"gpt_epoch1{runs.SUFFIX[framework]}"
    runs.assert_same_weights(two / name, single / name, ATOL_TWO_RANKS)
    assert len(list((tmp_path / "cache" / "tokens").glob("*.bin"))) == 1


MEMORY = Path("/sys/fs/cgroup/memory")  # cgroup v1's memory controller (this machine's)
# The run's memory: torchrun, its 2 ranks and their loader processes take up to 1.1 GiB of their
# own (memory.stat's total_rss, sampled through runs here) besides the pages of the text they map
# and write, which the kernel gives back under the limit (the tokens are synced to disk every 64
# MiB: at most 128 MiB dirty or being written). 1.75 GiB leaves 0.5 GiB; at 1.5 GiB, before the
# syncing, a run beside another (their writes slowing each other's) was killed by the limit.
LIMIT = 7 << 28  # 1.75 GiB
CORPUS = 2 << 30  # 2 GiB of text: more than the limit, tokenized and trained under it


def in_group(group: Path) -> None:
    """A child process's start: into ``group``, with all it starts after."""
    (group / "cgroup.procs").write_text(str(os.getpid()))


@pytest.mark.slow
def test_a_corpus_larger_than_the_memory_limit_trains(
    lm_projects: dict[str, Path], tmp_path: Path
) -> None:
    """The text, written and trained inside a memory cgroup of 1.75 GiB, is 2 GiB: torchrun's
    2 ranks race to tokenize it (once, into a memory map), read their windows of it, train 3
    steps and validate, the page cache of the map given back as they go."""
    group = MEMORY / f"train-template-lm-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(LIMIT))
        data = tmp_path / "data"
        data.mkdir()
        write = (
            "import os, sys\nfrom pydoc_data.topics import topics\n"
            "text = ''.join(topics[k] for k in sorted(topics)).encode()\n"
            "with open(sys.argv[1], 'wb') as out:\n"
            "    for _ in range(int(sys.argv[2]) // len(text) + 1):\n"
            "        out.write(text)\n"
            "    out.flush()\n"
            "    os.fsync(out.fileno())\n"
        )
        corpus = data / "big.txt"
        argv = [sys.executable, "-c", write, str(corpus), str(CORPUS)]
        subprocess.run(argv, check=True, preexec_fn=lambda: in_group(group), timeout=300)
        assert corpus.stat().st_size > CORPUS > LIMIT
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        args = ["--nproc_per_node", "2", "train.py", "--device_target", "cpu"]
        args += ["--data_url", str(data), "--train_url", str(tmp_path / "out"), "--max_steps", "3"]
        args += ["--model_args", "layers=1,heads=2,width=32", "--data_block_size", "512"]
        args += ["--val_fraction", "0.0005", "--data_test_fraction", "0.0005"]
        result = subprocess.run(
            [*launcher, *args],
            cwd=lm_projects["pytorch"],
            env=cached(tmp_path),
            capture_output=True,
            text=True,
            timeout=600,
            preexec_fn=lambda: in_group(group),
        )
        # Times the group reached its limit and the kernel took pages back: the limit held.
        reached = int((group / "memory.failcnt").read_text())
    finally:
        group.rmdir()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert reached > 0
    # Tokenized once, by whichever rank came first (the other waited): one map, a byte a token.
    (tokens,) = (tmp_path / "cache" / "tokens").glob("*.bin")
    assert tokens.stat().st_size == corpus.stat().st_size
    assert len(list((tmp_path / "cache" / "tokens").glob(".tokens-*.done"))) == 1
    assert "streamed from disk" in result.stdout
    rows = runs.metrics(tmp_path / "out")
    assert [r["step"] for r in rows if r["type"] == "val"] == [3]
    for large in (data, tmp_path / "cache"):  # 4 GiB: not kept with pytest's last runs
        shutil.rmtree(large)


# The project's own checks that follow its model and config (the rest are the floor's, which
# tests/training/test_contract.py runs in classifiers of both frameworks): the models take ids
# and score each position; a rerun is told from another run by the config's own options. (Its
# --smoke, resume and --pretrained checks take minutes with the shipped gpt on this CPU; the
# tests above train, resume-free, evaluate and load its checkpoints.)
OWN_CHECKS = ("checks/test_model.py", "checks/test_rundir.py")


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_projects_own_checks_pass(framework: str, lm_projects: dict[str, Path]) -> None:
    project = lm_projects[framework]
    checks = runs.run(
        project, "-m", "pytest", "-q", "-p", "no:cacheprovider", *OWN_CHECKS, timeout=900
    )
    assert checks.returncode == 0, checks.stdout[-3000:]
