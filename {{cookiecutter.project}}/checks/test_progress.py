"""Progress lines: every log_every steps, the last, and never QUIET_S seconds of silence."""

from __future__ import annotations

from src.scaffold.run import progress
from src.scaffold.run.progress import Progress


def test_a_line_every_log_every_steps_and_the_last() -> None:
    shown = Progress(total=10, done=0, every=4, global_batch=8, bar=False)
    assert [step for step in range(1, 11) if shown.due(step)] == [4, 8, 10]


def test_a_slow_run_is_never_silent_for_long(monkeypatch) -> None:
    shown = Progress(total=1000, done=0, every=500, global_batch=8, bar=False)
    assert not shown.due(3)
    clock = [shown.last_time + progress.QUIET_S]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    assert shown.due(3)  # QUIET_S seconds since the last line: one now, whatever log_every
