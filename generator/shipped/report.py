"""Report training runs: loss and metric curves as a PNG and a markdown summary.

The metrics are whatever a project's step returns (accuracy to start with); each run's
monitored one (hparams.json's monitor_metric and monitor_mode) fills the table.

Standard library only but matplotlib (imported to draw): the same file ships in generated
projects as scripts/report.py (run on the images' Python 3.8). It reads a run's output
directory: metrics.jsonl (a flat JSON object a line) and hparams.json.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from generator.shipped.report_runs import (
    SWEEP_TABLE,
    CannotReport,
    Run,
    load_run,
    load_runs,
    sweep_trials,
)

__all__ = ["CannotReport", "Run", "load_run", "load_runs", "main", "write_report"]

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# A fixed size, so that the PNG's is known: 12 x 4.5 inches at 100 dpi.
FIGSIZE = (12.0, 4.5)
DPI = 100
PNG_SIZE = (1200, 450)
NAMES = ("report.png", "report.md")


def _matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise CannotReport(f"the plots need matplotlib: pip install matplotlib ({err})") from err
    return Figure, FigureCanvasAgg


# The loss panel's lines a run: (rows, label, style). Train loss is drawn per logged step,
# per epoch where no "step" rows were logged.
LOSS_LINES = (
    ("train", "train loss", {"linewidth": 1}),
    ("val", "val loss", {"ls": "--", "marker": "o"}),
)
# The metrics panel: each metric but the loss, validation as a line, the test as a star.
VAL_STYLE = {"marker": "o"}
TEST_STYLE = {"ls": "none", "marker": "*", "markersize": 12}
FIELDS = ("run", "type", "epoch", "step", "time")


def _plot(axes: Axes, rows: list[dict[str, Any]], key: str, label: str, **style: Any) -> None:
    kept = [row for row in rows if None not in (row.get("step"), row.get(key))]
    if kept:
        axes.plot([row["step"] for row in kept], [row[key] for row in kept], label=label, **style)


def _finish(axes: Axes, title: str, missing: str) -> None:
    axes.set(title=title, xlabel="global step", ylabel=title)
    axes.grid(True, alpha=0.3)
    if axes.get_lines():
        axes.legend(fontsize="small")
    else:
        axes.text(0.5, 0.5, f"no {missing} logged", ha="center", transform=axes.transAxes)


def metric_names(run: Run) -> list[str]:
    """The metrics of a run's validation rows but the loss, in the order first logged."""
    names: dict[str, None] = {}
    for row in run.of_type("val"):
        names.update((key, None) for key in row if key not in FIELDS and key != "loss")
    return list(names)


def figure(runs: Sequence[Run]) -> Figure:
    """Loss (train, val) and every other metric (val, test) against the global step, a
    colour a run. Agg, not pyplot: no global state, no display needed."""
    figure_class, canvas = _matplotlib()
    fig = figure_class(figsize=FIGSIZE, dpi=DPI, constrained_layout=True)
    canvas(fig)
    panels = fig.subplots(1, 2)
    for index, run in enumerate(runs):
        colour = f"C{index % 10}"
        for kind, name, style in LOSS_LINES:
            rows = (run.of_type("step") if kind == "train" else []) or run.of_type(kind)
            _plot(panels[0], rows, "loss", f"{run.label} {name}", color=colour, **style)
        for metric in metric_names(run):
            for kind, style in (("val", VAL_STYLE), ("test", TEST_STYLE)):
                label = f"{run.label} {kind} {metric}"
                _plot(panels[1], run.of_type(kind), metric, label, color=colour, **style)
    _finish(panels[0], "loss", "loss")
    _finish(panels[1], "metrics", "metric besides the loss")
    return fig


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes, PNG_SIZE pixels (no tight bounding box: the size is fixed)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


@dataclass(frozen=True)
class Summary:
    """One run's line in the markdown table; None where the run logged nothing for it."""

    label: str
    run_id: str
    model: str
    data_format: str
    epochs: int
    seconds: float | None
    samples_per_s: float | None
    # The monitored validation metric ("val accuracy (max)"), its best, when, its last.
    monitor: str
    best: float | None
    best_epoch: int | None
    final: float | None
    test_loss: float | None
    test: float | None


def _timing(train: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """The epochs' seconds summed, and the samples trained a second over them: each
    epoch's rate weighted by its seconds, so a short epoch counts for little."""
    timed = [row for row in train if None not in (row.get("seconds"), row.get("samples_per_s"))]
    seconds = sum(row["seconds"] for row in timed)
    samples = sum(row["seconds"] * row["samples_per_s"] for row in timed)
    return (float(seconds), samples / seconds) if seconds > 0 else (None, None)


def summarize(run: Run) -> Summary:
    """What the table says of a run: settings, length, speed and its best and last scores
    of the metric it monitored."""
    train, val, test = run.of_type("train"), run.of_type("val"), run.of_type("test")
    metric, mode = run.monitor
    scored = [row for row in val if row.get(metric) is not None]
    # The first of equal scores: the earliest epoch that reached the best.
    sign = -1.0 if mode == "min" else 1.0
    best = max(scored, key=lambda row: sign * row[metric], default=None)
    last_test = test[-1] if test else {}
    seconds, speed = _timing(train)
    return Summary(
        label=run.label,
        run_id=run.run_id,
        model=run.setting("model"),
        data_format=run.setting("data_format"),
        epochs=len({row.get("epoch") for row in train or val}),
        seconds=seconds,
        samples_per_s=speed,
        monitor=f"val {metric} ({mode})",
        best=best[metric] if best else None,
        best_epoch=best.get("epoch") if best else None,
        final=scored[-1][metric] if scored else None,
        test_loss=last_test.get("loss"),
        test=last_test.get(metric),
    )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


HEADER = (
    "run|run id|model|data|epochs|train time|samples/s|monitored|best (epoch)|final|test loss|test"
).split("|")


def _cells(run: Summary) -> list[str]:
    best = _number(run.best)
    if run.best_epoch is not None:
        best += f" ({run.best_epoch})"
    return [
        *(run.label, run.run_id, run.model, run.data_format, str(run.epochs)),
        *(_duration(run.seconds), _number(run.samples_per_s, 0), run.monitor, best),
        *(_number(run.final), _number(run.test_loss), _number(run.test)),
    ]


NOTES = (
    "Train time: the epochs' seconds summed; samples/s: the samples trained over that time. "
    "Monitored: the validation metric that chose the run's best checkpoint; best, final and "
    "test are its values."
)


def markdown(runs: Sequence[Run], image: str = NAMES[0], sweeps: Sequence[Path] = ()) -> str:
    """The summary: the plot (``image``, a path relative to the markdown file) and a table
    with a line a run; for each sweep of ``sweeps``, sweep.py's table of its trials."""
    rows = [HEADER, tuple("---" for _ in HEADER)]
    rows += [tuple(_cells(summarize(run))) for run in runs]
    table = ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    head = ["# Training runs", "", f"![loss and metrics]({image})", ""]
    found = []
    for sweep in sweeps:
        found += [f"## The sweep in {sweep}", "", (sweep / SWEEP_TABLE).read_text("utf-8")]
        if (sweep / "best.yaml").is_file():
            found += [
                f"The best trial's options, as config.yaml writes them: {sweep / 'best.yaml'}",
                "",
            ]
    return "\n".join([*head, *table, "", NOTES, "", *found])


def output_paths(output: str | None = None) -> tuple[Path, Path]:
    """Where -o/--output puts the PNG and the markdown: report.png and report.md in the
    current directory (no -o) or in a directory (one that exists, or a path ending in /);
    else PATH.png and PATH.md (a .png or .md suffix on PATH is dropped)."""
    if not output:
        return Path(NAMES[0]), Path(NAMES[1])
    path = Path(output)
    if output.endswith(("/", os.sep)) or path.is_dir():
        return path / NAMES[0], path / NAMES[1]
    if path.suffix in (".png", ".md"):
        path = path.with_suffix("")
    return path.with_name(f"{path.name}.png"), path.with_name(f"{path.name}.md")


def _write_all(files: dict[Path, bytes]) -> None:
    """Each file whole or not at all: written beside its target, then renamed over it."""
    done: list[str] = []
    try:
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            done.append(tmp)
            with os.fdopen(fd, "wb") as stream:
                stream.write(data)
        for tmp, path in zip(done, files):
            os.replace(tmp, path)
    except OSError as err:
        for tmp in done:
            Path(tmp).unlink(missing_ok=True)
        raise CannotReport(f"cannot write {err.filename or 'the report'}: {err.strerror}") from err


def write_report(
    directories: Sequence[Path], output: str | None = None, force: bool = False
) -> tuple[Path, Path]:
    """Plot and summarize the runs in ``directories``; returns the PNG's and markdown's paths
    (see output_paths). An existing file is replaced only if ``force``."""
    png_path, md_path = output_paths(output)
    runs = load_runs(directories)
    for path in (png_path, md_path):
        if path.exists() and not force:
            raise CannotReport(f"{path} exists; pass --force to replace it (nothing was written)")
    # Both land in one directory: the markdown links the PNG by its name.
    sweeps = [path for path in directories if sweep_trials(path)]
    text = markdown(runs, png_path.name, sweeps).encode("utf-8")
    _write_all({png_path: png(figure(runs)), md_path: text})
    return png_path, md_path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", type=Path, metavar="OUTPUT_DIR")
    parser.add_argument("-o", "--output", help="A directory, or a prefix for PATH.png, PATH.md.")
    parser.add_argument("--force", action="store_true", help="Replace existing files.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python scripts/report.py OUTPUT_DIR... [-o PATH] [--force]``: what `gen report` does."""
    args = _parser().parse_args(argv)
    try:
        written = write_report(args.directories, args.output, args.force)
    except CannotReport as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
