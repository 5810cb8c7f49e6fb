"""Progress on rank 0: a line every log_every steps (step, loss, lr, samples/s, time left), or
on a terminal with tqdm a progress bar (platform logs are not terminals)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Any, Iterator

# A progress line at least this often, whatever log_every says.
QUIET_S = 30.0
log = logging.getLogger("train")


def _bar(total: int, done: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # a terminal gets lines then
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
        """Every log_every steps, the last, and any step QUIET_S seconds after the last one."""
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
            minutes, secs = divmod(int(left), 60)
            log.info(
                "epoch %s  step %d/%d  loss %.4f  lr %.4g  %.0f samples/s  ETA %d:%02d:%02d",
                *(epoch, step, self.total, loss, lr, rate, minutes // 60, minutes % 60, secs),
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
