"""A sweep's results: the table of trials (options, the metric, how each ended), the best trial's
options as a config.yaml fragment, and a plot of the metric by trial and by each searched option
(matplotlib, where installed)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from src.scaffold.sweep.space import Sweep

log = logging.getLogger(__name__)
TABLE, BEST, PLOT = "trials.md", "best.yaml", "sweep.png"
FILES = (TABLE, BEST, PLOT)
STATES = {"COMPLETE": "finished", "PRUNED": "pruned", "FAIL": "failed"}


def rows(study: Any, spec: Sweep) -> list[dict[str, Any]]:
    """A row a trial that ended (an interrupted one's resumption stands for it)."""
    interrupted = set(study.user_attrs.get("interrupted", []))
    found = []
    for trial in study.get_trials(deepcopy=False):
        state = STATES.get(trial.state.name)
        if state is None or trial.number in interrupted:
            continue
        value = trial.value if state == "finished" else None
        if state == "pruned" and trial.intermediate_values:
            value = trial.intermediate_values[max(trial.intermediate_values)]
        note = trial.user_attrs.get("error") or trial.user_attrs.get("reason") or ""
        params = {d.key: trial.params.get(d.key) for d in spec.dimensions}
        found.append({"trial": trial.number, "state": state, spec.metric: value, **params})
        found[-1].update(directory=trial.user_attrs.get("directory"), note=note)
    return found


def table(found: list[dict[str, Any]], spec: Sweep) -> str:
    """The trials as a Markdown table."""
    keys = ["trial", "state", spec.metric, *(d.key for d in spec.dimensions), "note"]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in found:
        cells = [_cell(row[key]) for key in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else str(value).replace("|", "/")


def fragment(params: dict[str, Any]) -> str:
    """Options by config key as config.yaml writes them: schedule.name under schedule:."""
    nested: dict[str, Any] = {}
    for key, value in params.items():
        section, _, name = key.rpartition(".")
        (nested.setdefault(section, {}) if section else nested)[name or key] = value
    return yaml.safe_dump(nested, sort_keys=False)


def plot(found: list[dict[str, Any]], spec: Sweep, path: Path) -> bool:
    """The metric by trial and by each searched option; False where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    scored = [row for row in found if row[spec.metric] is not None]
    panels = [("trial", None), *((d.key, d) for d in spec.dimensions)]
    figure, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2), squeeze=False)
    for axis, (key, dimension) in zip(axes[0], panels):
        for state, marker in (("finished", "o"), ("pruned", "x")):
            chosen = [row for row in scored if row["state"] == state]
            xs = [_axis(row[key], dimension) for row in chosen]
            axis.scatter(xs, [row[spec.metric] for row in chosen], marker=marker, label=state)
        logs = dimension is not None and dimension.kind == "log"
        if logs or (dimension is not None and _spread(dimension.values)):
            axis.set_xscale("log")
        axis.set_xlabel(key)
        axis.set_ylabel(spec.metric)
    axes[0][0].legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def _spread(values: tuple) -> bool:
    """Positive numbers over more than a factor of 100: a log axis."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return len(numbers) == len(values) and min(numbers) > 0 and max(numbers) > 100 * min(numbers)


def _axis(value: Any, dimension: Any) -> Any:
    """A value where the plot puts it: numbers as numbers, other choices as names."""
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return value if dimension is None or numeric else str(value)


def write(out: Path, study: Any, spec: Sweep) -> None:
    """The table (printed and in DIR/sweep/trials.md), best.yaml and the plot."""
    found = rows(study, spec)
    text = table(found, spec)
    (out / TABLE).write_text(text, encoding="utf-8")
    print(text, end="")
    finished = [row for row in found if row["state"] == "finished"]
    if not finished:
        log.warning("no trial finished: no best options (the table says why)")
    else:
        best = study.best_trial
        (out / BEST).write_text(fragment(best.params), encoding="utf-8")
        flags = spec.flags(best.params)
        log.info(
            "best: trial %d, %s %.6g; its options in %s (config.yaml's keys), or: python "
            "train.py %s",
            *(best.number, spec.metric, best.value, out / BEST, " ".join(flags)),
        )
    if plot(found, spec, out / PLOT):
        log.info("plot: %s", out / PLOT)
    else:
        log.info("no plot: pip install matplotlib")
