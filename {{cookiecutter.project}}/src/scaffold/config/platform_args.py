"""The arguments OpenI, C2Net and ModelArts add to the boot file's command line, in one table;
and telling them from a mistyped option, which gets one line naming the closest known one."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from src.scaffold.errors import ConfigError


@dataclass(frozen=True)
class PlatformArg:
    """An argument a platform passes to train.py, accepted and not used: what it carries
    this project reads elsewhere (C2Net's variables, the --data_url copy, the launchers)."""

    platforms: str
    meaning: str


# Where each comes from. OpenI's platform is the Gitea fork at openi.pcl.ac.cn/OpenI/aiforge
# (C2Net, 智算网络, is its "grampus" scheduler); ModelArts' at support.huaweicloud.com.
PLATFORM_ARGS: dict[str, PlatformArg] = {
    # OpenI NPU jobs (云脑二, run on ModelArts): aiforge services/ai_task_service/cluster,
    # handleCloudbrainTwoParameter and getCloudbrainTwoUserCommand add these after --data_url
    # and --train_url (names in modules/modelarts: MultiDataUrl, PretrainUrl, CkptUrl,
    # ResultUrl). On C2Net NPUs the image's openi.py wrapper passes the first two on.
    "multi_data_url": PlatformArg("OpenI NPU, C2Net NPU", "the datasets chosen: JSON, OBS URLs"),
    "pretrain_url": PlatformArg("OpenI NPU, C2Net NPU", "the pretrained models chosen: JSON"),
    "result_url": PlatformArg("OpenI NPU", "OBS URL for the job's result files"),
    # The first pretrained model chosen: its OBS URL on OpenI NPU; /pretrainmodel/NAME on
    # OpenI GPU (云脑一: cluster CloudbrainOneClusterAdapter, getTrainJobCommand); the local
    # copy on C2Net GPU and GCU (routers/repo/grampus, generateCommand).
    "ckpt_url": PlatformArg("OpenI GPU and NPU, C2Net GPU", "the pretrained model file chosen"),
    # C2Net NPU: generateCommand runs the image's openi.py wrapper with the job's arguments
    # and --model_url; the wrapper starts the boot file with them and its own
    # --grampus_code_file_name and --grampus_code_url. The wrapper is not published: boot
    # files written for C2Net NPU jobs declare these three ("智算平台的额外参数").
    "model_url": PlatformArg("C2Net NPU", "OBS URL the job's outputs are copied to"),
    "grampus_code_file_name": PlatformArg("C2Net NPU", "name of the code archive"),
    "grampus_code_url": PlatformArg("C2Net NPU", "URL of the code archive"),
    # ModelArts, PyTorch engine, several nodes: `python BOOT --init_method
    # "tcp://<worker 0>:6666" --rank ${VC_TASK_INDEX} --world_size <nodes>` (docker-
    # modelarts_0122, "PyTorch Startup Principle"; the command as ModelArts logs it is quoted
    # in users' boot files). The launchers start the ranks here.
    "init_method": PlatformArg("ModelArts", "tcp:// address of node 0 for torch.distributed"),
    "rank": PlatformArg("ModelArts", "this node's index"),
    "world_size": PlatformArg("ModelArts", "number of nodes"),
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
# argparse's own test: such a word is a value, not an option.
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def closest(word: str, known: Mapping[str, str]) -> str | None:
    """How to write the known option a mistyped ``word`` most likely means, or None.

    ``known`` maps each option's name to how it is written (a flag, a config.yaml key);
    ``word`` is compared without leading dashes or case, with - read as _.
    """
    name = word.lstrip("-").replace("-", "_").lower()
    for candidate in (name, SYNONYMS.get(name, "")):
        if candidate in known:
            return known[candidate]
    match = difflib.get_close_matches(name, list(known), n=1)
    return known[match[0]] if match else None


def _unknown(name: str, flags: Mapping[str, str]) -> str:
    guess = closest(name, flags)
    return f"unknown option {name} ({f'did you mean {guess}?' if guess else 'see --help'})"


def _stray(arg: str, flags: Mapping[str, str]) -> str:
    key, equals, value = arg.partition("=")
    guess = closest(key, flags) if equals and key else None
    hint = f"did you mean {guess}={value}?" if guess else "options are --name value; see --help"
    return f"unexpected argument {arg!r} ({hint})"


def unknown_key(key: str, keys: Mapping[str, str]) -> str:
    """The line for a config.yaml key no option has: the closest key, else all of them.
    ``keys`` maps each key to its option's name (data.format -> data_format)."""
    guess = closest(key, {**{name: k for k, name in keys.items()}, **{k: k for k in keys}})
    hint = f"did you mean {guess!r}?" if guess else f"known: {', '.join(keys)}"
    return f"unknown option {key!r} ({hint})"


def platform_arguments(extras: Sequence[str], flags: Mapping[str, str]) -> tuple[str, ...]:
    """The platform arguments among ``extras`` (what argparse did not know), by name, once
    each: values may hold credentials or long URLs. Each may come as --x=v, --x v or --x,
    and more than once. Any other argument raises ConfigError, naming the closest of
    ``flags`` (option name -> flag) when one is close."""
    names: list[str] = []
    value_may_follow = False
    for arg in extras:
        if arg.startswith("-") and not NEGATIVE_NUMBER.match(arg):
            name = arg.split("=", 1)[0]
            if not name.startswith("--") or name[2:] not in PLATFORM_ARGS:
                raise ConfigError(_unknown(name, flags))
            names.append(name)
            value_may_follow = "=" not in arg
        elif value_may_follow:
            value_may_follow = False
        else:
            raise ConfigError(_stray(arg, flags))
    return tuple(dict.fromkeys(names))
