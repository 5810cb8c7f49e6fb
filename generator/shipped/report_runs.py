"""The runs a report shows: each output directory's metrics.jsonl (a flat JSON object a
line) and hparams.json, read and checked. Standard library only: shipped in generated
projects beside scripts/report.py (run on the images' Python 3.8).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

# A line's fields that are words; every other one (epoch, step, time, the metrics) is a
# number, and a line where one is not is malformed.
WORDS = ("run", "type", "split", "checkpoint", "reason")  # reason: a "stop" row's
# Runs recorded before a project could choose its monitored metric chose by this one.
DEFAULT_MONITOR = ("accuracy", "max")


class CannotReport(Exception):
    """Raised when no report can be made: a directory that is not a run's output, an
    unreadable or malformed file (named, with the line number), no matplotlib, or an
    output file that exists. Nothing is written then."""


@dataclass(frozen=True)
class Run:
    """One run's output directory: its label in the plot and table, hparams and rows."""

    label: str
    hparams: dict[str, Any]
    rows: list[dict[str, Any]]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["type"] == kind]

    def setting(self, key: str) -> str:
        """What an option resolved to (hparams' "resolved"), else as asked, else "?"."""
        resolved = self.hparams.get("resolved")
        for source in (resolved if isinstance(resolved, dict) else {}, self.hparams):
            if source.get(key) is not None:
                return str(source[key])
        return "?"

    @property
    def monitor(self) -> tuple[str, str]:
        """The validation metric that chose the run's best checkpoint, and max or min."""
        metric = self.hparams.get("monitor_metric") or DEFAULT_MONITOR[0]
        mode = self.hparams.get("monitor_mode") or DEFAULT_MONITOR[1]
        return str(metric), str(mode)

    @property
    def run_id(self) -> str:
        ids = [row["run"] for row in self.rows if "run" in row]
        return str(self.hparams.get("run_id") or (ids[-1] if ids else "?"))


def _bad_field(row: dict[str, Any]) -> str | None:
    """Why a metrics line cannot be read, or None."""
    if not isinstance(row.get("type"), str):
        return 'no "type"'
    for key, value in row.items():
        if key in WORDS:
            continue
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f'"{key}" is not a number: {value!r}'
    return None


def _read_rows(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CannotReport(f"{path}: cannot read it ({err.strerror})") from err
    rows = []
    for number, raw in enumerate(data.splitlines(), 1):
        try:
            row = json.loads(raw.decode("utf-8")) if raw.strip() else None
        except ValueError as err:  # also UnicodeDecodeError
            why = f"{err.msg}, column {err.colno}" if isinstance(err, json.JSONDecodeError) else err
            raise CannotReport(f"{path}:{number}: not a line of JSON ({why})") from err
        if row is None:
            continue
        problem = "not a JSON object" if not isinstance(row, dict) else _bad_field(row)
        if problem:
            raise CannotReport(f"{path}:{number}: {problem}")
        rows.append(row)
    return rows


def _read_hparams(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CannotReport(f"{path}: cannot read it ({err})") from err
    if not isinstance(value, dict):
        raise CannotReport(f"{path}: not a JSON object")
    return value


def load_run(directory: Path, label: str | None = None) -> Run:
    """The run whose outputs are in ``directory``, labelled by its name unless told."""
    if not directory.is_dir():
        raise CannotReport(f"{directory}: no such directory")
    metrics = directory / "metrics.jsonl"
    if not metrics.is_file():
        raise CannotReport(f"{directory}: no metrics.jsonl (not the output directory of a run)")
    name = label or directory.resolve().name or str(directory)
    return Run(name, _read_hparams(directory / "hparams.json"), _read_rows(metrics))


SWEEP_TABLE = "trials.md"  # sweep.py's table of trials, in a sweep's directory


def sweep_trials(directory: Path) -> list[Path]:
    """A sweep's trial directories (sweep.py's: DIR/sweep/0, 1 ...) that hold a run, in order;
    [] for any other directory."""
    if not (directory / SWEEP_TABLE).is_file():
        return []
    found = [p for p in directory.iterdir() if p.name.isdigit() and (p / "metrics.jsonl").is_file()]
    return sorted(found, key=lambda p: int(p.name))


def load_runs(directories: Sequence[Path]) -> list[Run]:
    """The runs in order, labelled by directory name (by the path as given if two share one);
    a sweep's directory stands for its trials, labelled trial N."""
    expanded = [(path, None) for path in directories if not sweep_trials(path)]
    if len(expanded) < len(directories):
        expanded = []
        for path in directories:
            trials = sweep_trials(path)
            expanded += [(t, f"trial {t.name}") for t in trials] if trials else [(path, None)]
    names = [label or path.resolve().name for path, label in expanded]
    clash = len(set(names)) < len(names)
    return [load_run(path, label or (str(path) if clash else None)) for path, label in expanded]
