"""Checkpoints on disk (mynet_epoch7.pt; inside an epoch mynet_epoch8_step350.pt, only the
newest kept): the newest N and the best by config.yaml's monitor: kept, latest.json naming them;
each with its checksum (mynet_epoch7.pt.sha256), checked before a run continues from it. A
sharded one (shard: full) is a small file naming its directory of shards, mynet_epoch7.shards/,
whose files and sizes its sidecar lists (a shard missing: damaged)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from src.scaffold.errors import CheckpointError, DiskFullError
from src.scaffold.task import Monitor

log = logging.getLogger(__name__)
POINTER = "latest.json"
MARK = "_epoch"
SUM = ".sha256"  # a checkpoint's sidecar: its SHA-256 and size, as JSON
SHARDS = ".shards"  # a sharded checkpoint's directory: mynet_epoch7.shards beside mynet_epoch7.pt
# What a checkpoint's save killed midway leaves (MindSpore's own: .NAME.tmp.tmp). Not the
# record's .NAME.tmp: rank 0 may be writing one while another rank starts (its next write
# replaces a leftover), nor the lock's (outputs/live.py).
LEFTOVER = re.compile(rf"\..+{MARK}\d+.*\.tmp(\.\w+)?")
_digests: dict[tuple, str] = {}  # each file read once while unchanged (resume looks twice)
_warned: set[str] = set()


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


def shards_of(path: Path) -> Path:
    """The directory of a sharded checkpoint's shards: mynet_epoch7.shards for mynet_epoch7.pt."""
    return path.with_name(path.stem + SHARDS)


def remove(path: Path) -> None:
    """A checkpoint gone: its file, sidecar and shards."""
    path.unlink(missing_ok=True)
    path.with_name(path.name + SUM).unlink(missing_ok=True)
    shutil.rmtree(shards_of(path), ignore_errors=True)


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


def _full(err: BaseException) -> bool:
    """ENOSPC, or torch's short write that hides it ("unexpected pos 704 vs 598")."""
    for cause in (err, err.__cause__, err.__context__):
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
    return isinstance(err, RuntimeError) and "unexpected pos" in str(err)


def _replace(path: Path, tmp: Path, write: Callable[[Path], None], needed: int) -> None:
    """``write`` to ``tmp``, then rename it ``path``: a reader never sees half a file, even if
    the job is killed; a failed write leaves nothing, and a full disk says so in one line."""
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        free = shutil.disk_usage(path.parent).free  # and what the leftovers hold (still open)
        for left in (tmp, tmp.with_suffix(".tmp")):  # MindSpore's own: its .ckpt made .tmp
            with contextlib.suppress(FileNotFoundError):
                free += left.stat().st_blocks * 512
                left.unlink()
        if (full := disk_full(err, path, needed, free)) is None:
            raise
        raise full from err


def disk_full(
    err: BaseException, path: Path, needed: int, free: int | None = None
) -> DiskFullError | None:
    """The one line for ``err`` where it is a full disk (writing ``path``), else None."""
    if not _full(err):
        return None
    free = shutil.disk_usage(path.parent).free if free is None else free
    return DiskFullError(
        f"no space left on the device for {path}: about {needed:,} bytes needed, {free:,} "
        f"free; the earlier checkpoints and {POINTER} are intact: free some space and run "
        "the same command again to resume from them"
    )


def replace_text(path: Path, text: str) -> None:
    data, tmp = text.encode("utf-8"), path.with_name(f".{path.name}.tmp")
    _replace(path, tmp, lambda tmp: tmp.write_bytes(data), len(data))


def _digest(path: Path) -> str:
    stat = path.stat()
    key = (path, stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
        _digests[key] = digest.hexdigest()
    return _digests[key]


def write(
    path: Path, save: Callable[[Path], None], needed: int, parts: dict[str, int] | None = None
) -> None:
    """``save`` the checkpoint ``path`` through a temporary name, its sidecar written before
    the rename; ``needed``: its size estimate, for DiskFullError; ``parts``: the files of its
    shards (relative to its directory) and their sizes, in place before it."""

    def sealed(tmp: Path) -> None:
        save(tmp)
        check: dict[str, Any] = {"sha256": _digest(tmp), "bytes": tmp.stat().st_size}
        if parts is not None:
            check["parts"] = parts
        replace_text(path.with_name(path.name + SUM), json.dumps(check) + "\n")

    _replace(path, path.with_name(f".{path.stem}.tmp{path.suffix}"), sealed, needed)


def damage(path: Path) -> str | None:
    """Why ``path`` is not the checkpoint its sidecar describes; None: intact, or no sidecar
    (an older version's: trusted) but for an empty file."""
    try:
        if (size := path.stat().st_size) == 0:
            return "empty"
        check = read_json(path.with_name(path.name + SUM))
        want = check.get("bytes") if isinstance(check, dict) else None
        if not isinstance(want, int):
            return None
        if size != want:
            short = "truncated" if size < want else "longer than written"
            return f"{short}: {size:,} of {want:,} bytes"
        if _digest(path) != check.get("sha256"):
            return f"checksum mismatch ({path.name}{SUM})"
        return _shards_damage(path.parent, check.get("parts") or {})
    except OSError as err:
        return f"unreadable: {err.strerror}"


def _shards_damage(directory: Path, parts: dict[str, int]) -> str | None:
    """Why the shards a sidecar lists are not all there as written; None: they are."""
    for part, want in parts.items():
        shard = directory / part
        if not shard.is_file():
            return f"its shard {part} is missing"
        if (size := shard.stat().st_size) != want:
            return f"its shard {part} is {size:,} bytes, not {want:,}"
    return None


def check_intact(path: Path, what: str) -> None:
    """CheckpointError where ``path`` (given as option ``what``) is damaged."""
    if (why := damage(path)) is not None:
        raise CheckpointError(f"{what} {path} is damaged ({why}): give an intact checkpoint")


def read_pointer(directory: Path) -> dict:
    value = read_json(directory / POINTER)
    return value if isinstance(value, dict) else {}


def find_latest(directory: Path, suffix: str) -> Path | None:
    """The checkpoint to continue from: latest.json's, else the highest-numbered one; past
    damaged ones (one WARNING), to the newest intact; CheckpointError when none is."""
    pointed = read_pointer(directory).get("latest")
    found = [directory / pointed] if isinstance(pointed, str) else []
    numbered = [(o, p) for p in directory.glob(f"*{MARK}*{suffix}") if (o := _order(p, suffix))]
    found += [p for _, p in sorted(numbered, reverse=True)]
    damaged = []
    for path in dict.fromkeys(p for p in found if p.is_file()):
        if (why := damage(path)) is None:
            break
        damaged.append(f"{path} ({why})")
    else:
        if damaged:
            raise CheckpointError(f"no intact checkpoint to resume from: {'; '.join(damaged)}")
        return None
    said = f"skipped the damaged {'; '.join(damaged)}: resuming from {path.name}, the newest intact"
    # Said once, after train.py has set up logging (outputs/truth.py looks before).
    if damaged and said not in _warned and logging.getLogger().hasHandlers():
        _warned.add(said)
        log.warning("%s", said)
    return path


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
        """The policy as an earlier run left it; scores of another monitored metric dropped;
        what a killed save left (temporary files, sidecars of no checkpoint) removed."""
        for path in directory.iterdir() if directory.is_dir() else ():
            lone = path.name.endswith(SUM) and not path.with_name(path.stem).exists()
            if path.name.endswith(SHARDS):  # shards whose checkpoint was never written
                lone = not path.with_name(path.name[: -len(SHARDS)] + suffix).exists()
            if (lone or LEFTOVER.fullmatch(path.name)) and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            elif lone or LEFTOVER.fullmatch(path.name):
                path.unlink(missing_ok=True)
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
            remove(self.directory / checkpoint)
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
