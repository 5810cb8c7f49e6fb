"""Golden files: whole expected texts, compared as text and regenerated on purpose.

A test module that checks golden files names its cases in ``GOLDEN_CASES`` (a
list of file names); its files live in ``tests/golden/<module name>/``. The
``golden`` fixture (tests/conftest.py) compares a text with its file, or writes
the file under ``pytest --update-golden``. tests/unit/test_golden.py checks that
every file belongs to a listed case and every case has its file, so no golden
file goes stale.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
UPDATE_FLAG = "--update-golden"


@dataclass(frozen=True)
class Golden:
    """The golden files of one test module."""

    suite: str
    cases: tuple[str, ...]
    update: bool

    def path(self, case: str) -> Path:
        return GOLDEN_DIR / self.suite / case

    def check(self, case: str, text: str) -> None:
        """Compare ``text`` with the golden file of ``case`` (or write it when updating)."""
        assert case in self.cases, f"{case!r} is not in {self.suite}.GOLDEN_CASES"
        path = self.path(case)
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.is_file():
            raise AssertionError(f"no golden file {path}: run pytest {UPDATE_FLAG} to write it")
        expected = path.read_text(encoding="utf-8")
        if text != expected:
            diff = difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"golden/{self.suite}/{case}",
                tofile="rendered",
            )
            raise AssertionError(
                f"{case} differs from its golden file (pytest {UPDATE_FLAG} rewrites it "
                "after a deliberate change):\n" + "".join(diff)
            )
