"""What an image installs: requirements.txt, and the extras the project calls for.

A PyTorch project that starts from a Hugging Face model (config.yaml's ``init_from``, or
``lora.rank`` above 0) needs transformers, peft and safetensors: its requirements-hf.txt.
Its lines go into the image's requirements (and so into the wheelhouse's selection) only
then, so that every other project's image stays as small as before.

A project generated with sweeps (its sweep.py) runs them as a cluster job's command
(gen job render --sweep, launch.py --sweep): its image carries Optuna, requirements-sweep.txt.
A project without sweep.py leaves it out.
"""

from __future__ import annotations

from pathlib import Path

import yaml

HF_REQUIREMENTS = "requirements-hf.txt"
SWEEP_REQUIREMENTS = "requirements-sweep.txt"
SWEEP = "sweep.py"


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
    """requirements.txt's text, with requirements-hf.txt's appended where config.yaml asks
    and requirements-sweep.txt's where the project has sweep.py."""
    text = (project_dir / "requirements.txt").read_text(encoding="utf-8")
    extras = []
    hf = project_dir / HF_REQUIREMENTS
    if hf.is_file() and uses_hf(project_dir / "config.yaml"):
        extras.append((hf, "config.yaml sets init_from or lora.rank"))
    sweep = project_dir / SWEEP_REQUIREMENTS
    if sweep.is_file() and (project_dir / SWEEP).is_file():
        extras.append((sweep, f"the project runs sweeps ({SWEEP})"))
    for extra, why in extras:
        text = text.rstrip("\n") + f"\n# {extra.name}: {why}\n" + extra.read_text(encoding="utf-8")
    return text
