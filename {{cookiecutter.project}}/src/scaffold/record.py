"""A run record in the t9k experiment SDK's shape, as plain files in the output directory.

hparams.json      the run's hyperparameters
metrics.jsonl     one line per log call: type (train|val|test), step, epoch, metrics, time
artifacts.json    the files the run produced: path (relative), bytes, sha256
Only rank 0 writes; on other ranks every method does nothing. Given a TensorBoard
directory (a C2Net job's LOCAL_TENSORBOARD_PATH), the metrics go there too.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from src.scaffold.errors import ConfigError
from src.scaffold.tensorboard import EventWriter

HPARAMS = "hparams.json"
METRICS = "metrics.jsonl"
ARTIFACTS = "artifacts.json"
TYPES = ("train", "val", "test")


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


class RunRecord:
    """Writes the record of one run into output_dir; a no-op unless enabled (rank 0).

    A new run replaces the metrics and artifacts of an earlier run in the same
    directory; a resumed run (append=True) adds to them.
    """

    def __init__(
        self,
        output_dir: Path,
        enabled: bool = True,
        append: bool = False,
        tensorboard: Path | None = None,
    ) -> None:
        self.output_dir = output_dir
        self.enabled = enabled
        self._artifacts: list[dict[str, object]] = []
        self.events = None
        if not enabled:
            return
        if tensorboard is not None:
            self.events = EventWriter(tensorboard)
        try:
            output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"cannot create output directory {output_dir}: {err.strerror}"
            ) from err
        artifacts = output_dir / ARTIFACTS
        if append and artifacts.is_file():
            self._artifacts = json.loads(artifacts.read_text(encoding="utf-8"))
        elif not append:
            (output_dir / METRICS).unlink(missing_ok=True)
            artifacts.unlink(missing_ok=True)

    def log_hparams(self, hparams: Mapping[str, object]) -> None:
        """Write the hyperparameters (JSON values; paths and the like as strings)."""
        if self.enabled:
            _write_json(self.output_dir / HPARAMS, dict(hparams))

    def log(self, type: str, metrics: Mapping[str, float], step: int, epoch: int) -> None:
        """Append one line of metrics at a global step and epoch (t9k's ``Run.log`` keywords)."""
        if not self.enabled:
            return
        if type not in TYPES:
            raise ValueError(f"metrics type {type!r} is not one of {', '.join(TYPES)}")
        line = {
            "type": type,
            "step": step,
            "epoch": epoch,
            "metrics": dict(metrics),
            "time": time.time(),
        }
        with (self.output_dir / METRICS).open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(line) + "\n")
        if self.events is not None:
            self.events.scalars(step, {f"{type}/{name}": v for name, v in metrics.items()})

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
