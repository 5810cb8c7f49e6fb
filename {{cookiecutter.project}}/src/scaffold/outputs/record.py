"""The record of one run (rank 0): hparams.json, metrics.jsonl (one flat JSON object a line),
artifacts.json (path, bytes, sha256), TensorBoard, MLflow; a resume drops what came after."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from src.scaffold.errors import ConfigError
from src.scaffold.outputs.checkpoints import disk_full, read_json, replace_text
from src.scaffold.outputs.tensorboard import EventWriter, truncate

HPARAMS = "hparams.json"
METRICS = "metrics.jsonl"
ARTIFACTS = "artifacts.json"
# eval.py's rows for a run that is still training: its metrics.jsonl stays the run's own.
EVALS = "eval.jsonl"
TYPES = ("step", "train", "val", "test", "stop")
# TensorBoard and MLflow names: type "step" is the train curve, "train" its epoch means.
PREFIX = {"step": "train", "train": "train_epoch", "val": "val", "test": "test"}


class RunRecord:
    """The record of run ``run_id``, unless not enabled; ``resumed_after``: a checkpoint's step."""

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
        self.tracker, self._last_step = tracker, 0
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
        """Keep what earlier attempts logged up to ``step``, their tests and the artifacts left."""
        metrics = self.output_dir / METRICS
        if metrics.is_file():
            lines = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
            kept = [line for line in lines if line["step"] <= step or line["type"] == "test"]
            trained = [line["step"] for line in kept if line["type"] != "test"]
            self._last_step = max(trained, default=0)
            replace_text(metrics, "".join(json.dumps(line) + "\n" for line in kept))
        earlier = read_json(self.output_dir / HPARAMS)
        if isinstance(earlier, dict):
            attempts = earlier.pop("attempts", None)
            self._attempts = attempts if isinstance(attempts, list) else [earlier]
        artifacts = self.output_dir / ARTIFACTS
        if artifacts.is_file():
            listed = json.loads(artifacts.read_text(encoding="utf-8"))
            self._artifacts = [a for a in listed if (self.output_dir / a["path"]).is_file()]

    def log_hparams(self, hparams: Mapping[str, object]) -> None:
        """The hyperparameters; a resumed run's earlier attempts' too, under "attempts"."""
        if not self.enabled:
            return
        values: dict[str, Any] = {"run_id": self.run_id, **hparams}
        if self._attempts:
            values["attempts"] = [*self._attempts, dict(values)]
        replace_text(self.output_dir / HPARAMS, json.dumps(values, indent=2) + "\n")
        if self.events is not None:
            # A markdown table in the Text tab, at the attempt's first step: each attempt's once.
            rows = [f"| {key} | {json.dumps(value)} |" for key, value in values.items()]
            table = "\n".join(["| option | value |", "|---|---|", *rows])
            self.events.text(self._last_step, "hparams", table)
        if self.tracker is not None:
            self.tracker.params(values)

    def log(
        self, type: str, metrics: Mapping[str, float], step: int, epoch: int, **about: str
    ) -> None:
        """Append one line of metrics; ``about`` (a test's checkpoint) goes into the line only."""
        if not self.enabled:
            return
        if type not in TYPES:
            raise ValueError(f"metrics type {type!r} is not one of {', '.join(TYPES)}")
        line = {"run": self.run_id, "type": type, "epoch": epoch, "step": step, **about}
        line.update({"time": time.time(), **metrics})
        if self._lines is None:
            # Kept open, a line at a time: a killed job leaves whole lines only.
            self._lines = (self.output_dir / METRICS).open("a", encoding="utf-8", buffering=1)
        text = json.dumps(line) + "\n"
        try:
            self._lines.write(text)
        except OSError as err:
            if (full := disk_full(err, self.output_dir / METRICS, len(text))) is None:
                raise
            raise full from err
        named = {f"{PREFIX[type]}/{name}": float(v) for name, v in metrics.items()}
        if self.events is not None:
            self.events.scalars(step, named)
        if self.tracker is not None:
            self.tracker.metrics(named, step)

    def _list_artifacts(self, relative: str, *entry: dict[str, object]) -> None:
        self._artifacts = [a for a in self._artifacts if a["path"] != relative] + [*entry]
        replace_text(self.output_dir / ARTIFACTS, json.dumps(self._artifacts, indent=2) + "\n")

    def remove_artifact(self, path: Path) -> None:
        """Forget a file under output_dir that was deleted (a checkpoint no longer kept)."""
        if self.enabled:
            self._list_artifacts(path.as_posix())

    def add_artifact(self, path: Path) -> None:
        """Record a file under output_dir with its size and hash (replacing an older entry)."""
        if not self.enabled:
            return
        relative = path.resolve().relative_to(self.output_dir.resolve()).as_posix()
        digest = hashlib.sha256()
        with path.open("rb") as stream:  # in chunks: a large checkpoint is not read in whole
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
        entry = {"path": relative, "bytes": path.stat().st_size, "sha256": digest.hexdigest()}
        self._list_artifacts(relative, entry)
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
