"""A run's checkpoint, chosen (best by the monitored metric, last, or a path) and brought
from where the run left it (local, or obs://), with what it records of its model and data:
enough to evaluate, predict and export without the run's options."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Protocol

from src.scaffold.backend.api import Backend
from src.scaffold.config import Config
from src.scaffold.errors import CheckpointError
from src.scaffold.outputs.checkpoints import POINTER, read_pointer
from src.scaffold.outputs.record import HPARAMS, METRICS
from src.scaffold.storage import obs
from src.scaffold.storage import where as storage
from src.scaffold.task import DataShape, Task

CHOICES = ("best", "last")


class Framework(Protocol):
    """What eval.py, predict.py and export.py take of a framework: its module
    src/scaffold/backend/core.py."""

    CHECKPOINT_SUFFIX: str
    create: Callable[[Any, Task], Backend]

    def read_meta(self, path: Path, what: str = "--checkpoint") -> dict[str, Any]: ...


@dataclass(frozen=True)
class Recorded:
    """What a checkpoint holds besides its weights (src/scaffold/data/splits.py's
    CHECKPOINT_META): the model, the classes in output order, the inputs and how they were
    read and normalised."""

    path: Path
    epoch: int | None
    model_name: str
    shape: tuple[int, ...]
    num_classes: int
    classes: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    format: str
    features: tuple[str, ...] = ()
    label_column: str | None = None
    resize: tuple[int, ...] | None = None
    numeric: bool = False

    @classmethod
    def of(cls, path: Path, meta: dict[str, Any]) -> Recorded:
        lacks = [key for key in ("model_name", "data_shape") if key not in meta]
        if lacks:
            raise CheckpointError(
                f"--checkpoint {path} does not record its {', '.join(lacks)} (written by "
                "another program, or by a train.py older than predict.py): train again"
            )
        return cls(
            path=path,
            epoch=meta.get("epoch"),
            model_name=str(meta["model_name"]),
            shape=tuple(int(side) for side in meta["data_shape"]),
            # Older checkpoints record the class names only.
            num_classes=int(meta.get("num_classes") or len(meta.get("classes") or ())),
            classes=tuple(str(name) for name in meta.get("classes") or ()),
            mean=tuple(float(m) for m in meta.get("data_mean") or ()),
            std=tuple(float(s) for s in meta.get("data_std") or ()),
            format=str(meta.get("data_format") or ""),
            features=tuple(meta.get("data_features") or ()),
            label_column=meta.get("label_column"),
            resize=tuple(meta["data_resize"]) if meta.get("data_resize") else None,
            numeric=bool(meta.get("numeric")),
        )

    @property
    def data_shape(self) -> DataShape:
        return DataShape(self.shape, self.num_classes)

    @property
    def images(self) -> bool:
        return len(self.shape) == 3

    def names(self) -> tuple[str, ...]:
        """A name for each output: the data's class names, else the class indices."""
        if len(self.classes) == self.num_classes:
            return self.classes
        return tuple(str(index) for index in range(self.num_classes))

    def config(self, cfg: Config) -> Config:
        """The options as the checkpoint records them: its model and normalisation win."""
        recorded: dict[str, Any] = {"model": self.model_name}
        if self.mean and self.std:
            recorded["data_mean"], recorded["data_std"] = self.mean, self.std
        return replace(cfg, **recorded)


def choose(output: Path, which: str, suffix: str) -> Path:
    """The checkpoint ``which`` names: best or last of the run in ``output`` (its
    latest.json), or a path; one line when there is none."""
    if which not in CHOICES:
        path = Path(which)
        if not path.is_file():
            raise CheckpointError(f"--checkpoint {path}: no such file")
        return path
    pointer = read_pointer(output)
    name = pointer.get("best" if which == "best" else "latest")
    if not isinstance(name, str) or not (output / name).is_file():
        raise CheckpointError(
            f"{output} holds no {which} checkpoint ({POINTER} names none there): give the run's "
            "--train_url, or --checkpoint PATH"
        )
    if not name.endswith(suffix):
        raise CheckpointError(f"{output / name} is not a checkpoint of this framework ({suffix})")
    return output / name


def _fetch(where: storage.Storage, which: str) -> None:
    """A platform run's pointer and chosen checkpoint, brought from its remote outputs."""
    remote = where.remote
    if remote is None:
        return
    where.output.mkdir(parents=True, exist_ok=True)
    if remote.get([POINTER], where.output) and which in CHOICES:
        pointer = read_pointer(where.output)
        name = pointer.get("best" if which == "best" else "latest")
        remote.get([name, METRICS, "hparams.json"] if name else [METRICS], where.output)


def run_data(cfg: Config) -> Config:
    """The data the run in cfg's train_url read (its hparams.json), unless --data_url,
    --train_dir or --test_dir says otherwise: a run on other data is scored on that."""
    if {"data_url", "train_dir", "test_dir"} & set(cfg.given) or obs.is_url(cfg.train_url):
        return cfg
    try:
        hparams = json.loads((Path(cfg.train_url) / HPARAMS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return cfg
    data = hparams.get("data_url") if isinstance(hparams, dict) else None
    if not isinstance(data, str) or not (obs.is_url(data) or Path(data).exists()):
        return cfg
    dirs = {key: hparams.get(key) for key in ("train_dir", "test_dir")}
    found = {key: Path(value) for key, value in dirs.items() if value and Path(value).exists()}
    return replace(cfg, data_url=data, **found)


def locate(
    cfg: Config, framework: Framework, which: str
) -> tuple[storage.Storage, Recorded, Config]:
    """Where the run's outputs are (fetched from obs:// for a platform run), the checkpoint
    ``which`` with what it records, and the options as it records them; the data the run
    read, unless the options name other data."""
    where = storage.prepare(run_data(cfg))
    _fetch(where, which)
    path = choose(where.output, which, framework.CHECKPOINT_SUFFIX)
    recorded = Recorded.of(path, framework.read_meta(path, "--checkpoint"))
    return where, recorded, recorded.config(replace(cfg, data_url=where.data))
