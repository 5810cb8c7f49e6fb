"""Where a run's start-up goes, logged once by rank 0 after its first step: "start-up 3.12 s
to the first step: interpreter and imports 1.40, device 0.10, data 0.07, ..."."""

from __future__ import annotations

import time

from src.scaffold.storage.once import process_age

PHASES = ("interpreter and imports", "device", "data", "model", "first step")
# time.perf_counter() at the process start, as near as can be known.
STARTED = time.perf_counter() - process_age()


class Timeline:
    """The marks of one run's start-up; ``summary`` once every phase has ended."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float]] = []

    def mark(self, phase: str) -> None:
        """``phase`` (one of PHASES) ends now; a phase marked again keeps its first end."""
        if phase not in dict(self.marks):
            self.marks.append((phase, time.perf_counter()))

    def summary(self) -> str:
        """Each phase's seconds in order, from the process start."""
        ends = dict(self.marks)
        split, last = [], STARTED
        for phase in PHASES:
            if phase in ends:
                split.append((phase, ends[phase] - last))
                last = ends[phase]
        total = sum(seconds for _, seconds in split)
        parts = ", ".join(f"{phase} {seconds:.2f}" for phase, seconds in split)
        return f"start-up {total:.2f} s to the first step: {parts}"


TIMELINE = Timeline()
