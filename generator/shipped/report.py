"""Report training runs: loss and accuracy curves as a PNG and a markdown summary.

Standard library only but matplotlib (imported to draw): the same file ships in generated
projects as scripts/report.py (run on the images' Python 3.8). It reads a run's output
directory: metrics.jsonl (a flat JSON object a line) and hparams.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# A fixed size, so that the PNG's is known: 12 x 4.5 inches at 100 dpi.
FIGSIZE = (12.0, 4.5)
DPI = 100
PNG_SIZE = (1200, 450)
NAMES = ("report.png", "report.md")
# Fields the report reads: a line where one is there but not a number is malformed.
NUMBERS = ("epoch", "step", "time", "loss", "accuracy", "samples_per_s", "seconds")


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
    def run_id(self) -> str:
        ids = [row["run"] for row in self.rows if "run" in row]
        return str(self.hparams.get("run_id") or (ids[-1] if ids else "?"))


def _bad_field(row: dict[str, Any]) -> str | None:
    """Why a metrics line cannot be read, or None."""
    if not isinstance(row.get("type"), str):
        return 'no "type"'
    for key in NUMBERS:
        value = row.get(key)
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


def load_runs(directories: Sequence[Path]) -> list[Run]:
    """The runs in order, labelled by directory name (by the path as given if two share one)."""
    names = [directory.resolve().name for directory in directories]
    clash = len(set(names)) < len(names)
    return [load_run(path, str(path) if clash else None) for path in directories]


def _matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise CannotReport(f"the plots need matplotlib: pip install matplotlib ({err})") from err
    return Figure, FigureCanvasAgg


# A line a run for each: (panel, rows, metric, label, style). Train loss is drawn per
# logged step, per epoch where no "step" rows were logged; test accuracy is one star.
LINES = (
    (0, "train", "loss", "train loss", {"linewidth": 1}),
    (0, "val", "loss", "val loss", {"ls": "--", "marker": "o"}),
    (1, "val", "accuracy", "val accuracy", {"marker": "o"}),
    (1, "test", "accuracy", "test accuracy", {"ls": "none", "marker": "*", "markersize": 12}),
)


def _plot(axes: Axes, rows: list[dict[str, Any]], key: str, label: str, **style: Any) -> None:
    kept = [row for row in rows if None not in (row.get("step"), row.get(key))]
    if kept:
        axes.plot([row["step"] for row in kept], [row[key] for row in kept], label=label, **style)


def _finish(axes: Axes, title: str) -> None:
    axes.set(title=title, xlabel="global step", ylabel=title)
    axes.grid(True, alpha=0.3)
    if axes.get_lines():
        axes.legend(fontsize="small")
    else:
        axes.text(0.5, 0.5, f"no {title} logged", ha="center", transform=axes.transAxes)


def figure(runs: Sequence[Run]) -> Figure:
    """Loss (train, val) and accuracy (val, test) against the global step, a colour a run
    (LINES). Agg, not pyplot: no global state, no display needed."""
    figure_class, canvas = _matplotlib()
    fig = figure_class(figsize=FIGSIZE, dpi=DPI, constrained_layout=True)
    canvas(fig)
    panels = fig.subplots(1, 2)
    for index, run in enumerate(runs):
        for panel, kind, key, name, style in LINES:
            rows = run.of_type(kind) if kind != "train" else run.of_type("step")
            rows = rows or run.of_type(kind)
            label = f"{run.label} {name}"
            _plot(panels[panel], rows, key, label, color=f"C{index % 10}", **style)
    _finish(panels[0], "loss")
    _finish(panels[1], "accuracy")
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
    best_val_accuracy: float | None
    best_epoch: int | None
    final_val_accuracy: float | None
    test_loss: float | None
    test_accuracy: float | None


def _timing(train: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """The epochs' seconds summed, and the samples trained a second over them: each
    epoch's rate weighted by its seconds, so a short epoch counts for little."""
    timed = [row for row in train if None not in (row.get("seconds"), row.get("samples_per_s"))]
    seconds = sum(row["seconds"] for row in timed)
    samples = sum(row["seconds"] * row["samples_per_s"] for row in timed)
    return (float(seconds), samples / seconds) if seconds > 0 else (None, None)


def summarize(run: Run) -> Summary:
    """What the table says of a run: settings, length, speed and its best and last scores."""
    train, val, test = run.of_type("train"), run.of_type("val"), run.of_type("test")
    scored = [row for row in val if row.get("accuracy") is not None]
    # max() keeps the first of equal scores: the earliest epoch that reached the best.
    best = max(scored, key=lambda row: row["accuracy"], default=None)
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
        best_val_accuracy=best["accuracy"] if best else None,
        best_epoch=best.get("epoch") if best else None,
        final_val_accuracy=scored[-1]["accuracy"] if scored else None,
        test_loss=last_test.get("loss"),
        test_accuracy=last_test.get("accuracy"),
    )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


HEADER = (
    "run|run id|model|data|epochs|train time|samples/s|best val accuracy (epoch)"
    "|final val accuracy|test loss|test accuracy"
).split("|")


def _cells(run: Summary) -> list[str]:
    best = _number(run.best_val_accuracy)
    if run.best_epoch is not None:
        best += f" ({run.best_epoch})"
    return [
        *(run.label, run.run_id, run.model, run.data_format, str(run.epochs)),
        *(_duration(run.seconds), _number(run.samples_per_s, 0), best),
        *(_number(run.final_val_accuracy), _number(run.test_loss), _number(run.test_accuracy)),
    ]


NOTES = "Train time: the epochs' seconds summed; samples/s: the samples trained over that time."


def markdown(runs: Sequence[Run], image: str = NAMES[0]) -> str:
    """The summary: the plot (``image``, a path relative to the markdown file) and a table
    with a line a run."""
    rows = [HEADER, tuple("---" for _ in HEADER)]
    rows += [tuple(_cells(summarize(run))) for run in runs]
    table = ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    head = ["# Training runs", "", f"![loss and accuracy]({image})", ""]
    return "\n".join([*head, *table, "", NOTES, ""])


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
    text = markdown(runs, png_path.name).encode("utf-8")
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
