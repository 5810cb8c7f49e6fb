"""A run's record read back and applied to a command's options: it wins over config.yaml, a
flag over it (with a note), and the checkpoint's word on its model and inputs over both."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from src.scaffold.config import Named, Places
from src.scaffold.config.parse import convert
from src.scaffold.errors import CheckpointError, ConfigError
from src.scaffold.outputs.checkpoints import POINTER, SUM, find_latest, read_json, read_pointer
from src.scaffold.outputs.record import ARTIFACTS, HPARAMS, METRICS
from src.scaffold.storage import where as storage
from src.scaffold.storage.once import Once
from src.scaffold.storage.uploads import Remote

# The options that shape a model's inputs and outputs, which eval, predict and export take.
INPUTS = tuple(
    "model model_args data_url dataset_name train_dir test_dir data_format data_label_column"
    " data_labels data_resize data_test_fraction data_mean data_std seed val_fraction num_classes"
    " data_block_size data_tokenizer batch_size amp context_mode amp_level init_from lora_rank"
    " lora_alpha lora_dropout lora_target_modules".split()
)
# What every attempt takes from its own command line and environment instead.
OWN = tuple(
    "train_url resume pretrained skip_layers device_target device_num device_id"
    " tensorboard_dir config_path smoke strict".split()
)
# The checkpoint's meta (data/splits.py's CHECKPOINT_META) by the option it answers for.
FROM_CHECKPOINT = {
    "model_name": "model",
    "model_args": "model_args",
    "data_mean": "data_mean",
    "data_std": "data_std",
    "data_resize": "data_resize",
    "label_column": "data_label_column",
    "init_from": "init_from",
}


def recorded(directory: Path) -> dict[str, Any]:
    """hparams.json's options (the newest attempt's, the resolved model); {} without one."""
    values = read_json(directory / HPARAMS)
    if not isinstance(values, dict):
        return {}
    resolved = values.get("resolved") if isinstance(values.get("resolved"), dict) else {}
    own = values.get("model") is None and not values.get("init_from")  # not init_from's model
    if own and isinstance(resolved.get("model"), str):
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


class Adopted(NamedTuple):
    """The run's values where no flag said otherwise; the flags and config.yaml's that differ;
    a restart's line; where a run without --resume finds another, the options that differ."""

    changes: dict[str, Any]
    notes: list[str]
    kept: list[str]
    restart: str | None = None
    differs: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """A restart, each flag that differs from the run, then config.yaml's other options."""
        said = [self.restart] if self.restart else []
        said += [f"note: {note}: using the flag's" for note in self.notes]
        if self.kept:
            said.append(
                "note: the run's own options, where config.yaml now says otherwise: "
                + ", ".join(self.kept)
                + " (a flag changes them)"
            )
        return said


def adopt(
    asked: Named,
    record: dict[str, Any],
    meta: dict[str, Any],
    names: tuple[str, ...] | None,
    what: str,
) -> Adopted:
    """The options ``names`` (None: all but OWN) as the run's record and checkpoint give them,
    where they differ from ``asked``; ``what`` names the checkpoint in the lines. A --model
    that is not the checkpoint's is a ConfigError: its weights fit no other model."""
    options = asked.declared
    wanted = [n for n in options if (n in names if names is not None else n not in OWN)]
    theirs: dict[str, Any] = {}
    for name in [n for n in wanted if n in record]:
        try:
            theirs[name] = convert(options[name], record[name], Path("."))
        except Exception:  # noqa: BLE001 (an option another version wrote: not ours)
            continue
    from_checkpoint = {opt: meta[key] for key, opt in FROM_CHECKPOINT.items() if meta.get(key)}
    if meta.get("init_from"):  # its model_name is init_from's (config.json's model_type)
        from_checkpoint.pop("model", None)
    if meta.get("numeric"):
        from_checkpoint["data_labels"] = "values"
    for name, value in from_checkpoint.items():
        if name in wanted:
            theirs[name] = convert(options[name], value, Path("."))
    model = theirs.get("model")
    if "model" in asked.given and model is not None and asked.values["model"] != model:
        raise ConfigError(
            f"{what} holds model {model}'s weights; --model {asked.values['model']} is another "
            f"model: leave --model out to use {model}"
        )
    notes, kept, changes = [], [], {}
    for name, value in theirs.items():
        current = asked.values[name]
        if _same(current, value):
            continue
        if name in asked.given:
            notes.append(f"--{name} {_shown(current)} differs from the run's {_shown(value)}")
            continue
        changes[name] = value
        if not (name in ("data_mean", "data_std") and not current):  # computed by the run
            kept.append(f"{options[name].key} {_shown(value)} (config.yaml: {_shown(current)})")
    return Adopted(changes, notes, kept)


def model_mismatch(what: str, model: str, own: dict, theirs: dict) -> CheckpointError | None:
    """One line when a checkpoint's tensors (name -> shape) do not fit the model's, else None."""
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
    """A restarted job's last checkpoint (with its checksum) and record from the platform,
    once per node; the newest kept before it too, should the last be damaged."""
    try:
        if find_latest(output, suffix) is not None:
            return
    except CheckpointError:
        pass  # none here is intact: the platform's copies may be

    def get() -> None:
        output.mkdir(parents=True, exist_ok=True)
        if remote.get([POINTER], output):
            pointer = read_pointer(output)
            names = [pointer.get("latest"), *list(pointer.get("scores") or {})[::-1][:2]]
            names = [n for n in dict.fromkeys(names) if isinstance(n, str)]
            remote.get([*names, *(name + SUM for name in names)], output)
            # A sharded checkpoint's shards, as its sidecar lists them.
            sums = (read_json(output / (name + SUM)) for name in names)
            remote.get(
                [part for s in sums if isinstance(s, dict) for part in s.get("parts", ())], output
            )
        remote.get([HPARAMS, METRICS, ARTIFACTS], output)

    Once(output, "resume-fetch", remote.where).run(get, "fetch the last checkpoint", 1800)


def differences(asked: Named, record: dict[str, Any]) -> tuple[str, ...]:
    """The options (all but OWN) a run was recorded with that differ from ``asked``'s."""
    found: list[str] = []
    if not any(name in record for name in asked.declared):
        return ("no options in its record",)
    for name, option in asked.declared.items():
        if name in OWN:
            continue
        if name not in record:  # another version's record, or none: not known to be the same
            found.append(f"{option.key} not in its record")
            continue
        try:
            theirs = convert(option, record[name], Path("."))
        except Exception:  # noqa: BLE001 (an option another version wrote: not ours)
            continue
        if not _same(asked.values[name], theirs):
            found.append(
                f"its {option.key} {_shown(theirs)}, this one's {_shown(asked.values[name])}"
            )
    return tuple(found)


def held(places: Places) -> tuple[str, dict[str, Any]] | None:
    """(where, hparams.json) of the run the outputs hold here, else on the platform's side."""
    output, remote = storage.outputs(places)
    record = read_json(output / HPARAMS)
    if isinstance(record, dict):
        return str(output), record
    if remote is None or not remote.holds(HPARAMS):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        remote.get([HPARAMS], Path(tmp))
        record = read_json(Path(tmp) / HPARAMS)
    return (remote.where, record) if isinstance(record, dict) else None


def restarted(asked: Named, places: Places) -> tuple[str | None, tuple[str, ...]]:
    """(the line, None where no run is held) and the options that differ: a run held with none
    differing is this command's, restarted (by a platform, a launcher, a person): it continues."""
    if (found := held(places)) is None:
        return None, ()
    where, record = found
    differ = differences(asked, record)
    run = f"run {record['run_id']}" if isinstance(record.get("run_id"), str) else "a run"
    line = f"{where} holds {run} with this command's options: continuing it (a restart)"
    return line, differ


def continuing(asked: Named, places: Places, framework: Any) -> Adopted:
    """A resumed run's options and model, as its record gives them (flags still win); without
    --resume, where the outputs hold this command's own run (a restart), the same as auto."""
    resume, restart = asked.values["resume"], None
    if resume is None:
        restart, differ = restarted(asked, places)
        if restart is None or differ:
            return Adopted({}, [], [], None, differ)
        resume = "auto"
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
    adopted = adopt(asked, record, meta, None, what)
    if restart is None:
        return adopted
    return adopted._replace(changes={**adopted.changes, "resume": "auto"}, restart=restart)
