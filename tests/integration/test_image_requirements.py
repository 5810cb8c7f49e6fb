"""A PyTorch project whose config.yaml starts from a Hugging Face model carries transformers,
peft and safetensors into its image: its requirements-hf.txt joins requirements.txt, and the
wheelhouse sends their wheels and everything they need (pip downloaded them: real metadata);
any other project's image stays as it was. Every project with sweep.py carries Optuna (its
requirements-sweep.txt), for a sweep as the job's command; one without sweep.py does not."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator.image.build import requirement_lines
from generator.image.plan import BuildRequest, plan_build
from generator.image.wheels import WheelFacts, select
from generator.render.options import Options
from tests.integration.conftest import PINS, committed_project

HF = {"transformers", "peft", "safetensors", "tokenizers", "huggingface-hub"}


def _sent(
    project: Path, wheelhouse: Path, framework: str = "pytorch"
) -> tuple[set[str], tuple[str, ...]]:
    """The distributions `gen image build --wheelhouse` would send for this project's image,
    and what the wheelhouse lacks."""
    plan = plan_build(BuildRequest(project, "cuda", wheelhouse=wheelhouse))
    wanted = [PINS[framework], *(requirement_lines(plan.requirements) or [])]
    chosen = select(wheelhouse, wanted, python="3.11", machine="x86_64", facts=WheelFacts())
    names = {path.name.split("-")[0].lower().replace("_", "-") for path in chosen.files}
    return names, chosen.missing


@pytest.mark.parametrize(
    "setting",
    [{"init_from": "/cache/models/qwen"}, {"lora": {"rank": 8}}],
    ids=["init_from", "lora"],
)
def test_a_project_starting_from_hugging_face_carries_it_into_its_image(
    tmp_path: Path, wheelhouses: dict[str, Path], setting: dict
) -> None:
    project = committed_project(Options("hfimage", framework="pytorch", task="lm"), tmp_path)
    before, missing = _sent(project, wheelhouses["pytorch"])
    assert missing == () and not before & HF and "torch" in before
    config = project / "config.yaml"
    values = yaml.safe_load(config.read_text())
    if "lora" in setting:
        setting = {"lora": {**values["lora"], **setting["lora"]}}
    config.write_text(yaml.safe_dump({**values, **setting}))
    plan = plan_build(BuildRequest(project, "cuda"))
    assert plan.requirements.startswith((project / "requirements.txt").read_text())
    assert (project / "requirements-hf.txt").read_text() in plan.requirements
    after, missing = _sent(project, wheelhouses["pytorch"])
    # Offline as before: nothing the image installs is missing from the wheelhouse.
    assert missing == () and HF <= after and before < after


@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_a_project_with_sweeps_carries_optuna_into_its_image(
    tmp_path: Path, wheelhouses: dict[str, Path], framework: str
) -> None:
    project = committed_project(Options("sweeps", framework=framework, target="cuda"), tmp_path)
    sent, missing = _sent(project, wheelhouses[framework], framework)
    plan = plan_build(BuildRequest(project, "cuda"))
    assert plan.requirements.endswith((project / "requirements-sweep.txt").read_text())
    # Optuna and what it needs (SQLAlchemy for its study's SQLite), all in the wheelhouse.
    assert missing == () and {"optuna", "sqlalchemy", "alembic"} <= sent
    (project / "sweep.py").unlink()
    without, missing = _sent(project, wheelhouses[framework], framework)
    assert missing == () and "optuna" not in without and without < sent
