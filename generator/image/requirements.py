"""What an image installs: requirements.txt, and the extras its config.yaml calls for.

A PyTorch project that starts from a Hugging Face model (config.yaml's ``init_from``, or
``lora.rank`` above 0) needs transformers, peft and safetensors: its requirements-hf.txt.
Its lines go into the image's requirements (and so into the wheelhouse's selection) only
then, so that every other project's image stays as small as before.
"""

from __future__ import annotations

from pathlib import Path

import yaml

HF_REQUIREMENTS = "requirements-hf.txt"


def uses_hf(config: Path) -> bool:
    """Does config.yaml set init_from or a LoRA rank? An unreadable one: train.py says why."""
    try:
        values = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    if not isinstance(values, dict):
        return False
    lora = values.get("lora")
    rank = lora.get("rank") if isinstance(lora, dict) else None
    return bool(values.get("init_from")) or (isinstance(rank, int) and rank > 0)


def image_requirements(project_dir: Path) -> str:
    """requirements.txt's text, with requirements-hf.txt's appended where config.yaml asks."""
    text = (project_dir / "requirements.txt").read_text(encoding="utf-8")
    extra = project_dir / HF_REQUIREMENTS
    if not extra.is_file() or not uses_hf(project_dir / "config.yaml"):
        return text
    return (
        text.rstrip("\n")
        + f"\n# {HF_REQUIREMENTS}: config.yaml sets init_from or lora.rank\n"
        + extra.read_text(encoding="utf-8")
    )
