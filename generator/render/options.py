"""Template options: the allowed values and the one validation gen and the hook share.

Standard library only: the pre-generation hook imports this module when the
template runs under plain ``cookiecutter`` with nothing else installed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from generator.errors import OptionError

FRAMEWORKS = ("pytorch", "mindspore")
# What the project's model does: classify images or table rows (LeNet on the digits), or model
# language (a small GPT on text): its src/model.py, src/data.py, src/step.py and demo data.
TASKS = ("classify", "lm")
TARGETS = ("cuda", "ascend", "both")
PLATFORMS = ("openi", "modelarts", "generic")
DEVICES_PER_NODE = (1, 2, 4, 8, 16)
# 16 devices a node: Atlas A3 (910_93) servers and Atlas A2 Box16 (910b) servers hold 16
# NPUs, an Atlas training server (910) 8 (generator/shipped/ranktable/rules.py CHIPS, with
# the sources); GPU nodes of 16 exist (HGX-2). A3 super-pod jobs take all 16 of a node, so
# 16 is the default there (auto).
EIGHT_ONLY_CHIPS = ("910",)
# MindSpore's training loop: Model.train with callbacks and data sink, or a
# hand-written value_and_grad loop. PyTorch projects ignore it.
MS_TRAIN_LOOPS = ("model", "custom")
# The Ascend chip: its rank-table rules (generator/shipped/ranktable/rules.py). CUDA projects
# ignore it.
CHIPS = ("910b", "910", "910_93")
# The CPU of the servers the images run on. auto: aarch64 for Ascend images (Atlas 800T A2,
# Atlas 900 and A3 servers, and OpenI's and ModelArts' Ascend pools, run Kunpeng CPUs),
# x86_64 for CUDA images.
ARCHES = ("auto", "aarch64", "x86_64")
MAX_NODES = 1024

# A directory name that is also safe as a docker image name component, a git
# repo name and a shell word: no quoting surprises anywhere it travels.
PROJECT_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
PROJECT_RULE = "use 1-64 ASCII letters, digits, '-' or '_', starting with a letter"


@dataclass(frozen=True)
class Options:
    """One validated set of template options, as typed values."""

    project: str
    framework: str = "pytorch"
    target: str = "cuda"
    platform: str = "openi"
    devices_per_node: int = 8
    nnodes: int = 1
    ms_train_loop: str = "model"
    chip: str = "910b"
    arch: str = "auto"
    task: str = "classify"  # last: older callers name the others by position

    def image_arch(self, target: str) -> str:
        """The CPU the ``target`` image is built for: the project's answer, or auto's."""
        if self.arch != "auto":
            return self.arch
        return "aarch64" if target == "ascend" else "x86_64"

    def as_context(self) -> dict[str, str]:
        """The options as cookiecutter extra context (every value a string)."""
        return {key: str(value) for key, value in asdict(self).items()}


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    text = str(value)
    if text not in allowed:
        raise OptionError(name, f"{text!r} is not allowed; choose one of {', '.join(allowed)}")
    return text


def _integer(name: str, value: object, rule: str) -> int:
    text = str(value).strip()
    if not re.fullmatch(r"[0-9]{1,5}", text):
        raise OptionError(name, f"{str(value)!r} is not a whole number; {rule}")
    return int(text)


def default_devices(target: str, chip: str) -> int:
    """Devices a node when not told (auto): 16 on Atlas A3, whose super-pod jobs take a whole
    node's 16; else 8."""
    return 16 if target != "cuda" and chip == "910_93" else 8


def _devices(value: object, target: str, chip: str) -> int:
    if str(value).strip().lower() in ("auto", ""):
        return default_devices(target, chip)
    ascend = target != "cuda"
    allowed = [n for n in DEVICES_PER_NODE if n < 16 or not (ascend and chip in EIGHT_ONLY_CHIPS)]
    rule = "choose one of " + ", ".join(map(str, allowed)) + " (or auto)"
    devices = _integer("devices_per_node", value, rule)
    if devices not in allowed:
        why = ""
        if devices == 16:
            why = " for chip 910: an Atlas training server (Ascend 910) holds 8 NPUs"
        raise OptionError("devices_per_node", f"{devices} is not allowed{why}; {rule}")
    return devices


def _check_task(task: str, framework: str, target: str, chip: str) -> None:
    """A language model on MindSpore takes Ascend's fused attention (flash_attention_score),
    which the Atlas A2 and A3 chips have and the first Ascend 910 has not."""
    if task == "lm" and framework == "mindspore" and target != "cuda" and chip in EIGHT_ONLY_CHIPS:
        raise OptionError(
            "task",
            f"lm with MindSpore on chip {chip}: the model's fused attention "
            "(flash_attention_score) runs on Atlas A2 and A3 (--chip 910b or 910_93), "
            "not on the Ascend 910; choose one of those, or --target cuda",
        )


def validate(values: Mapping[str, object]) -> Options:
    """Check raw option values (strings from cookiecutter or the CLI) and type them.

    Raises OptionError naming the first bad option, the value and what is allowed.
    Keys other than the options (cookiecutter's private ``_`` keys) are ignored.
    """
    project = str(values.get("project", ""))
    if not PROJECT_RE.fullmatch(project):
        raise OptionError("project", f"{project!r} is not a valid directory name: {PROJECT_RULE}")
    framework = _choice("framework", values.get("framework", "pytorch"), FRAMEWORKS)
    target = _choice("target", values.get("target", "cuda"), TARGETS)
    chip = _choice("chip", values.get("chip", "910b"), CHIPS)
    devices = _devices(values.get("devices_per_node", "auto"), target, chip)
    nodes_rule = f"use a number from 1 to {MAX_NODES}"
    nnodes = _integer("nnodes", values.get("nnodes", 1), nodes_rule)
    if not 1 <= nnodes <= MAX_NODES:
        raise OptionError("nnodes", f"{nnodes} is out of range; {nodes_rule}")
    task = _choice("task", values.get("task", "classify"), TASKS)
    _check_task(task, framework, target, chip)
    return Options(
        project=project,
        framework=framework,
        task=task,
        target=target,
        platform=_choice("platform", values.get("platform", "openi"), PLATFORMS),
        devices_per_node=devices,
        nnodes=nnodes,
        ms_train_loop=_choice(
            "ms_train_loop", values.get("ms_train_loop", "model"), MS_TRAIN_LOOPS
        ),
        chip=chip,
        arch=_choice("arch", values.get("arch", "auto"), ARCHES),
    )
