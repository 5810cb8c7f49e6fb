"""Retries of copies: TRAIN_{UPLOAD,DOWNLOAD}_RETRIES (default 2) and _BACKOFF (2 s, doubled)."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from src.scaffold.errors import ConfigError, StorageError

log = logging.getLogger(__name__)
T = TypeVar("T")


def _number(name: str, default: float, whole: bool) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = -1
    if not value >= 0:  # also catches nan
        kind = "a whole number of retries (0: try once)" if whole else "seconds"
        raise ConfigError(f"{name} must be {kind}, 0 or more, not {text!r}")
    return value


@dataclass(frozen=True)
class Retry:
    """Attempts and the wait before the first retry, for uploads or for downloads."""

    attempts: int
    backoff: float

    @classmethod
    def read(cls, direction: str) -> Retry:
        """The policy for ``direction``, "UPLOAD" or "DOWNLOAD", from the environment."""
        retries = _number(f"TRAIN_{direction}_RETRIES", 2, whole=True)
        backoff = _number(f"TRAIN_{direction}_BACKOFF", 2.0, whole=False)
        return cls(int(retries) + 1, backoff)

    def waits(self) -> list[float]:
        """The pause after each failed attempt but the last."""
        return [self.backoff * 2**n for n in range(self.attempts - 1)]

    def run(self, action: Callable[[], T], what: str) -> T:
        """``action()``, tried again after a StorageError; the last one is raised, with a count."""
        for attempt, wait in enumerate([*self.waits(), None], start=1):
            try:
                return action()
            except StorageError as err:
                if wait is None:
                    tries = "1 attempt" if attempt == 1 else f"{attempt} attempts"
                    raise StorageError(f"{err} (gave up after {tries})") from err
                log.warning("%s failed (attempt %d of %d): %s", what, attempt, self.attempts, err)
                time.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")
