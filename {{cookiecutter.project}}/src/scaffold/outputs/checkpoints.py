"""Checkpoints on disk (mynet_epoch7.pt; inside an epoch mynet_epoch8_step350.pt, only the
newest kept): the newest N and the best by config.yaml's monitor: kept, latest.json naming them."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from src.scaffold.task import Monitor

POINTER = "latest.json"
MARK = "_epoch"


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # where /proc does not say: read it by setting it back
    os.umask(mask)
    return mask


def usual_mode(path: Path) -> None:
    """The mode a new file gets (0666 less the umask): MindSpore's saves are read-only (0400)."""
    os.chmod(path, 0o666 & ~_umask())


def name(epoch: int, suffix: str, model: str, step: int | None = None) -> str:
    """mynet_epoch7.pt after ``epoch``, mynet_epoch7_step350.pt at training ``step`` in it."""
    inside = "" if step is None else f"_step{step}"
    return f"{model}{MARK}{epoch}{inside}{suffix}"


def _order(path: Path, suffix: str) -> tuple[int, float] | None:
    """(epoch, step) of a checkpoint's name; an epoch's own comes after its steps."""
    pattern = rf"[A-Za-z0-9_.-]+?{MARK}(\d+)(?:_step(\d+))?{re.escape(suffix)}"
    if (match := re.fullmatch(pattern, path.name)) is None:
        return None
    step = match.group(2)
    return int(match.group(1)), float("inf") if step is None else int(step)


def read_json(path: Path) -> Any:
    """The JSON value in ``path``; None where it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def replace_text(path: Path, text: str) -> None:
    """Write then rename: a reader never sees half a file, even if the job is killed."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_pointer(directory: Path) -> dict:
    value = read_json(directory / POINTER)
    return value if isinstance(value, dict) else {}


def find_latest(directory: Path, suffix: str) -> Path | None:
    """The checkpoint to continue from: latest.json's, else the highest-numbered one."""
    pointed = read_pointer(directory).get("latest")
    if isinstance(pointed, str) and (directory / pointed).is_file():
        return directory / pointed
    numbered = [(_order(p, suffix), p) for p in directory.glob(f"*{MARK}*{suffix}")]
    numbered = [(order, p) for order, p in numbered if order is not None]
    return max(numbered)[1] if numbered else None


@dataclass
class Retention:
    """Keeps the newest ``keep`` checkpoints of ``directory`` and the best by ``monitor``."""

    directory: Path
    suffix: str
    keep: int
    model: str
    monitor: Monitor = field(default_factory=Monitor)
    scores: dict[str, float] = field(default_factory=dict)

    @classmethod
    def resume(
        cls, directory: Path, suffix: str, keep: int, model: str, monitor: Monitor
    ) -> Retention:
        """The policy as an earlier run left it; scores of another monitored metric dropped."""
        pointer = read_pointer(directory)
        same = pointer.get("monitor") == {"metric": monitor.metric, "mode": monitor.mode}
        scores = (pointer.get("scores") if same else None) or {}
        kept = {k: float(v) for k, v in scores.items() if (directory / k).is_file()}
        return cls(directory, suffix, keep, model, monitor, kept)

    def best(self) -> str | None:
        if not self.scores:
            return None
        # The earliest of equally good checkpoints: later ones add nothing.
        return max(self.scores, key=lambda k: (self.monitor.key(self.scores[k]), -self._epoch(k)))

    def _epoch(self, checkpoint: str) -> int:
        """The epoch an epoch's own checkpoint ends, else 0."""
        order = _order(Path(checkpoint), self.suffix)
        return order[0] if order is not None and order[1] == float("inf") else 0

    def saved(self, epoch: int, score: float | None, step: int | None = None) -> list[str]:
        """Record a checkpoint (at ``step``: unscored); delete and return those now dropped."""
        latest = name(epoch, self.suffix, self.model, step)
        found = self.directory.glob(f"{self.model}{MARK}*_step*{self.suffix}")
        inside = sorted(p.name for p in found if p.name != latest and _order(p, self.suffix))
        if step is None:
            self.scores[latest] = float(score)
        newest = sorted(self.scores, key=self._epoch)[-self.keep :]
        keep = {*newest, self.best()}
        dropped = sorted(set(self.scores) - keep, key=self._epoch)
        for checkpoint in [*dropped, *inside]:
            (self.directory / checkpoint).unlink(missing_ok=True)
            self.scores.pop(checkpoint, None)
        pointer = {
            "epoch": epoch if step is None else epoch - 1,
            "latest": latest,
            "best": self.best(),
            "monitor": {"metric": self.monitor.metric, "mode": self.monitor.mode},
            "scores": dict(sorted(self.scores.items(), key=lambda i: self._epoch(i[0]))),
        }
        replace_text(self.directory / POINTER, json.dumps(pointer, indent=2) + "\n")
        return [*dropped, *inside]
