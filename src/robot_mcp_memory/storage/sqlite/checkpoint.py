"""Background WAL checkpoints: a commit never pays for copying the WAL back into the database.

In WAL mode every commit appends its pages to ``index.db-wal``; a *checkpoint* copies them back
into ``index.db`` and, with ``synchronous=NORMAL``, fsyncs both files. SQLite runs it inside
the ``COMMIT`` that crosses ``wal_autocheckpoint`` pages — on the writer thread, so every so many
writes one ``learn`` would pay for copying and fsyncing the pages of all the others.

Here a second thread with its own connection runs ``PRAGMA wal_checkpoint(PASSIVE)`` every
`COMMITS_PER_CHECKPOINT` commits (at most every `min_interval` seconds). A passive checkpoint never blocks the writer or
a reader, and SQLite releases the GIL while it copies and fsyncs, so it runs on another core.

The connection is ``query_only``: it cannot change a row — the store's read-write connection still
makes every write. The writer keeps a high ``wal_autocheckpoint`` as the backstop SQLite needs: the WAL is
only rewound when a write starts after a checkpoint caught up with it, which a passive checkpoint
racing a busy writer may never do; the backstop's checkpoint then finds nearly everything copied
and only rewinds (see `WRITER_AUTOCHECKPOINT`).
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from pathlib import Path

from robot_mcp_memory import logs

_log = logs.get("robot_mcp_memory.processes.sqlite.store")

#: Commits between two background checkpoints: ~20 pages a `learn`, so about SQLite's own cadence
#: (1,000 pages), and no more fsyncs than before for a server that writes now and then.
COMMITS_PER_CHECKPOINT = 32
#: The writer's own autocheckpoint threshold (pages; SQLite's default is 1,000). Reached only when
#: the background checkpoint keeps losing the race to rewind the WAL; ~40 MB of WAL at 4 KB pages.
WRITER_AUTOCHECKPOINT = 10_000


class Checkpointer:
    """Runs passive checkpoints of one database on its own thread, when poked."""

    def __init__(self, path: Path, *, min_interval: float = 0.02) -> None:
        self.path = path
        self.min_interval = min_interval
        self.runs = 0
        self.failures = 0
        self._commits = 0
        # A doorbell, not an Event: `poke` may run on the main thread (a blocking caller's own
        # write), where Ctrl-C can land anywhere; an Event's Python-level condition lock could be
        # left held by it, SimpleQueue.put is one C call.
        self._wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sqlite-checkpoint-{path.name}", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """The writer committed a transaction; every `COMMITS_PER_CHECKPOINT`-th one wakes the
        checkpoint. Called only under the store's write lock (one caller at a time)."""
        self._commits += 1
        if self._commits >= COMMITS_PER_CHECKPOINT:
            self._commits = 0
            self.poke()

    def poke(self) -> None:
        """Checkpoint soon. Cheap; safe from any thread, and from a signal handler's interrupt."""
        self._wake.put(None)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only=1")  # checkpoints only: every row change stays the writer's
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=0")  # a passive checkpoint that finds the lock taken skips
        return conn

    def _run(self) -> None:
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            _log.warning("store.checkpointer_unavailable", error=str(exc)[:200], path=str(self.path))
            return  # the writer's own autocheckpoint still keeps the WAL bounded
        try:
            while True:
                self._wake.get()
                if self._stop.is_set():
                    return
                with contextlib.suppress(queue.Empty):
                    while True:  # one checkpoint answers every ring so far
                        self._wake.get_nowait()
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.runs += 1
                except sqlite3.Error as exc:
                    self.failures += 1
                    if self.failures in (1, 10, 100) or self.failures % 1000 == 0:
                        _log.warning("store.checkpoint_failed", error=str(exc)[:200], failures=self.failures)
                if self._stop.wait(self.min_interval):
                    return
        finally:
            conn.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop and close the connection (before the writer's final checkpoint on close)."""
        self._stop.set()
        self._wake.put(None)
        self._thread.join(timeout)


__all__ = ["COMMITS_PER_CHECKPOINT", "WRITER_AUTOCHECKPOINT", "Checkpointer"]
