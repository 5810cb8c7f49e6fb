"""A run's record read back: the options it was started with (hparams.json) and what its
checkpoint says of its model and data, applied to the options of a command that works on
that run. The one way eval.py, predict.py, export.py and a resumed train.py learn what a run
was: the record wins over config.yaml, a flag given on the command line wins over the record
(with a note when they differ), and a checkpoint's own word on its model and inputs wins over
both, since its weights were made for them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from src.scaffold.config import Named, Places
from src.scaffold.config.parse import convert
from src.scaffold.errors import CheckpointError, ConfigError
from src.scaffold.outputs.checkpoints import POINTER, find_latest, read_pointer
from src.scaffold.outputs.record import ARTIFACTS, HPARAMS, METRICS
from src.scaffold.storage import where as storage
from src.scaffold.storage.once import Once
from src.scaffold.storage.uploads import Remote

# The options that shape a model's inputs and outputs: what eval.py, predict.py and
# export.py take from the run, so that they read the data as it read it.
INPUTS = (
    "model",
    "data_url",
    "dataset_name",
    "train_dir",
    "test_dir",
    "data_format",
    "data_label_column",
    "data_labels",
    "data_resize",
    "data_test_fraction",
    "data_mean",
    "data_std",
    "seed",
    "val_fraction",
    "num_classes",
    "batch_size",
    "amp",
    # MindSpore's: how the network is compiled and cast.
    "context_mode",
    "amp_level",
)
# What every attempt takes from its own command line and environment instead: where it
# runs, how it was started, where it writes.
OWN = (
    "train_url",
    "resume",
    "pretrained",
    "skip_layers",
    "device_target",
    "device_num",
    "device_id",
    "tensorboard_dir",
    "config_path",
    "smoke",
    "strict",
)
# The checkpoint's meta (src/scaffold/data/splits.py's CHECKPOINT_META) by the option it
# answers for.
FROM_CHECKPOINT = {
    "model_name": "model",
    "data_mean": "data_mean",
    "data_std": "data_std",
    "data_resize": "data_resize",
    "label_column": "data_label_column",
}


def recorded(directory: Path) -> dict[str, Any]:
    """The options hparams.json in ``directory`` records (its newest attempt's), with the
    model the run resolved where it asked for none; {} where there is no record."""
    try:
        values = json.loads((directory / HPARAMS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(values, dict):
        return {}
    resolved = values.get("resolved") if isinstance(values.get("resolved"), dict) else {}
    if values.get("model") is None and isinstance(resolved.get("model"), str):
        values["model"] = resolved["model"]
    return values


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (tuple, list)):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) or "[]"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Path) and isinstance(b, Path):
        return a.absolute() == b.absolute()
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(a)))
        except (TypeError, ValueError):
            return False
    return a == b


def _from_checkpoint(meta: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint records of its model and inputs, as option values."""
    values = {option: meta[key] for key, option in FROM_CHECKPOINT.items() if meta.get(key)}
    if meta.get("numeric"):
        values["data_labels"] = "values"
    return values


class Adopted:
    """The options of a command on a run: ``changes``, the run's own values (by option name)
    where no flag said otherwise; ``notes`` for the flags that differ from the run, ``kept``
    for the options config.yaml now gives otherwise (the run's were kept)."""

    def __init__(self, changes: dict[str, Any], notes: list[str], kept: list[str]) -> None:
        self.changes, self.notes, self.kept = changes, notes, kept

    def lines(self) -> list[str]:
        """What to tell the user: each flag that differs from the run, then the options
        config.yaml gives otherwise, in one line."""
        said = [f"note: {note}: using the flag's" for note in self.notes]
        if self.kept:
            said.append(
                "note: the run's own options, where config.yaml now says otherwise: "
                + ", ".join(self.kept)
                + " (a flag changes them)"
            )
        return said

    def log(self, logger: logging.Logger) -> None:
        for line in self.lines():
            logger.info("%s", line)


def adopt(
    asked: Named,
    record: dict[str, Any],
    meta: dict[str, Any],
    names: tuple[str, ...] | None,
    what: str,
) -> Adopted:
    """The options ``names`` (None: every option but OWN) as the run's record and checkpoint
    give them, where they differ from ``asked``. ``what`` names the checkpoint in the lines
    (--resume PATH).

    A --model given that is not the checkpoint's model is a ConfigError naming both: its
    weights fit no other model."""
    options = asked.declared
    wanted = [n for n in options if (n in names if names is not None else n not in OWN)]
    base = Path(".")
    theirs: dict[str, Any] = {}
    for name in wanted:
        if name in record:
            try:
                theirs[name] = convert(options[name], record[name], base)
            except Exception:  # noqa: BLE001 (an option another version wrote: not ours)
                continue
    for name, value in _from_checkpoint(meta).items():
        if name in wanted:
            theirs[name] = convert(options[name], value, base)
    model = theirs.get("model")
    if "model" in asked.given and model is not None and asked.values["model"] != model:
        raise ConfigError(
            f"{what} holds model {model}'s weights; --model {asked.values['model']} is another "
            "model: "
            f"leave --model out to use {model}"
        )
    notes, kept, changes = [], [], {}
    for name, value in theirs.items():
        current = asked.values[name]
        if _same(current, value):
            continue
        flag = f"--{name}"
        if name in asked.given:
            notes.append(f"{flag} {_shown(current)} differs from the run's {_shown(value)}")
            continue
        changes[name] = value
        if not (name in ("data_mean", "data_std") and not current):  # computed by the run
            kept.append(f"{options[name].key} {_shown(value)} (config.yaml: {_shown(current)})")
    return Adopted(changes, notes, kept)


def model_mismatch(what: str, model: str, own: dict, theirs: dict) -> CheckpointError | None:
    """One short line when a checkpoint's tensors (name -> shape) do not fit the model's:
    the first tensor of another shape, and how many each side has that the other lacks; None
    when they fit."""
    other = [name for name in own if name in theirs and tuple(own[name]) != tuple(theirs[name])]
    lacks = [name for name in own if name not in theirs]
    extra = [name for name in theirs if name not in own]
    if not (other or lacks or extra):
        return None
    parts = []
    if other:
        name = other[0]
        more = f" (and {len(other) - 1} more)" if len(other) > 1 else ""
        parts.append(
            f"its {name} is {tuple(theirs[name])} where the model's is {tuple(own[name])}{more}"
        )
    for names, side in ((lacks, "it lacks"), (extra, "it has")):
        if names:
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            tail = " that the model has not" if side == "it has" else ""
            parts.append(f"{side} {len(names)} tensor(s){tail} ({shown})")
    return CheckpointError(
        f"{what} was saved from another {model} than src/model.py's {model} now: {'; '.join(parts)}"
    )


def fetch(output: Path, remote: Remote, suffix: str) -> None:
    """A restarted job's outputs brought back from the platform (its latest.json, newest
    checkpoint and record), once per node, when the local directory has no checkpoint."""
    if find_latest(output, suffix) is not None:
        return

    def get() -> None:
        output.mkdir(parents=True, exist_ok=True)
        if remote.get([POINTER], output):
            latest = read_pointer(output).get("latest")
            remote.get([n for n in (latest,) if isinstance(n, str)], output)
        remote.get([HPARAMS, METRICS, ARTIFACTS], output)

    Once(output, "resume-fetch", remote.where).run(get, "fetch the last checkpoint", 1800)


def continuing(asked: Named, places: Places, framework: Any) -> Adopted:
    """A resumed run (--resume auto or PATH) with the options and model its record gives:
    the run continues as it began, whatever config.yaml says now; flags still win. A new
    run (no --resume) changes nothing. ``framework``: the backend's core module."""
    resume = asked.values["resume"]
    if resume is None:
        return Adopted({}, [], [])
    suffix = framework.CHECKPOINT_SUFFIX
    if resume == "auto":
        output, remote = storage.outputs(places)
        if remote is not None:
            fetch(output, remote, suffix)
        path = find_latest(output, suffix)
        what = f"the checkpoint {path}" if path is not None else f"the run in {output}"
    else:
        path = Path(resume)
        output, what = path.parent, f"--resume {path}"
    record = recorded(output)
    meta: dict[str, Any] = {}
    if path is not None and path.is_file() and "model" not in record:
        meta = framework.read_meta(path, "--resume")  # a checkpoint without its run's record
    return adopt(asked, record, meta, None, what)
