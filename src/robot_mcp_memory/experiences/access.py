"""Access counters waiting to be written, whatever the backend: every recall adds to them without
waiting; at most every `interval` seconds the lot is written as one transaction, so a loop of
recalls costs one small write now and then instead of one per recall, and never delays a read.

Invariants: a count is added once and written at most once (`flush` takes what is pending under
the lock before writing it); at most one timer is armed; counts may be lost when the write fails,
a read never fails for them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class PendingAccesses(Generic[T]):
    """The batching and its timer; an adapter says how the lot is written (`_write`)."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._pending: dict[int, int] = {}
        self._now = 0.0
        self._timer: threading.Timer | None = None

    def add(self, ids: Iterable[int], now: float) -> None:
        with self._lock:
            for mid in ids:
                self._pending[mid] = self._pending.get(mid, 0) + 1
            self._now = now
            if self._timer is None and self._pending:
                self._timer = threading.Timer(self._interval, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> T | None:
        """Write what is pending now (the timer's job, and closing's); None when nothing was."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            counts, self._pending = self._pending, {}
            now = self._now
        if not counts:
            return None
        return self._write(counts, now)

    def _write(self, counts: dict[int, int], now: float) -> T | None:
        raise NotImplementedError
