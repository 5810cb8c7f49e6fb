"""Where a run's start-up goes: the seconds from the process start to its first step,
split as the run passes its marks, logged once by rank 0 when that step is done:

    start-up 3.12 s to the first step: interpreter and imports 1.40, device 0.10,
    data 0.07, model 1.20, first step 0.35

- interpreter and imports: from the process start (the kernel's record of it, else the
  moment this module was imported) until the run begins; the framework is imported here;
- device: the framework's device and process group (the Backend made);
- data: the dataset found, staged and read (held in memory or listed);
- model: built, checked on a few samples, put on the device with its optimizer; a
  checkpoint or pretrained weights restored;
- first step: the first training step, done (its loss read back from the device).
"""

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

    def split(self) -> list[tuple[str, float]]:
        """(phase, seconds) in order, from the process start."""
        ends = dict(self.marks)
        out, last = [], STARTED
        for phase in PHASES:
            if phase in ends:
                out.append((phase, ends[phase] - last))
                last = ends[phase]
        return out

    def summary(self) -> str:
        split = self.split()
        total = sum(seconds for _, seconds in split)
        parts = ", ".join(f"{phase} {seconds:.2f}" for phase, seconds in split)
        return f"start-up {total:.2f} s to the first step: {parts}"


# The run's timeline: train.py has one run per process.
TIMELINE = Timeline()
