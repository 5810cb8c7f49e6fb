"""The record of one run, as plain files in its output directory (and TensorBoard, MLflow).

hparams.json      the options as asked, the run's id, and what they resolved to
metrics.jsonl     one flat JSON object per line: run, type, epoch, step, time and the
                  metrics themselves, so pandas.read_json(path, lines=True) loads it as is.
                  type "step": every log_every steps (loss, lr, samples_per_s); "train":
                  each epoch (loss, lr, samples_per_s, seconds); "val": each epoch, and
                  every validate_every optimizer steps; "test": once at the end
artifacts.json    the files the run produced: path (relative), bytes, sha256
Only rank 0 writes; on other ranks every method does nothing. A resumed run first drops
what the interrupted attempt logged after its checkpoint, so every step is there once.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from src.scaffold.errors import ConfigError
from src.scaffold.outputs.tensorboard import EventWriter, truncate

HPARAMS = "hparams.json"
METRICS = "metrics.jsonl"
ARTIFACTS = "artifacts.json"
# eval.py's rows for a run that is still training: its metrics.jsonl stays the run's own.
EVALS = "eval.jsonl"
TYPES = ("step", "train", "val", "test", "stop")
# eval.py adds "eval" rows: a checkpoint scored again (split, checkpoint, the metrics).
# TensorBoard and MLflow names: type "step" is the train curve, "train" its epoch means.
PREFIX = {"step": "train", "train": "train_epoch", "val": "val", "test": "test"}


def sha256_of(path: Path) -> str:
    """The file's SHA-256, read in chunks so a large checkpoint is not loaded whole."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_json(path: Path, value: object) -> None:
    # Write then rename: a reader never sees half a file, even if the job is killed.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _markdown(hparams: Mapping[str, Any]) -> str:
    """The hyperparameters as a two-column markdown table for TensorBoard's Text tab."""
    rows = [f"| {key} | {json.dumps(value)} |" for key, value in hparams.items()]
    return "\n".join(["| option | value |", "|---|---|", *rows])


class RunRecord:
    """Writes the record of run ``run_id`` into output_dir; a no-op unless enabled (rank 0).

    ``resumed_after``: None for a new run (its directory holds no other run's outputs:
    outputs/rundir.py), else the training step its checkpoint was taken at (0: restarted
    from scratch).
    """

    def __init__(
        self,
        output_dir: Path,
        run_id: str,
        enabled: bool = True,
        resumed_after: int | None = None,
        tensorboard: Path | None = None,
        tracker: Any = None,
    ) -> None:
        self.output_dir, self.run_id, self.enabled = output_dir, run_id, enabled
        self._artifacts: list[dict[str, object]] = []
        self.events: EventWriter | None = None
        self.tracker = tracker
        self._last_step = 0
        # The options of earlier attempts of a resumed run, oldest first.
        self._attempts: list[dict[str, Any]] = []
        self._lines: TextIO | None = None
        if not enabled:
            return
        try:
            output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"cannot create output directory {output_dir}: {err.strerror}"
            ) from err
        if resumed_after is not None:
            self._rewind(resumed_after)
        if tensorboard is not None:
            if resumed_after is not None:
                truncate(tensorboard, self._last_step)
            self.events = EventWriter(tensorboard)

    def _rewind(self, step: int) -> None:
        """Keep what earlier attempts logged up to ``step`` and every test they scored (a
        finished run continued for more epochs keeps its first test), and the artifacts
        that are still there."""
        metrics = self.output_dir / METRICS
        if metrics.is_file():
            lines = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
            kept = [line for line in lines if line["step"] <= step or line["type"] == "test"]
            trained = [line["step"] for line in kept if line["type"] != "test"]
            self._last_step = max(trained, default=0)
            tmp = metrics.with_name(f".{METRICS}.tmp")
            tmp.write_text("".join(json.dumps(line) + "\n" for line in kept), encoding="utf-8")
            os.replace(tmp, metrics)
        try:
            earlier = json.loads((self.output_dir / HPARAMS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            earlier = None
        if isinstance(earlier, dict):
            attempts = earlier.pop("attempts", None)
            self._attempts = attempts if isinstance(attempts, list) else [earlier]
        artifacts = self.output_dir / ARTIFACTS
        if artifacts.is_file():
            listed = json.loads(artifacts.read_text(encoding="utf-8"))
            self._artifacts = [a for a in listed if (self.output_dir / a["path"]).is_file()]

    def log_hparams(self, hparams: Mapping[str, object]) -> None:
        """Write the hyperparameters (JSON values; paths and the like as strings). A resumed
        run keeps every attempt's under "attempts", the first one's included; the latest
        are also at the top."""
        if not self.enabled:
            return
        values: dict[str, Any] = {"run_id": self.run_id, **hparams}
        if self._attempts:
            values["attempts"] = [*self._attempts, dict(values)]
        _write_json(self.output_dir / HPARAMS, values)
        if self.events is not None:
            # At the attempt's first step: each attempt's options once, none replaced.
            self.events.text(self._last_step, "hparams", _markdown(values))
        if self.tracker is not None:
            self.tracker.params(values)

    def log(
        self, type: str, metrics: Mapping[str, float], step: int, epoch: int, **about: str
    ) -> None:
        """Append one line of metrics at a global step and epoch; ``about`` (the checkpoint
        a test scored) goes into the line only, not to TensorBoard or MLflow."""
        if not self.enabled:
            return
        if type not in TYPES:
            raise ValueError(f"metrics type {type!r} is not one of {', '.join(TYPES)}")
        line = {"run": self.run_id, "type": type, "epoch": epoch, "step": step, **about}
        line.update({"time": time.time(), **metrics})
        if self._lines is None:
            # Kept open, a line at a time: a killed job leaves whole lines only.
            self._lines = (self.output_dir / METRICS).open("a", encoding="utf-8", buffering=1)
        self._lines.write(json.dumps(line) + "\n")
        named = {f"{PREFIX[type]}/{name}": float(v) for name, v in metrics.items()}
        if self.events is not None:
            self.events.scalars(step, named)
        if self.tracker is not None:
            self.tracker.metrics(named, step)

    def remove_artifact(self, path: Path) -> None:
        """Forget a file under output_dir that was deleted (a checkpoint no longer kept)."""
        if not self.enabled:
            return
        relative = path.as_posix()
        self._artifacts = [a for a in self._artifacts if a["path"] != relative]
        _write_json(self.output_dir / ARTIFACTS, self._artifacts)

    def add_artifact(self, path: Path) -> None:
        """Record a file under output_dir with its size and hash (replacing an older entry)."""
        if not self.enabled:
            return
        relative = path.resolve().relative_to(self.output_dir.resolve()).as_posix()
        entry = {"path": relative, "bytes": path.stat().st_size, "sha256": sha256_of(path)}
        self._artifacts = [a for a in self._artifacts if a["path"] != relative] + [entry]
        _write_json(self.output_dir / ARTIFACTS, self._artifacts)
        if self.tracker is not None:
            self.tracker.artifact(path)

    def finish(self, failed: bool) -> None:
        """The run ended (MLflow marks it finished or failed)."""
        if self._lines is not None:
            self._lines.close()
        if self.events is not None:
            self.events.close()
        self._lines, self.events = None, None
        if self.enabled and self.tracker is not None:
            self.tracker.finish(failed)
