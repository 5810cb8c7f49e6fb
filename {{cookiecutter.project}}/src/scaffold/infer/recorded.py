"""A run's checkpoint, chosen (best by the monitored metric, last, or a path) and brought
from where the run left it (local, or obs://), with what it and the run's record say of its
model and data (src/scaffold/outputs/truth.py): enough to evaluate, predict and export with
no option repeated. A run still training is known (src/scaffold/outputs/live.py): its newest
finished checkpoint is the one taken, and the commands say so first."""

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
# The files of a directory a line lists, at most.
LISTED = 4


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


@dataclass(frozen=True)
class Located:
    """A run's checkpoint found: the options the run recorded where the command's differ
    (flags win; by option name), what the checkpoint records, the data on this node, the
    run's directory and remote, and the run itself while it still trains."""

    changes: dict[str, Any]
    recorded: Recorded
    where: storage.Storage
    run_dir: Path
    remote: Remote | None
    running: live.Running | None
    # best, last (the newest of a finished run), newest (of a run still training), or a path.
    chosen: str
    notes: tuple[str, ...] = ()

    def first(self) -> list[str]:
        """What a command says before its work: that the run is still training."""
        if self.running is None:
            return []
        return [
            f"note: {self.running.describe()}: taking its newest finished checkpoint, "
            f"{self.recorded.path.name}"
        ]

    def said(self, stream: Any = None) -> None:
        """The notes of a command that did its work: the flags that differ from the run,
        the options config.yaml gives otherwise (a failed command says its one line only)."""
        for line in self.notes:
            print(line, file=stream or sys.stderr, flush=True)

    def scored(self, split: str) -> str:
        """The line saying which checkpoint is scored: eval.py's first."""
        kind = self.chosen if self.chosen in (*CHOICES, "newest") else "given"
        epoch = f", epoch {self.recorded.epoch}" if self.recorded.epoch is not None else ""
        return (
            f"scoring the {kind} checkpoint {self.recorded.path.name}{epoch} on the {split} split"
        )


def _listing(output: Path) -> str:
    names = sorted(p.name for p in output.iterdir() if not p.name.startswith("."))
    if not names:
        return "is empty"
    more = ", ..." if len(names) > LISTED else ""
    return f"holds no checkpoint yet ({', '.join(names[:LISTED])}{more})"


def choose(output: Path, which: str, suffix: str, running: live.Running | None = None) -> Path:
    """The checkpoint ``which`` (best, last) of the run in ``output`` by its latest.json; one
    line saying what the directory holds when there is none."""
    pointer = read_pointer(output)
    name = pointer.get("best" if which == "best" else "latest")
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
    else:
        found = _listing(output)
    if running is not None:
        raise CheckpointError(
            f"{output} {found}: {running.describe()} and has not finished its first epoch; "
            "try again after it"
        )
    raise CheckpointError(f"{output} {found}: give the run's --train_url, or --checkpoint PATH")


def _fetch(output: Path, remote: Remote, which: str | None) -> None:
    """A platform run's pointer, record and chosen checkpoint, brought from its outputs."""
    output.mkdir(parents=True, exist_ok=True)
    if remote.get([POINTER], output):
        pointer = read_pointer(output)
        name = pointer.get("latest" if which == "last" else "best")
        remote.get([n for n in (name,) if isinstance(n, str)], output)
    remote.get([METRICS, HPARAMS], output)


def locate(asked: Named, places: Places, framework: Framework, which: str | None) -> Located:
    """The checkpoint ``which`` names (best or last of the run in train_url, fetched
    from obs:// for a platform run; None: the best, or the newest of a run still training;
    or a path, whose directory is its run's), what it records, the options as the run's
    record gives them (flags win), and the data those options name, on this node."""
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
        if remote is not None:
            _fetch(run_dir, remote, which)
        running = live.running(run_dir)
        chosen = which or ("newest" if running is not None else "best")
        path = choose(run_dir, "last" if chosen == "newest" else chosen, suffix, running)
    meta = framework.read_meta(path, "--checkpoint")
    recorded = Recorded.of(path, meta)
    said = f"--checkpoint {path}"
    adopted = truth.adopt(asked, truth.recorded(run_dir), meta, truth.INPUTS, said)
    data_url = adopted.changes.get("data_url", places.data_url)
    where = storage.prepare(replace(places, data_url=data_url))
    found = (recorded, where, run_dir, remote, running, chosen, tuple(adopted.lines()))
    return Located(adopted.changes, *found)
