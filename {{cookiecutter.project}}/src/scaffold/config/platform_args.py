"""The arguments OpenI, C2Net and ModelArts add to the boot file's command line, in one table;
and telling them from a mistyped option, which gets one line naming the closest known one."""

from __future__ import annotations

import difflib
import re
from typing import Mapping, Sequence

from src.scaffold.errors import ConfigError

# Each argument a platform passes, accepted and not used: (its platforms, what it carries).
# Sources: openi.pcl.ac.cn/OpenI/aiforge (C2Net is its "grampus"), support.huaweicloud.com.
PLATFORM_ARGS: dict[str, tuple[str, str]] = {
    # OpenI NPU (云脑二, on ModelArts): aiforge's getCloudbrainTwoUserCommand adds these after
    # --data_url and --train_url; on C2Net NPUs the image's openi.py passes the first two on.
    "multi_data_url": ("OpenI NPU, C2Net NPU", "the datasets chosen: JSON, OBS URLs"),
    "pretrain_url": ("OpenI NPU, C2Net NPU", "the pretrained models chosen: JSON"),
    "result_url": ("OpenI NPU", "OBS URL for the job's result files"),
    # OBS URL on OpenI NPU; /pretrainmodel/NAME on OpenI GPU (云脑一: getTrainJobCommand);
    # the local copy on C2Net GPU and GCU (routers/repo/grampus, generateCommand).
    "ckpt_url": ("OpenI GPU and NPU, C2Net GPU", "the pretrained model file chosen"),
    # C2Net NPU: generateCommand passes --model_url to the image's (unpublished) openi.py
    # wrapper, which adds the grampus two; C2Net boot files declare these three.
    "model_url": ("C2Net NPU", "OBS URL the job's outputs are copied to"),
    "grampus_code_file_name": ("C2Net NPU", "name of the code archive"),
    "grampus_code_url": ("C2Net NPU", "URL of the code archive"),
    # ModelArts, PyTorch engine, several nodes: `python BOOT --init_method "tcp://<worker 0>:6666"
    # --rank ${VC_TASK_INDEX} --world_size <nodes>` ("PyTorch Startup Principle").
    "init_method": ("ModelArts", "tcp:// address of node 0 for torch.distributed"),
    "rank": ("ModelArts", "this node's index"),
    "world_size": ("ModelArts", "number of nodes"),
}

# Spellings people reach for, and the option they mean; difflib catches the rest.
SYNONYMS = {
    **dict.fromkeys(("epochs", "epoch", "num_epochs", "n_epochs", "max_epochs"), "epoch_size"),
    **dict.fromkeys(("learning_rate", "learningrate", "base_lr", "lr_rate"), "lr"),
    **dict.fromkeys(("bs", "batch", "batchsize", "train_batch_size"), "batch_size"),
    **dict.fromkeys(("data", "data_dir", "data_path", "dataset", "dataset_dir"), "data_url"),
    **dict.fromkeys(("output", "output_dir", "output_path", "out", "save_dir"), "train_url"),
    **dict.fromkeys(("config", "cfg", "config_file"), "config_path"),
    **dict.fromkeys(("device", "platform"), "device_target"),
    **dict.fromkeys(("scheduler", "lr_scheduler", "schedule", "lr_schedule"), "schedule_name"),
    **dict.fromkeys(("arch", "network", "net"), "model"),
    **dict.fromkeys(("fp16", "mixed_precision"), "amp"),
    "steps": "max_steps",
    **dict.fromkeys(("workers", "num_workers"), "data_num_workers"),
    **dict.fromkeys(("warmup", "warmup_epochs"), "schedule_warmup_epochs"),
    **dict.fromkeys(("gamma", "lr_gamma"), "schedule_gamma"),
    **dict.fromkeys(("metric", "monitor"), "monitor_metric"),
    "classes": "num_classes",
    "weights": "pretrained",
}
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's test: a value, not an option


def closest(word: str, known: Mapping[str, str]) -> str | None:
    """How ``known`` (option name -> as written) writes the option a mistyped ``word`` means."""
    name = word.lstrip("-").replace("-", "_").lower()
    for candidate in (name, SYNONYMS.get(name, "")):
        if candidate in known:
            return known[candidate]
    match = difflib.get_close_matches(name, list(known), n=1)
    return known[match[0]] if match else None


def unknown_key(key: str, keys: Mapping[str, str]) -> str:
    """The line for a config.yaml key no option has; ``keys``: key -> option name."""
    guess = closest(key, {**{name: k for k, name in keys.items()}, **{k: k for k in keys}})
    hint = f"did you mean {guess!r}?" if guess else f"known: {', '.join(keys)}"
    return f"unknown option {key!r} ({hint})"


def platform_arguments(extras: Sequence[str], flags: Mapping[str, str]) -> tuple[str, ...]:
    """The platform arguments among ``extras`` by name, once each (values may hold credentials);
    any other is a ConfigError naming the closest of ``flags``. Each: --x=v, --x v or --x."""
    names: list[str] = []
    value_may_follow = False
    for arg in extras:
        if arg.startswith("-") and not NEGATIVE_NUMBER.match(arg):
            name = arg.split("=", 1)[0]
            if not name.startswith("--") or name[2:] not in PLATFORM_ARGS:
                guess = closest(name, flags)
                hint = f"did you mean {guess}?" if guess else "see --help"
                raise ConfigError(f"unknown option {name} ({hint})")
            names.append(name)
            value_may_follow = "=" not in arg
        elif value_may_follow:
            value_may_follow = False
        else:
            key, equals, value = arg.partition("=")
            guess = closest(key, flags) if equals and key else None
            hint = (
                f"did you mean {guess}={value}?"
                if guess
                else "options are --name value; see --help"
            )
            raise ConfigError(f"unexpected argument {arg!r} ({hint})")
    return tuple(dict.fromkeys(names))
