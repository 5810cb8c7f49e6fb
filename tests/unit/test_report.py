"""gen report: the figure's lines, the PNG's size, the summary's numbers (worked out by hand
from synthetic runs in the metrics format) and the CLI's one-line errors."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from PIL import Image

from generator.cli.main import main
from generator.shipped import report

# Two runs of different lengths. Per epoch: the steps logged, the train row's loss, seconds
# and samples/s, the val row's loss and accuracy; then the test row's loss and accuracy.
ALPHA = {
    "epochs": [
        ([(10, 2.1), (20, 1.7)], (1.9, 2.0, 100.0), (1.5, 0.50)),
        ([(30, 1.2), (40, 0.9)], (1.0, 3.0, 200.0), (0.8, 0.80)),
        ([(50, 0.7), (60, 0.6)], (0.65, 4.0, 300.0), (0.7, 0.70)),
    ],
    "test": (0.4, 0.75),
    "hparams": {"model": "auto", "resolved": {"model": "lenet", "data_format": "mnist"}},
}
BETA = {
    "epochs": [
        ([(5, 2.2), (10, 1.8)], (2.0, 1.5, 50.0), (1.6, 0.60)),
        ([(15, 1.1), (20, 1.0)], (1.05, 1.5, 70.0), (0.9, 0.90)),
    ],
    "test": (0.35, 0.85),
    # No "resolved": the table falls back to the options as asked.
    "hparams": {"model": "mlp", "data_format": "csv"},
}
# What the table must say, from the numbers above: epochs, train time (seconds summed),
# samples/s (samples over seconds: alpha's (100*2 + 200*3 + 300*4) / 9 = 222.2), best val
# accuracy (its epoch), final val accuracy, test loss and accuracy.
ALPHA_LINE = (
    "| alpha | run-a | lenet | mnist | 3 | 9.0 s | 222 | val accuracy (max) | 0.8000 (2) "
    "| 0.7000 | 0.4000 | 0.7500 |"
)
BETA_LINE = (
    "| beta | run-b | mlp | csv | 2 | 3.0 s | 60 | val accuracy (max) | 0.9000 (2) "
    "| 0.9000 | 0.3500 | 0.8500 |"
)


def _rows(run_id: str, spec: dict, with_steps: bool = True) -> list[dict]:
    rows, clock = [], 1_000_000.0
    for epoch, (steps, train, val) in enumerate(spec["epochs"], 1):
        head = {"run": run_id, "epoch": epoch, "step": steps[-1][0]}
        for step, loss in steps if with_steps else ():
            clock += 1
            row = {"type": "step", "step": step, "time": clock, "loss": loss, "lr": 0.1}
            rows.append({**head, **row, "samples_per_s": 99.0})
        loss, seconds, speed = train
        rows.append({**head, "type": "train", "time": clock, "loss": loss, "lr": 0.1})
        rows[-1].update(samples_per_s=speed, seconds=seconds)
        rows.append({**head, "type": "val", "time": clock, "loss": val[0], "accuracy": val[1]})
    last = {"run": run_id, "epoch": len(spec["epochs"]), "step": rows[-1]["step"], "time": clock}
    rows.append({**last, "type": "test", "loss": spec["test"][0], "accuracy": spec["test"][1]})
    return rows


def _write_run(path: Path, run_id: str, spec: dict, with_steps: bool = True) -> Path:
    path.mkdir(parents=True)
    lines = [json.dumps(row) for row in _rows(run_id, spec, with_steps)]
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (path / "hparams.json").write_text(json.dumps({"run_id": run_id, **spec["hparams"]}))
    return path


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    return [
        _write_run(tmp_path / "alpha", "run-a", ALPHA),
        _write_run(tmp_path / "beta", "run-b", BETA),
    ]


def test_a_line_per_run_and_metric(runs: list[Path]) -> None:
    fig = report.figure(report.load_runs(runs))
    loss, accuracy = fig.axes
    assert [line.get_label() for line in loss.get_lines()] == [
        *("alpha train loss", "alpha val loss", "beta train loss", "beta val loss")
    ]
    assert [line.get_label() for line in accuracy.get_lines()] == [
        *("alpha val accuracy", "alpha test accuracy", "beta val accuracy", "beta test accuracy")
    ]
    train, val = loss.get_lines()[:2]
    assert list(train.get_xdata()) == [10, 20, 30, 40, 50, 60]
    assert list(train.get_ydata()) == [2.1, 1.7, 1.2, 0.9, 0.7, 0.6]
    assert list(val.get_xdata()) == [20, 40, 60] and list(val.get_ydata()) == [1.5, 0.8, 0.7]
    assert list(accuracy.get_lines()[3].get_ydata()) == [0.85]
    # A colour a run, the same in both panels.
    colours = [line.get_color() for line in [*loss.get_lines(), *accuracy.get_lines()]]
    assert colours[:2] == colours[4:6] and colours[2:4] == colours[6:]
    assert colours[0] != colours[2]
    assert loss.get_xlabel() == accuracy.get_xlabel() == "global step"
    assert loss.get_legend() is not None and accuracy.get_legend() is not None


def test_train_loss_per_epoch_without_step_rows(tmp_path: Path) -> None:
    run = report.load_run(_write_run(tmp_path / "quiet", "q", BETA, with_steps=False))
    train = report.figure([run]).axes[0].get_lines()[0]
    assert train.get_label() == "quiet train loss"
    assert list(train.get_xdata()) == [10, 20] and list(train.get_ydata()) == [2.0, 1.05]


def test_validations_inside_an_epoch_are_plotted_by_step(tmp_path: Path) -> None:
    # validate_every: a val row at step 5 inside epoch 1, beside the epochs' own at 10 and 20.
    path = _write_run(tmp_path / "often", "o", BETA)
    inside = {"run": "o", "type": "val", "epoch": 1, "step": 5, "time": 1.0}
    lines = (path / "metrics.jsonl").read_text().splitlines()
    lines.insert(2, json.dumps({**inside, "loss": 2.0, "accuracy": 0.3}))
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    run = report.load_run(path)
    val = report.figure([run]).axes[0].get_lines()[1]
    assert list(val.get_xdata()) == [5, 10, 20] and list(val.get_ydata()) == [2.0, 1.6, 0.9]
    assert report.summarize(run).epochs == 2


def test_the_png_decodes_at_its_fixed_size(runs: list[Path]) -> None:
    data = report.png(report.figure(report.load_runs(runs)))
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        assert image.format == "PNG"
        assert image.size == report.PNG_SIZE == (1200, 450)


def test_the_summary_holds_best_and_final_values(runs: list[Path]) -> None:
    text = report.markdown(report.load_runs(runs), "cmp.png")
    lines = text.splitlines()
    assert lines[0] == "# Training runs" and "![loss and metrics](cmp.png)" in lines
    assert lines[lines.index(ALPHA_LINE) + 1] == BETA_LINE
    assert text.endswith("\n")
    summary = report.summarize(report.load_run(runs[0]))
    assert (summary.best, summary.best_epoch) == (0.8, 2)
    assert summary.final == 0.7 and summary.seconds == 9.0


def test_a_run_monitoring_its_loss_is_summarized_by_it(tmp_path: Path) -> None:
    """A regression's run: no metric but the loss, the lowest validation loss the best."""
    spec = {**BETA, "hparams": {"monitor_metric": "loss", "monitor_mode": "min"}}
    path = _write_run(tmp_path / "reg", "r", spec)
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    lines = [{k: v for k, v in row.items() if k != "accuracy"} for row in rows]
    (path / "metrics.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    run = report.load_run(path)
    summary = report.summarize(run)
    assert summary.monitor == "val loss (min)"
    assert (summary.best, summary.best_epoch, summary.final) == (0.9, 2, 0.9)
    assert summary.test == summary.test_loss == 0.35
    assert report.metric_names(run) == []
    metrics_panel = report.figure([run]).axes[1]
    assert metrics_panel.get_lines() == [] and "accuracy" not in report.markdown([run])


def test_directories_of_one_name_are_labelled_by_path(tmp_path: Path) -> None:
    first = _write_run(tmp_path / "a" / "output", "r1", ALPHA)
    second = _write_run(tmp_path / "b" / "output", "r2", BETA)
    assert [run.label for run in report.load_runs([first, second])] == [str(first), str(second)]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"type": "val", "loss": 0.5', "metrics.jsonl:3: not a line of JSON"),
        ("[1, 2]", "metrics.jsonl:3: not a JSON object"),
        ('{"type": "val", "step": 4, "loss": "low"}', 'metrics.jsonl:3: "loss" is not a number'),
        ('{"step": 4, "loss": 0.1}', 'metrics.jsonl:3: no "type"'),
    ],
)
def test_a_malformed_line_is_named(tmp_path: Path, line: str, problem: str) -> None:
    run = _write_run(tmp_path / "bad", "r", BETA)
    kept = (run / "metrics.jsonl").read_text().splitlines()[:2]
    (run / "metrics.jsonl").write_text("\n".join([*kept, line, *kept]) + "\n")
    with pytest.raises(report.CannotReport, match=problem):
        report.load_run(run)


def test_output_paths() -> None:
    assert report.output_paths() == (Path("report.png"), Path("report.md"))
    assert report.output_paths("out/") == (Path("out/report.png"), Path("out/report.md"))
    assert report.output_paths("out/cmp") == (Path("out/cmp.png"), Path("out/cmp.md"))
    assert report.output_paths("cmp.md") == (Path("cmp.png"), Path("cmp.md"))


def _gen(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """gen's exit code (0 when it returns), stdout and stderr."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exited:
        code = int(exited.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_gen_report_writes_the_plot_and_summary(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = _gen(capsys, "report", *map(str, runs))
    assert (code, out) == (0, "wrote report.png\nwrote report.md\n")
    assert ALPHA_LINE in Path("report.md").read_text()
    code, out, _ = _gen(capsys, "report", *map(str, runs), "-o", "cmp/first")
    assert (code, out) == (0, "wrote cmp/first.png\nwrote cmp/first.md\n")
    assert "![loss and metrics](first.png)" in Path("cmp/first.md").read_text()
    # The script a project carries says the same.
    assert report.main([*map(str, runs), "-o", "cmp/script"]) == 0
    assert Path("cmp/script.md").read_text() == Path("report.md").read_text().replace(
        "(report.png)", "(script.png)"
    )


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "missing: no such directory"),
        ("empty", "empty: no metrics.jsonl"),
        ("malformed", "metrics.jsonl:2: not a line of JSON"),
        ("exists", "report.png exists; pass --force to replace it"),
        ("no matplotlib", "pip install matplotlib"),
    ],
)
def test_errors_are_one_line_and_write_nothing(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, case, expected
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    extra = tmp_path / case
    if case == "empty":
        extra.mkdir()
    elif case == "malformed":
        extra.mkdir()
        (extra / "metrics.jsonl").write_text('{"type": "val", "step": 1}\n{"type"\n')
    elif case == "exists":
        (out / "report.png").write_bytes(b"mine")
    elif case == "no matplotlib":
        for name in ("matplotlib.figure", "matplotlib.backends.backend_agg"):
            monkeypatch.setitem(sys.modules, name, None)
    dirs = [*map(str, runs), *([str(extra)] if case in ("missing", "empty", "malformed") else [])]
    before = sorted(out.iterdir())
    code, stdout, err = _gen(capsys, "report", *dirs, "-o", f"{out}/")
    assert code == 1 and stdout == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and expected in err, err
    assert sorted(out.iterdir()) == before
    if case == "exists":
        assert (out / "report.png").read_bytes() == b"mine"
        assert _gen(capsys, "report", *dirs, "-o", f"{out}/", "--force")[0] == 0
        assert (out / "report.png").read_bytes().startswith(b"\x89PNG")
