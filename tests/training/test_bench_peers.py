"""bench/bench_peers.py --quick: a smoke of its code paths (the peers' environment installed,
train.py and every peer run once at tiny sizes, the table and the JSON), without timing
assertions: its figures are benchmarks, not tests (bench/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TRAIN_TEMPLATE_CACHE", "/var/tmp/train-template-cache"))
sys.path.insert(0, str(REPO / "bench"))

import bench_peers  # noqa: E402
from bench_peers import QUICK, RUNNERS, TRAIN  # noqa: E402


@pytest.mark.slow
def test_the_peers_bench_runs_train_py_and_every_peer(tmp_path: Path) -> None:
    figures = tmp_path / "peers.json"
    # The peers' venv is kept between runs, as the wheelhouses are.
    env = {**os.environ, "BENCH_PEERS_ENV": str(CACHE / "peers-env")}
    result = subprocess.run(
        [sys.executable, "bench/bench_peers.py", "--quick", "--json", str(figures)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = json.loads(figures.read_text())
    assert {"torch", "lightning", "accelerate"} <= found["versions"].keys()
    runs = found["results"]["32"]
    assert set(runs) == {TRAIN, *QUICK}
    # Every peer script, with every flag it takes.
    assert {RUNNERS[name][0] for name in QUICK} == {script for script, _, _ in RUNNERS.values()}
    assert {f for name in QUICK for f in RUNNERS[name][1]} == {
        f for _, flags, _ in RUNNERS.values() for f in flags
    }
    for name, (run,) in runs.items():
        assert run["samples_per_s"] > 0 and run["peak_mib"] > 0, name
        assert 0 < run["first_step"] < run["wall"], (name, run)
    for name in runs:
        assert f"| {name} |" in result.stdout
    # The saved figures print the same tables again, measuring nothing.
    again = subprocess.run(
        [sys.executable, "bench/bench_peers.py", "--tables", str(figures)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert rows and rows == [line for line in again.stdout.splitlines() if line.startswith("| ")]


@pytest.mark.slow
def test_a_peer_that_cannot_be_installed_is_one_line_and_its_rows_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip really runs, asked for a package that does not exist."""
    missing = "train-template-no-such-peer"
    monkeypatch.setattr(bench_peers, "PACKAGES", {missing: f"{missing}==1.0"})
    python, versions = bench_peers.peers_env(tmp_path / "env")
    assert python.is_file() and versions == {}
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{missing}: not installable (")
    assert line.endswith("); its rows are left out")
    # The runners that need it are not measured: the rest are.
    assert bench_peers.measured(versions) == [TRAIN, "the bare loop"]
    assert bench_peers.measured({"accelerate": "1.15.0"}) == [TRAIN, "accelerate", "the bare loop"]
