"""Golden files stay in step with the tests that check them: none stale, none missing."""

from __future__ import annotations

import importlib

from tests.golden import GOLDEN_DIR

TESTS = GOLDEN_DIR.parent


def _suites() -> dict[str, tuple[str, ...]]:
    """Every test module that declares GOLDEN_CASES, by module name."""
    suites = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        if "GOLDEN_CASES" not in path.read_text(encoding="utf-8"):
            continue
        dotted = ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)
        module = importlib.import_module(dotted)
        if hasattr(module, "GOLDEN_CASES"):
            suites[path.stem] = tuple(module.GOLDEN_CASES)
    return suites


def test_every_golden_file_belongs_to_a_case_and_every_case_has_one() -> None:
    suites = _suites()
    on_disk = {
        d.name: {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()}
        for d in GOLDEN_DIR.iterdir()
        if d.is_dir()
    }
    stale = {name: files for name, files in on_disk.items() if name not in suites}
    assert not stale, f"golden files of no test module (delete them): {stale}"
    for name, cases in suites.items():
        assert len(set(cases)) == len(cases), f"{name}.GOLDEN_CASES repeats a case"
        files = on_disk.get(name, set())
        assert files - set(cases) == set(), f"stale golden files in {name}/"
        missing = set(cases) - files
        assert not missing, f"{name}: no golden file for {sorted(missing)} (--update-golden)"
