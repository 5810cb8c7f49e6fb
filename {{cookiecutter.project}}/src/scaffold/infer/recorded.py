"""A run's checkpoint, brought from where the run left it, with what it and the run's record
(outputs/truth.py) say of its model and data: enough to evaluate, predict and export."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from src.scaffold.backend.api import Framework
from src.scaffold.config import Named, Places
from src.scaffold.errors import CheckpointError
from src.scaffold.outputs import live, truth
from src.scaffold.outputs.checkpoints import POINTER, read_pointer
from src.scaffold.outputs.record import HPARAMS, METRICS
from src.scaffold.storage import where as storage
from src.scaffold.storage.uploads import Remote
from src.scaffold.task import DataShape

CHOICES = ("best", "last")
CHECKPOINT_HELP = (
    "best (default; the newest while the run still trains) or last of the run, or a path"
)
LISTED = 4  # the files of a directory a line lists, at most


@dataclass(frozen=True)
class Recorded:
    """What a checkpoint holds besides its weights (data/splits.py's CHECKPOINT_META)."""

    path: Path
    epoch: int | None
    model_name: str
    shape: tuple[int, ...]
    num_classes: int
    classes: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    features: tuple[str, ...] = ()
    label_column: str | None = None
    resize: tuple[int, ...] | None = None
    numeric: bool = False
    ids: bool = False  # inputs of integer ids (tokens)
    label_shape: tuple[int, ...] = ()  # (T,): a class a position; () one a sample
    tokenizer: dict[str, Any] | None = None  # ids of text: data/tokens.py's description

    @classmethod
    def of(cls, path: Path, meta: dict[str, Any]) -> Recorded:
        if lacks := [key for key in ("model_name", "data_shape") if key not in meta]:
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
            features=tuple(meta.get("data_features") or ()),
            label_column=meta.get("label_column"),
            resize=tuple(meta["data_resize"]) if meta.get("data_resize") else None,
            numeric=bool(meta.get("numeric")),
            ids=bool(meta.get("data_ids")),
            label_shape=tuple(int(side) for side in meta.get("label_shape") or ()),
            tokenizer=meta.get("tokenizer"),
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


@dataclass(frozen=True)
class Located:
    """A run's checkpoint found: the run's options where the command's differ, and more."""

    changes: dict[str, Any]
    recorded: Recorded
    where: storage.Storage
    run_dir: Path
    remote: Remote | None
    running: live.Running | None
    chosen: str  # best, last, newest (of a run still training), or a path
    notes: tuple[str, ...] = ()

    def said(self) -> None:
        """The notes of a command that did its work (a failed one says its one line only)."""
        for line in self.notes:
            print(line, file=sys.stderr, flush=True)


def choose(output: Path, which: str, suffix: str, running: live.Running | None = None) -> Path:
    """The checkpoint ``which`` (best, last) of the run in ``output`` by its latest.json."""
    name = read_pointer(output).get("best" if which == "best" else "latest")
    if isinstance(name, str) and (output / name).is_file():
        if not name.endswith(suffix):
            raise CheckpointError(
                f"{output / name} is not a checkpoint of this framework ({suffix})"
            )
        return output / name
    if not output.is_dir():
        found = "does not exist"
    elif isinstance(name, str):
        found = f"has a {POINTER} naming {name}, which is not there"
    elif names := sorted(p.name for p in output.iterdir() if not p.name.startswith(".")):
        more = ", ..." if len(names) > LISTED else ""
        found = f"holds no checkpoint yet ({', '.join(names[:LISTED])}{more})"
    else:
        found = "is empty"
    if running is not None:
        raise CheckpointError(
            f"{output} {found}: {running.describe()} and has not finished its first epoch; "
            "try again after it"
        )
    raise CheckpointError(f"{output} {found}: give the run's --train_url, or --checkpoint PATH")


def locate(asked: Named, places: Places, framework: Framework, which: str | None) -> Located:
    """The checkpoint ``which`` names (best, last, a path; None: the best, or the newest of a
    run still training), what it records, the run's options (flags win), and their data."""
    suffix = framework.CHECKPOINT_SUFFIX
    remote: Remote | None = None
    if which is not None and which not in CHOICES:
        path = Path(which)
        if not path.is_file():
            raise CheckpointError(f"--checkpoint {path}: no such file")
        run_dir, chosen = path.parent, str(path)
        running = live.running(run_dir)
    else:
        run_dir, remote = storage.outputs(places)
        if remote is not None:  # a platform run's pointer, record and chosen checkpoint
            run_dir.mkdir(parents=True, exist_ok=True)
            if remote.get([POINTER], run_dir):
                name = read_pointer(run_dir).get("latest" if which == "last" else "best")
                remote.get([n for n in (name,) if isinstance(n, str)], run_dir)
            remote.get([METRICS, HPARAMS], run_dir)
        running = live.running(run_dir)
        chosen = which or ("newest" if running is not None else "best")
        path = choose(run_dir, "last" if chosen == "newest" else chosen, suffix, running)
    meta = framework.read_meta(path, "--checkpoint")
    recorded = Recorded.of(path, meta)
    said = f"--checkpoint {path}"
    adopted = truth.adopt(asked, truth.recorded(run_dir), meta, truth.INPUTS, said)
    data_url = adopted.changes.get("data_url", places.data_url)
    where = storage.prepare(replace(places, data_url=data_url))
    if running is not None:  # said before the command's work
        note = f"{running.describe()}: taking its newest finished checkpoint"
        print(f"note: {note}, {path.name}", file=sys.stderr, flush=True)
    found = (recorded, where, run_dir, remote, running, chosen, tuple(adopted.lines()))
    return Located(adopted.changes, *found)
