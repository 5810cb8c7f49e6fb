"""init_from: a tiny Hugging Face causal language model made here (transformers' LlamaConfig,
random weights, save_pretrained, a byte-level BPE tokenizer trained on the shipped text: no
download), fine-tuned with LoRA by a language-model project, exported merged and as adapters,
loaded back by transformers; sharded with LoRA on 2 ranks; bad input, one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from generator.render.options import Options
from tests.conftest import render_once
from tests.training import runs

WIDTH, LAYERS = 32, 2  # hidden size (2 heads of 16), decoder layers
RANK = 4
# LoRA on q_proj and v_proj (32 -> 32 each) of 2 layers: 4 matrices of rank x (in + out).
TRAINABLE = 2 * LAYERS * RANK * (WIDTH + WIDTH)
ARGS = ("--data_block_size", "64", "--epoch_size", "1", "--log_every", "1")
LORA = ("--lora_rank", str(RANK), "--lora_target_modules", "q_proj,v_proj", "--lr", "0.01")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_once(tmp_path_factory, Options("hf_lm", "pytorch", platform="generic", task="lm"))


@pytest.fixture(scope="module")
def text(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 KiB of the shipped text: about 90 windows of 64 tokens of the BPE below."""
    data = tmp_path_factory.mktemp("text")
    shipped = (project / "data" / "pydoc-topics.txt").read_bytes()
    (data / "head.txt").write_bytes(shipped[: 24 << 10])
    return data


@pytest.fixture(scope="module")
def tiny(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Llama of 2 layers of width 32 and its tokenizer (320 ids), as save_pretrained writes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = tmp_path_factory.mktemp("tiny-llama")
    text = (project / "data" / "pydoc-topics.txt").read_text(encoding="utf-8")[:200_000]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=320, initial_alphabet=alphabet, show_progress=False)
    tokenizer.train_from_iterator([text], trainer)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=WIDTH,
        intermediate_size=2 * WIDTH,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(directory)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return runs.clean_env(TRAIN_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))


@pytest.mark.slow
def test_lora_trains_the_adapters_alone_and_the_merged_export_is_the_trained_model(
    project: Path, text: Path, tiny: Path, env: dict, tmp_path: Path
) -> None:
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoModelForCausalLM

    output = tmp_path / "out"
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output), *ARGS, *LORA)
    more = ("--init_from", str(tiny), "--data_url", str(text), "--batch_size", "4")
    said = runs.ok(runs.run(project, *argv, *more, "--max_steps", "20", env=env))
    assert f"lora: rank {RANK} on 4 matrices: {TRAINABLE:,} trainable parameters" in said
    assert f"(rank x (in + out) each: {TRAINABLE:,})" in said
    # The checkpoint holds the adapters alone: init_from holds the rest.
    state = torch.load(output / "llama_epoch1.pt", weights_only=True)
    assert state["model"] and all(".lora_" in name for name in state["model"]), list(state["model"])
    assert state["init_from"] == str(tiny) and state["tokenizer"]["kind"] != "bytes"
    where = ("--train_url", str(output), "--data_url", str(text))
    merged, adapters = tmp_path / "merged.hf", tmp_path / "lora.adapters"
    runs.ok(runs.run(project, "export.py", *where, "--format", "hf", "--output", str(merged)))
    runs.ok(
        runs.run(
            project,
            "export.py",
            *where,
            "--format",
            "hf",
            "--adapters-only",
            "--output",
            str(adapters),
        )
    )
    # Both checked as written, on the test windows (13 here), against the trained model's scores.
    for path in (merged, adapters):
        parity = json.loads(path.with_name(path.name + ".json").read_text())["parity"]
        assert parity["samples"] >= 10 and parity["max_abs_diff"] <= 1e-4, parity
    base = AutoModelForCausalLM.from_pretrained(tiny)
    loaded = AutoModelForCausalLM.from_pretrained(merged)
    changed = {
        name
        for name, value in loaded.state_dict().items()
        if not torch.equal(value, base.state_dict()[name])
    }
    # Only the adapted matrices moved (their adapters merged in); every other weight is
    # init_from's, bit for bit.
    assert changed == {
        f"model.layers.{layer}.self_attn.{proj}.weight"
        for layer in range(LAYERS)
        for proj in ("q_proj", "v_proj")
    }
    # Merging adds B A x alpha / rank into each matrix in float32: the same sums in another
    # order as the adapters' own forward (1.6e-7 here); a missing or wrong adapter is off by
    # the adapters' size, 1e-2.
    ids = torch.tensor([list(range(64))])
    with torch.no_grad():
        expected = AutoPeftModelForCausalLM.from_pretrained(adapters)(input_ids=ids).logits
        assert torch.allclose(loaded(input_ids=ids).logits, expected, atol=1e-5)
        assert not torch.allclose(base(input_ids=ids).logits, expected, atol=1e-3)
    assert (merged / "tokenizer.json").read_bytes() == (tiny / "tokenizer.json").read_bytes()


@pytest.mark.slow
def test_lora_on_a_sharded_model_trains_on_two_ranks(
    project: Path, text: Path, tiny: Path, env: dict, tmp_path: Path
) -> None:
    args = (*ARGS, *LORA, "--init_from", str(tiny), "--data_url", str(text))
    args += ("--batch_size", "2", "--max_steps", "6", "--shard", "full")
    output = runs.torchrun_train(project, tmp_path / "two", *args, env=env)
    shards = sorted(p.name for p in (output / "llama_epoch1.shards").iterdir())
    assert shards == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    # One process reads the adapters' shards onto init_from's model: the run's validation.
    where = ("--train_url", str(output), "--data_url", str(text), "--split", "val")
    scored = runs.ok(runs.run(project, "eval.py", *where, env=env))
    val = [row for row in runs.metrics(output) if row["type"] == "val"][-1]["loss"]
    # One process's threads sum in another order than a rank's: 1e-5 relative.
    assert float(scored.split("val loss ")[1].split()[0]) == pytest.approx(val, rel=1e-5)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no-config", "holds no config.json: give a directory save_pretrained wrote"),
        ("no-weights", "holds no weights (model.safetensors"),
        ("no-module", "lora.target_modules nope: Target modules {'nope'} not found"),
    ],
    ids=["no-config", "no-weights", "no-module"],
)
def test_bad_input_is_one_line(
    project: Path, tiny: Path, env: dict, tmp_path: Path, case: str, expected: str
) -> None:
    directory = tmp_path / "model"
    directory.mkdir()
    for name in ("config.json", "tokenizer.json"):
        if case != "no-config":
            (directory / name).write_bytes((tiny / name).read_bytes())
    if case == "no-module":
        directory = tiny
    args = ("--init_from", str(directory), "--lora_rank", "2", "--lora_target_modules", "nope")
    result = runs.run(
        project, "train.py", "--smoke", "--train_url", str(tmp_path / "out"), *args, env=env
    )
    runs.assert_one_line_exit_2(result, expected)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ViT of 2 layers of width 32 for 1x28x28 images (the digits'), patches of 7, with
    the 2-class head of another task (the run makes its own for 10)."""
    from transformers import ViTConfig, ViTForImageClassification

    directory = tmp_path_factory.mktemp("tiny-vit")
    config = ViTConfig(
        image_size=28,
        patch_size=7,
        num_channels=1,
        hidden_size=WIDTH,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        intermediate_size=2 * WIDTH,
        num_labels=2,
    )
    torch.manual_seed(0)
    ViTForImageClassification(config).save_pretrained(directory)
    return directory


@pytest.mark.slow
def test_an_image_classifier_fine_tunes_with_lora_in_a_classification_project(
    pytorch_project: Path, digits_dir: Path, tiny_vit: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForImageClassification

    output = tmp_path / "out"
    args = ("--data_url", str(digits_dir), "--epoch_size", "1", "--init_from", str(tiny_vit))
    args += ("--lora_rank", str(RANK), "--lora_target_modules", "q_proj,v_proj")
    said = runs.ok(runs.run(pytorch_project, "train.py", "--train_url", str(output), *args))
    assert f"init_from {tiny_vit}: its classifier head is new, for 10 classes" in said
    # The adapters (q_proj and v_proj, 32 -> 32, 2 layers) and the new head (32 x 10 + 10).
    head = WIDTH * 10 + 10
    assert f"{TRAINABLE + head:,} trainable parameters (rank x (in + out) each: {TRAINABLE:,})" in (
        said
    )
    state = torch.load(output / "vit_epoch1.pt", weights_only=True)
    kinds = {"lora" if ".lora_" in name else name.split(".")[-3] for name in state["model"]}
    assert kinds == {"lora", "modules_to_save"}, list(state["model"])
    merged = tmp_path / "merged.hf"
    where = ("--train_url", str(output), "--data_url", str(digits_dir))
    runs.ok(
        runs.run(pytorch_project, "export.py", *where, "--format", "hf", "--output", str(merged))
    )
    # Checked as written: transformers' model scores the test images as the trained one does.
    parity = json.loads(merged.with_name(merged.name + ".json").read_text())["parity"]
    assert parity["samples"] >= 10 and parity["max_abs_diff"] <= 1e-4, parity
    loaded = AutoModelForImageClassification.from_pretrained(merged)
    assert loaded.config.num_labels == 10
    trained = state["model"]["model.base_model.model.classifier.modules_to_save.default.weight"]
    assert torch.equal(loaded.classifier.weight, trained)


def test_init_from_that_does_not_fit_the_images_is_one_line(
    pytorch_project: Path, digits_dir: Path, tiny: Path, tiny_vit: Path, tmp_path: Path
) -> None:
    wide = tmp_path / "vit-32"
    wide.mkdir()
    config = json.loads((tiny_vit / "config.json").read_text())
    (wide / "config.json").write_text(json.dumps({**config, "image_size": 32}))
    (wide / "model.safetensors").write_bytes((tiny_vit / "model.safetensors").read_bytes())
    cases = {
        wide: "takes images of 1x32x32 (channels x height x width), and the data's are 1x28x28: "
        "set data.resize 32,32 (--resize)",
        tiny: "config.json names no image_size, so it is no image model (llama)",
    }
    for directory, expected in cases.items():
        result = runs.run(
            pytorch_project,
            *("train.py", "--data_url", str(digits_dir), "--epoch_size", "1"),
            *("--init_from", str(directory), "--train_url", str(tmp_path / "out")),
        )
        runs.assert_one_line_exit_2(result, expected)
    assert not (tmp_path / "out").exists()
