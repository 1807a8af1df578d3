"""DaemonThreads: an executor whose threads never hold up the process's exit.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, and
asyncio waits for its default executor before ``asyncio.run`` returns — so one call still blocked
(an embedding request waiting out its timeout) keeps a stopped server alive. Here the threads are
daemons and `shutdown` returns at once: a call still running when the process ends is abandoned,
as the request that asked for it was.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Work = tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreads(concurrent.futures.ThreadPoolExecutor):
    """Up to `max_workers` daemon threads, started as work arrives and kept for the next. (A
    ``ThreadPoolExecutor`` by type only, which asyncio requires of a default executor: none of its
    own threads ever start.)"""

    def __init__(self, max_workers: int = 16, name: str = "worker") -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=name)
        self._queued: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._count_lock = threading.Lock()
        self._started = 0
        self._waiting = 0
        self._most = max_workers
        self._prefix = name

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queued.put((future, fn, args, kwargs))
        with self._count_lock:
            start = self._waiting == 0 and self._started < self._most
            if start:
                self._started += 1
        if start:
            threading.Thread(target=self._serve, name=f"{self._prefix}-{self._started}", daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            with self._count_lock:
                self._waiting += 1
            future, fn, args, kwargs = self._queued.get()
            with self._count_lock:
                self._waiting -= 1
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Returns at once: the threads are daemons (calls queued and not started still run, if
        the process lives long enough)."""


__all__ = ["DaemonThreads"]
