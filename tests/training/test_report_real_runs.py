"""gen report over two real runs of a generated PyTorch project, and the project's own
scripts/report.py saying the same, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from generator.shipped import report
from tests.conftest import gen
from tests.training import runs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_runs(pytorch_project: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two short runs of different lengths and learning rates, a few seconds each."""
    root = tmp_path_factory.mktemp("runs")
    return [
        runs.train(pytorch_project, root / "lr0.01", "--epoch_size", "2", "--log_every", "10"),
        runs.train(
            pytorch_project,
            root / "lr0.05",
            *("--epoch_size", "3", "--lr", "0.05", "--log_every", "10"),
        ),
    ]


def test_the_runs_are_in_the_flat_format(two_runs: list[Path]) -> None:
    for output in two_runs:
        rows = runs.metrics(output)
        assert {row["type"] for row in rows} == {"step", "train", "val", "test"}
        assert all({"run", "epoch", "step", "time"} <= row.keys() for row in rows)


def test_gen_report_plots_and_summarizes_two_runs(two_runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = gen("report", *map(str, two_runs), "-o", f"{out}/", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote {out}/report.png\nwrote {out}/report.md\n"
    with Image.open(out / "report.png") as image:
        image.load()
        assert image.size == report.PNG_SIZE
    table = (out / "report.md").read_text().splitlines()
    for output, epochs in zip(two_runs, (2, 3), strict=True):
        rows = runs.metrics(output)
        val = [row for row in rows if row["type"] == "val"]
        best = max(val, key=lambda row: row["accuracy"])
        line = next(line for line in table if line.startswith(f"| {output.name} |"))
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[1:5] == [rows[0]["run"], "lenet", "mnist", str(epochs)]
        assert cells[7] == "val accuracy (max)"
        assert cells[8] == f"{best['accuracy']:.4f} ({best['epoch']})"
        assert cells[9] == f"{val[-1]['accuracy']:.4f}"
        assert cells[11] == f"{rows[-1]['accuracy']:.4f}"
    lines = report.figure(report.load_runs(two_runs)).axes[0].get_lines()
    assert [line.get_label() for line in lines] == [
        *("lr0.01 train loss", "lr0.01 val loss", "lr0.05 train loss", "lr0.05 val loss")
    ]


def test_the_projects_script_says_the_same(
    pytorch_project: Path, two_runs: list[Path], tmp_path: Path
) -> None:
    assert (pytorch_project / "scripts" / "report.py").is_file()
    script = tmp_path / "script"
    result = runs.run(pytorch_project, "scripts/report.py", *map(str, two_runs), "-o", f"{script}/")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote {script}/report.png\nwrote {script}/report.md\n"
    ours = tmp_path / "gen"
    assert gen("report", *map(str, two_runs), "-o", f"{ours}/", cwd=tmp_path).returncode == 0
    assert (script / "report.md").read_bytes() == (ours / "report.md").read_bytes()
    assert list(pytorch_project.glob("report.*")) == []
