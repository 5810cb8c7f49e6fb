"""init_from (config.yaml): a Hugging Face model from a save_pretrained directory, built by
transformers' Auto classes and trained as src/model.py's are: a causal language model in a
language-model project (ids in, scores a position out), an image classifier in a classification
project (images in, its head new for the data's classes); lora: low-rank adapters on it with
peft, its own weights frozen."""

from __future__ import annotations

import copy
import json
import logging
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from src.scaffold.config.sections import LoraOptions
from src.scaffold.errors import ConfigError
from src.scaffold.task import DataShape, ModelSpec

log = logging.getLogger(__name__)
NEEDS = "transformers and peft (pip install -r requirements-hf.txt)"
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
IMAGE_FILES = ("preprocessor_config.json",)  # an image model's processor, kept beside it
HEAD = "classifier"  # transformers' image classifiers' head: new, and trained under LoRA too


class Pretrained(torch.nn.Module):
    """A transformers model: ids (N, T) in, scores (N, T, classes) out (its vocabulary's first
    ``classes``: a padded vocabulary scores ids no tokenizer gives); or images (N, C, H, W) in,
    scores (N, classes) out."""

    def __init__(self, model: torch.nn.Module, classes: int, source: Path, key: str) -> None:
        super().__init__()
        self.model, self.classes, self.source, self.key = model, classes, source, key

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        scores = self.model(**{self.key: inputs}).logits
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


def spec(directory: Path, lora: LoraOptions, block: int, ids: bool) -> ModelSpec:
    """The ModelSpec of init_from's model: named by its model_type, its blocks transformers';
    ``ids``: a language-model project's (``block`` ids in), else an image classifier."""
    config = _config(directory)
    name = str(config.get("model_type") or "pretrained")
    shape = (block,) if ids else _image_shape(directory, config)

    def build(data: DataShape) -> torch.nn.Module:
        if not ids:
            return _classifier(directory, data, lora, config)
        return _language_model(directory, data, lora, config)

    return ModelSpec(name, build, shape, "", str(directory), ids=ids, blocks="blocks")


def _image_shape(directory: Path, config: dict[str, Any]) -> tuple[int, int, int]:
    """The images init_from's model takes: (channels, height, width), from its config.json."""
    size = config.get("image_size")
    if not isinstance(size, (int, list)):
        raise ConfigError(
            f"init_from {directory}: config.json names no image_size, so it is no image model "
            f"({config.get('model_type')}): a classification project starts from an image "
            "classifier's directory (a language model's goes in a gen new --task lm project)"
        )
    height, width = (size, size) if isinstance(size, int) else size
    return int(config.get("num_channels") or 3), int(height), int(width)


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as err:
        raise ConfigError(f"init_from needs {NEEDS}") from err
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


def _classifier(
    directory: Path, shape: DataShape, lora: LoraOptions, config: dict[str, Any]
) -> torch.nn.Module:
    """An image classifier, its head made anew for the data's classes."""
    transformers = _transformers()
    want, got = _image_shape(directory, config), tuple(shape.input)
    if got != want:
        fix = (
            f"set data.resize {want[1]},{want[2]} (--resize)"
            if got[0] == want[0]
            else f"give images of {want[0]} channels"
        )
        raise ConfigError(
            f"init_from {directory} takes images of {'x'.join(map(str, want))} (channels x "
            f"height x width), and the data's are {'x'.join(map(str, got))}: {fix}"
        )
    model = transformers.AutoModelForImageClassification.from_pretrained(
        directory, dtype=torch.float32, num_labels=shape.num_classes, ignore_mismatched_sizes=True
    )
    if not isinstance(getattr(model, HEAD, None), torch.nn.Module):
        raise ConfigError(f"init_from {directory}: its model has no {HEAD} head to train")
    log.info("init_from %s: its %s head is new, for %d classes", directory, HEAD, shape.num_classes)
    if lora.rank:
        model = adapted(model, lora, (HEAD,))
    return Pretrained(model, shape.num_classes, directory, "pixel_values")


def _language_model(
    directory: Path, shape: DataShape, lora: LoraOptions, config: dict[str, Any]
) -> torch.nn.Module:
    transformers = _transformers()
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
    return Pretrained(model, shape.num_classes, directory, "input_ids")


def adapted(model: torch.nn.Module, lora: LoraOptions, heads: tuple[str, ...] = ()) -> Any:
    """``model`` with LoRA adapters (peft), its own weights frozen but ``heads`` (new ones,
    trained whole); the count logged."""
    try:
        import peft
    except ImportError as err:
        raise ConfigError(f"lora needs {NEEDS}") from err
    targets = list(lora.target_modules) or None  # peft's default for the architecture
    config = peft.LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        modules_to_save=list(heads) or None,
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
    for name in (*TOKENIZER_FILES, *IMAGE_FILES):
        if (net.source / name).is_file():
            shutil.copy2(net.source / name, path / name)


def loaded(path: Path, fmt: str) -> Callable[[np.ndarray], np.ndarray]:
    """What export.py wrote to ``path`` loaded back by transformers (the adapters by peft, onto
    their base): its scores for a normalised batch."""
    transformers = _transformers()
    if fmt == "hf":
        images = "image_size" in _config(path)
        auto = transformers.AutoModelForImageClassification if images else None
        model = (auto or transformers.AutoModelForCausalLM).from_pretrained(path)
    else:
        import peft

        adapters = json.loads((path / "adapter_config.json").read_text(encoding="utf-8"))
        base = Path(adapters["base_model_name_or_path"])
        images = "image_size" in _config(base)
        if images:  # the base built with the head the adapters trained, then theirs loaded
            from safetensors.numpy import load_file

            saved = load_file(path / "adapter_model.safetensors")
            head = next(v for k, v in saved.items() if k.endswith(f"{HEAD}.weight"))
            model = transformers.AutoModelForImageClassification.from_pretrained(
                base, num_labels=len(head), ignore_mismatched_sizes=True
            )
            model = peft.PeftModel.from_pretrained(model, path)
        else:
            model = peft.AutoPeftModelForCausalLM.from_pretrained(path)
    model.eval()
    key = "pixel_values" if images else "input_ids"
    return torch.no_grad()(
        lambda batch: model(**{key: torch.from_numpy(batch)}).logits.float().numpy()
    )
