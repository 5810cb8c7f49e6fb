"""init_from (config.yaml): a Hugging Face causal language model from a save_pretrained
directory, built by transformers' Auto classes, trained as src/model.py's are (ids in, scores a
position out); lora: low-rank adapters on it with peft, its own weights frozen."""

from __future__ import annotations

import copy
import json
import logging
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch

from src.scaffold.config.sections import LoraOptions
from src.scaffold.errors import ConfigError
from src.scaffold.task import DataShape, ModelSpec

log = logging.getLogger(__name__)
NEEDS = "transformers and peft (pip install transformers peft safetensors)"
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


class Pretrained(torch.nn.Module):
    """A transformers model: ids (N, T) in, scores (N, T, classes) out (its vocabulary's first
    ``classes``: a padded vocabulary scores ids no tokenizer gives)."""

    def __init__(self, model: torch.nn.Module, classes: int, source: Path) -> None:
        super().__init__()
        self.model, self.classes, self.source = model, classes, source

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        scores = self.model(input_ids=ids).logits
        return scores if scores.shape[-1] == self.classes else scores[..., : self.classes].clone()

    @property
    def blocks(self) -> list[torch.nn.Module]:
        """Its repeated layers, as transformers names them (_no_split_modules): shard: full's."""
        names = set(getattr(self.base(), "_no_split_modules", None) or ())
        return [m for m in self.model.modules() if type(m).__name__ in names]

    def base(self) -> Any:
        """The transformers model (under peft's wrapping, where LoRA is on)."""
        model = self.model
        return model.get_base_model() if hasattr(model, "get_base_model") else model


def _config(directory: Path) -> dict[str, Any]:
    """config.json of ``directory``; one line where it is not a save_pretrained directory."""
    where = f"init_from {directory}"
    if not directory.is_dir():
        raise ConfigError(f"{where}: no such directory")
    if not (directory / "config.json").is_file():
        raise ConfigError(f"{where} holds no config.json: give a directory save_pretrained wrote")
    if not any((directory / name).is_file() for name in WEIGHTS):
        raise ConfigError(f"{where} holds no weights ({', '.join(WEIGHTS)}): save_pretrained's")
    try:
        return json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{where}: config.json cannot be read: {err}") from err


def spec(directory: Path, lora: LoraOptions, block: int) -> ModelSpec:
    """The ModelSpec of init_from's model: named by its model_type, its blocks transformers'."""
    config = _config(directory)
    name = str(config.get("model_type") or "pretrained")

    def build(shape: DataShape) -> torch.nn.Module:
        return _build(directory, shape, lora, config)

    return ModelSpec(name, build, (block,), "", str(directory), ids=True, blocks="blocks")


def _build(
    directory: Path, shape: DataShape, lora: LoraOptions, config: dict[str, Any]
) -> torch.nn.Module:
    try:
        import transformers
    except ImportError as err:
        raise ConfigError(f"init_from needs {NEEDS}") from err
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    where = f"init_from {directory}"
    vocabulary = int(config.get("vocab_size") or 0)
    if shape.num_classes > vocabulary:
        raise ConfigError(
            f"{where} scores {vocabulary} ids, and the tokenizer gives {shape.num_classes}: "
            "train with the model's own tokenizer (data.tokenizer null takes init_from's)"
        )
    positions = config.get("max_position_embeddings")
    if positions and shape.input[0] > int(positions):
        raise ConfigError(
            f"data.block_size {shape.input[0]} is over {where}'s {positions} positions: lower it"
        )
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    if lora.rank:
        model = adapted(model, lora)
    return Pretrained(model, shape.num_classes, directory)


def adapted(model: torch.nn.Module, lora: LoraOptions) -> torch.nn.Module:
    """``model`` with LoRA adapters (peft), its own weights frozen; the count logged."""
    try:
        import peft
    except ImportError as err:
        raise ConfigError(f"lora needs {NEEDS}") from err
    targets = list(lora.target_modules) or None  # peft's default for the architecture
    config = peft.LoraConfig(
        r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets
    )
    try:
        with warnings.catch_warnings():  # peft asks transformers a deprecated name (5.x)
            warnings.simplefilter("ignore", FutureWarning)
            model = peft.get_peft_model(model, config)
    except ValueError as err:  # no such module, or none peft knows for the architecture
        first = " ".join(str(err).split())
        raise ConfigError(
            f"lora.target_modules {','.join(lora.target_modules) or '(peft default)'}: {first}"
        ) from err
    adapted = [m for m in model.modules() if hasattr(m, "lora_A") and hasattr(m, "in_features")]
    expected = sum(lora.rank * (m.in_features + m.out_features) for m in adapted)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    log.info(
        "lora: rank %d on %d matrices: %s trainable parameters (rank x (in + out) each: %s), "
        "of %s; the optimizer's state is theirs",
        *(lora.rank, len(adapted), f"{trained:,}", f"{expected:,}", f"{total:,}"),
    )
    return model


def kept(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint holds of ``net``: its state, or, where some of it is frozen (LoRA),
    the parameters that train (the rest is init_from's)."""
    state = net.state_dict()
    frozen = {name for name, p in net.named_parameters() if not p.requires_grad}
    return {k: v for k, v in state.items() if k not in frozen} if frozen else state


def save_pretrained(net: Pretrained, path: Path, adapters_only: bool) -> None:
    """``net`` as a directory transformers loads: merged, with init_from's tokenizer files;
    or its adapters alone (peft's, for init_from's model)."""
    model = copy.deepcopy(net.model).float()  # merged in the copy: the run's model stays
    if adapters_only:
        if not hasattr(model, "peft_config"):
            raise ConfigError("--adapters-only: this run trained no LoRA adapters (lora.rank 0)")
        model.save_pretrained(str(path))
        return
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.save_pretrained(str(path))
    for name in TOKENIZER_FILES:
        if (net.source / name).is_file():
            shutil.copy2(net.source / name, path / name)
