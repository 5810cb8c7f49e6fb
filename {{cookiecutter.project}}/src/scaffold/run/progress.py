"""Progress of a run on rank 0: every log_every steps one line with the step, the loss,
the learning rate, samples/s and the time left; on a terminal, a progress bar instead.

Platform logs (OpenI, ModelArts, kubectl logs, the launchers' files) are not terminals,
so they get the lines; the bar needs tqdm, and without it a terminal gets lines too.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Any, Iterator

# A progress line at least this often, whatever log_every says.
QUIET_S = 30.0
log = logging.getLogger("train")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


def _bar(total: int, done: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=done, unit="step", dynamic_ncols=True, file=sys.stdout)


class Progress:
    """Counts the steps of a run of ``total`` steps, ``done`` of them before this start."""

    def __init__(self, total: int, done: int, every: int, global_batch: int, bar: bool) -> None:
        self.total, self.every, self.global_batch = total, every, global_batch
        self.first = self.last = done
        self.started = self.last_time = time.perf_counter()
        self.bar = _bar(total, done) if bar else None

    def due(self, step: int) -> bool:
        """Whether step ``step`` (1-based, of the whole run) is one to report: every
        log_every steps, the last, and any step QUIET_S seconds after the last report (a
        slow epoch is never silent for long)."""
        if step % self.every == 0 or step == self.total:
            return True
        return time.perf_counter() - self.last_time >= QUIET_S

    def tick(self, step: int) -> None:
        if self.bar is not None:
            self.bar.update(step - self.bar.n)

    def report(self, step: int, epoch: str, loss: float, lr: float) -> float:
        """Show step ``step``; return the samples/s since the last report."""
        now = time.perf_counter()
        rate = (step - self.last) * self.global_batch / max(now - self.last_time, 1e-9)
        left = (self.total - step) * (now - self.started) / max(step - self.first, 1)
        self.last, self.last_time = step, now
        if self.bar is not None:
            self.bar.set_postfix_str(f"epoch {epoch} loss {loss:.4f} lr {lr:.4g}", refresh=False)
        else:
            log.info(
                "epoch %s  step %d/%d  loss %.4f  lr %.4g  %.0f samples/s  ETA %s",
                *(epoch, step, self.total, loss, lr, rate, _clock(left)),
            )
        return rate

    @contextlib.contextmanager
    def shown(self) -> Iterator[None]:
        """While training: log lines go above the bar instead of through it."""
        if self.bar is None:
            yield
            return
        from tqdm.contrib.logging import logging_redirect_tqdm

        try:
            with logging_redirect_tqdm():
                yield
        finally:
            self.bar.close()
