"""Whole batches read from disk ahead of the step, by loader processes, in order.

A batch is one task: its samples decoded (split.load), augmented and stacked (uint8
images, float32 rows) in a worker process, sent back whole, normalised by the caller.
One task a batch, not a sample: a framework's per-sample Python call (a sampler, a
queue, the interpreter lock of the process that trains) is paid once for the batch.
At most ``2 x workers`` batches wait decoded: memory stays bounded whatever the epoch.
"""

from __future__ import annotations

import atexit
import multiprocessing
import signal
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterable, Iterator, Tuple

import numpy as np

from src.scaffold.data.splits import Split
from src.scaffold.errors import DatasetError

Batch = Tuple[np.ndarray, np.ndarray]


class BatchReader:
    """Reads the samples of one batch of a split: sample i of ``epoch`` augmented with
    draws from (seed, epoch, i), the same whatever the workers and after a resume."""

    def __init__(
        self,
        split: Split,
        labels: np.ndarray,
        augment: Callable | None = None,
        crop: int = 0,
        flip: bool = False,
    ) -> None:
        self.split, self.labels = split, labels
        self.augment = augment if augment is not None and (crop or flip) else None
        self.crop, self.flip = crop, flip

    def __call__(self, seed: int, epoch: int, indices: np.ndarray) -> Batch:
        samples = [self.split.load(int(i)) for i in indices]
        if self.augment is not None:
            samples = [
                self.augment(s, np.random.default_rng([seed, epoch, int(i)]), self.crop, self.flip)
                for s, i in zip(samples, indices)
            ]
        return np.stack(samples), self.labels[indices]


# This worker process's readers, by split, set once when it starts (not sent per batch).
_readers: dict[str, BatchReader] = {}


def _start_worker(readers: dict[str, BatchReader]) -> None:
    _readers.update(readers)
    # Ctrl-C reaches the whole process group: the process that trains handles it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read(name: str, seed: int, epoch: int, indices: np.ndarray) -> Batch:
    return _readers[name](seed, epoch, indices)


class Prefetcher:
    """Batches of the named splits in the order asked for, read by ``workers`` processes
    started at the first batch (none: read in this process)."""

    def __init__(self, readers: dict[str, BatchReader], workers: int) -> None:
        self.readers, self.workers = readers, workers
        self.pool: ProcessPoolExecutor | None = None

    def batches(
        self, name: str, plan: Iterable[np.ndarray], epoch: int = 0, seed: int = 0
    ) -> Iterator[Batch]:
        """Each batch of ``plan`` (sample indices of split ``name``, an array a batch)."""
        if not self.workers:
            for indices in plan:
                yield self.readers[name](seed, epoch, indices)
            return
        if self.pool is None:
            # fork, as PyTorch's DataLoader: the workers start without importing anything.
            self.pool = ProcessPoolExecutor(
                self.workers,
                multiprocessing.get_context("fork"),
                initializer=_start_worker,
                initargs=(self.readers,),
            )
            # Stopped before the interpreter tears its modules down, whatever the exit.
            atexit.register(self.close)
        try:
            yield from self._ahead(self.pool, name, plan, epoch, seed)
        except BrokenProcessPool:
            self.close()
            raise DatasetError(
                "a loader process died (killed, or out of memory): lower data.num_workers "
                "or the batch size"
            ) from None

    def _ahead(
        self,
        pool: ProcessPoolExecutor,
        name: str,
        plan: Iterable[np.ndarray],
        epoch: int,
        seed: int,
    ) -> Iterator[Batch]:
        todo = iter(plan)
        waiting: deque[Future] = deque()
        for indices in todo:
            waiting.append(pool.submit(_read, name, seed, epoch, indices))
            if len(waiting) >= 2 * self.workers:
                break
        while waiting:
            batch = waiting.popleft().result()
            following = next(todo, None)
            if following is not None:
                waiting.append(pool.submit(_read, name, seed, epoch, following))
            yield batch

    def close(self) -> None:
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.shutdown(wait=False)
            atexit.unregister(self.close)
