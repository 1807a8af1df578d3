"""Backfiller: the single-flight background thread that fills missing vectors, whichever backend
stores them (`search.sqlite.vectorstore`, `search.postgres.vectorstore` give it its job).

Invariant: at most one pass runs at a time, and a `kick` during a pass schedules exactly one more,
so a row written while a pass ran is looked at by a pass that starts after its write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from robot_mcp_memory import logs

_log = logs.get("robot_mcp_memory.vectors")


class Backfiller:
    """Runs `job(stop)` on one daemon thread at a time. A `kick` while it runs schedules one
    more pass, so rows written meanwhile are not missed; `stop` asks it to finish early."""

    def __init__(self, job: Callable[[threading.Event], int], name: str = "vector-backfill") -> None:
        self._job = job
        self._name = name
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self.done = 0

    def kick(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            if self._thread is not None:
                self._again = True
                return
            self._idle.clear()
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.done += self._job(self._stop)
            except Exception:
                _log.exception("vectors.backfill_failed")
            with self._lock:
                if not self._again or self._stop.is_set():
                    self._thread = None
                    self._idle.set()
                    return
                self._again = False

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)


__all__ = ["Backfiller"]
