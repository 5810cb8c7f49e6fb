"""Checkpoints on disk: one per epoch, the newest N kept plus the best by the monitored
validation metric (config.yaml's monitor:), a small latest.json pointer, and the newest
one found again for --resume auto.

Checkpoints are named after the model: mynet_epoch7.pt, resnet_epoch3.ckpt. One taken
inside an epoch (checkpoint_every) also names the training step: mynet_epoch8_step350.pt;
only the newest of those is kept, and the epoch's own checkpoint replaces it.
latest.json: {"epoch": 7, "latest": "mynet_epoch7.pt", "best": "mynet_epoch5.pt",
"monitor": {"metric": "accuracy", "mode": "max"}, "scores": {"mynet_epoch5.pt": 0.981,
...}} - written after each checkpoint, so a restarted job (and a person) can tell which
file to use.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

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
    """Give a file the mode any new file of this user gets (0666 less the umask): MindSpore's
    save_checkpoint and export leave theirs read-only (0400), which a user's own tools,
    another account on a shared disk and the next attempt's cleanup then trip over."""
    os.chmod(path, 0o666 & ~_umask())


def name(epoch: int, suffix: str, model: str, step: int | None = None) -> str:
    """The file name of the checkpoint of ``model`` taken after ``epoch`` (mynet_epoch7.pt),
    or at training ``step`` inside it (mynet_epoch7_step350.pt)."""
    inside = "" if step is None else f"_step{step}"
    return f"{model}{MARK}{epoch}{inside}{suffix}"


def _order(path: Path, suffix: str) -> tuple[int, float] | None:
    """(epoch, step) of a checkpoint's name; an epoch's own comes after its steps."""
    pattern = rf"[A-Za-z0-9_.-]+?{MARK}(\d+)(?:_step(\d+))?{re.escape(suffix)}"
    match = re.fullmatch(pattern, path.name)
    if match is None:
        return None
    step = match.group(2)
    return int(match.group(1)), float("inf") if step is None else int(step)


def epoch_of(path: Path, suffix: str) -> int | None:
    """The epoch a checkpoint ends (None: not an epoch's own checkpoint)."""
    order = _order(path, suffix)
    return order[0] if order is not None and order[1] == float("inf") else None


def read_pointer(directory: Path) -> dict:
    try:
        value = json.loads((directory / POINTER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
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
    """Keeps the newest ``keep`` checkpoints of ``directory`` and the best one by
    ``monitor``."""

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
        """The policy as an earlier run of this output directory left it. Scores of
        another monitored metric are not compared with this run's: they are dropped."""
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
        return epoch_of(Path(checkpoint), self.suffix) or 0

    def _inside(self) -> list[str]:
        """The checkpoints taken inside an epoch that are still here."""
        found = self.directory.glob(f"{self.model}{MARK}*_step*{self.suffix}")
        return sorted(p.name for p in found if _order(p, self.suffix) is not None)

    def saved(self, epoch: int, score: float | None, step: int | None = None) -> list[str]:
        """Record a checkpoint: epoch's own with its monitored score, or one taken at
        ``step`` inside it (no score: kept until the next checkpoint). Delete the ones the
        policy drops; return their names."""
        latest = name(epoch, self.suffix, self.model, step)
        inside = [other for other in self._inside() if other != latest]
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
        # Write then rename: a job killed now leaves the previous pointer, never half of one.
        tmp = self.directory / f".{POINTER}.tmp"
        tmp.write_text(json.dumps(pointer, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.directory / POINTER)
        return [*dropped, *inside]
