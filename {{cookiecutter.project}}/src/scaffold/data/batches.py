"""Whole batches decoded ahead of the step by loader processes, at most 2 x workers waiting."""

from __future__ import annotations

import atexit
import multiprocessing
import signal
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import islice
from typing import Callable, Iterable, Iterator, Tuple

import numpy as np

from src.scaffold.data.splits import Split
from src.scaffold.errors import DatasetError

Batch = Tuple[np.ndarray, np.ndarray]


class BatchReader:
    """One batch of a split; sample i augmented by draws from (seed, epoch, i), so reproducible."""

    def __init__(
        self,
        split: Split,
        labels: np.ndarray,
        augment: Callable | None = None,
        crop: int = 0,
        flip: bool = False,
    ) -> None:
        self.split, self.labels, self.crop, self.flip = split, labels, crop, flip
        self.augment = augment if augment is not None and (crop or flip) else None

    def __call__(self, seed: int, epoch: int, indices: np.ndarray) -> Batch:
        samples = [self.split.load(int(i)) for i in indices]
        if self.augment is not None:
            draws = (np.random.default_rng([seed, epoch, int(i)]) for i in indices)
            samples = [self.augment(s, rng, self.crop, self.flip) for s, rng in zip(samples, draws)]
        return np.stack(samples), self.labels[indices]


_readers: dict[str, BatchReader] = {}  # this worker's, by split, set when it starts


def _start_worker(readers: dict[str, BatchReader]) -> None:
    _readers.update(readers)
    # Ctrl-C reaches the whole process group: the process that trains handles it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read(name: str, seed: int, epoch: int, indices: np.ndarray) -> Batch:
    return _readers[name](seed, epoch, indices)


class Prefetcher:
    """Batches in the order asked, by ``workers`` processes (0: in this one) started lazily."""

    def __init__(self, readers: dict[str, BatchReader], workers: int) -> None:
        self.readers, self.workers = readers, workers
        self.pool: ProcessPoolExecutor | None = None

    def batches(
        self, name: str, plan: Iterable[np.ndarray], epoch: int = 0, seed: int = 0
    ) -> Iterator[Batch]:
        """Each batch of ``plan`` (sample indices of split ``name``, an array a batch)."""
        if not self.workers:
            yield from (self.readers[name](seed, epoch, indices) for indices in plan)
            return
        if self.pool is None:
            fork = multiprocessing.get_context("fork")  # as PyTorch's DataLoader: no imports
            self.pool = ProcessPoolExecutor(
                self.workers, fork, initializer=_start_worker, initargs=(self.readers,)
            )
            atexit.register(self.close)  # stopped before modules are torn down, whatever the exit
        pool, todo = self.pool, iter(plan)
        try:
            waiting: deque[Future] = deque(
                pool.submit(_read, name, seed, epoch, i) for i in islice(todo, 2 * self.workers)
            )
            while waiting:
                batch = waiting.popleft().result()
                following = next(todo, None)
                if following is not None:
                    waiting.append(pool.submit(_read, name, seed, epoch, following))
                yield batch
        except BrokenProcessPool:
            self.close()
            raise DatasetError(
                "a loader process died (killed, or out of memory): lower data.num_workers "
                "or the batch size"
            ) from None

    def close(self) -> None:
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.shutdown(wait=False)
            atexit.unregister(self.close)
