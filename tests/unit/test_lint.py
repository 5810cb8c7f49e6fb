"""Our own code passes ruff (lint and format); the template is linted per render elsewhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUFF = str(Path(sys.executable).parent / "ruff")


def test_ruff_check() -> None:
    result = subprocess.run(
        [RUFF, "check", "--no-cache", str(REPO)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-4000:]


def test_ruff_format() -> None:
    result = subprocess.run(
        [RUFF, "format", "--check", "--no-cache", str(REPO)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-4000:]
