"""Taking and giving back SQLite's write lock: what opening a file (`opening`) and running its
writes (`store`) share.

A ``BEGIN IMMEDIATE`` that finds the lock held by another process is tried again for up to
`WRITE_PATIENCE_S` (`begin`): SQLite's own wait polls, and loses to a busy neighbour. A failed
transaction is rolled back without letting the rollback's own error hide the first (`rollback`).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from robot_mcp_memory import logs

_log = logs.get("robot_mcp_memory.processes.sqlite.store")

#: How long one attempt to take SQLite's write lock waits (its busy handler), in milliseconds.
BUSY_TIMEOUT_MS = 5_000
#: How long a write keeps trying for the lock, in seconds, across attempts. Another process on the
#: same data directory (a training loop's `RobotMemory`, the CLI) may hold it for a big batch, and
#: SQLite's waiting is polling, not a queue: a waiter that sleeps through each short gap between
#: that process's transactions loses the race, and after one `BUSY_TIMEOUT_MS` its write failed
#: with "busy". Nothing of the write has run when `BEGIN IMMEDIATE` fails, so it is simply tried
#: again until this patience runs out (docs/experiences.md, "Python API").
WRITE_PATIENCE_S = 30.0

#: I/O errors SQLite reports when the operating system refused to *write* the file: ENOSPC where
#: SQLite does not see it as SQLITE_FULL, EFBIG (a file-size limit), EROFS/EPERM (the disk or the
#: file turned read-only under the server), EIO from a failing disk.
WRITE_IOERRS = frozenset(
    {
        sqlite3.SQLITE_IOERR_WRITE,
        sqlite3.SQLITE_IOERR_FSYNC,
        sqlite3.SQLITE_IOERR_DIR_FSYNC,
        sqlite3.SQLITE_IOERR_TRUNCATE,
        sqlite3.SQLITE_IOERR_SHMSIZE,
    }
)


def busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` is SQLite's "database is locked": another connection holds the lock."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_BUSY


def short(exc: BaseException) -> str:
    """The first line of `exc`'s message, bounded, for a log field."""
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def begin(conn: sqlite3.Connection, patience_s: float, path: Path) -> None:
    """``BEGIN IMMEDIATE``, tried again while another connection holds the write lock, for up
    to `patience_s` in all (`WRITE_PATIENCE_S`); then the last "busy" is raised."""
    deadline = time.monotonic() + patience_s
    waits = 0
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not busy(exc) or time.monotonic() >= deadline:
                raise
            waits += 1
            _log.warning("store.write_lock_busy", attempt=waits, path=str(path))
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))  # busy at once: no spin
            continue
        if waits:
            _log.info("store.write_lock_taken", attempts=waits + 1, path=str(path))
        return


def rollback(conn: sqlite3.Connection, path: Path) -> None:
    """Roll back what is left of a failed transaction. SQLite has already rolled it back after
    some errors (a full disk): a ROLLBACK then fails with an error of its own ("no transaction
    is active"), which must not take the place of the one that says what happened."""
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        _log.error("store.rollback_failed", error=short(exc), path=str(path))


__all__ = ["BUSY_TIMEOUT_MS", "WRITE_IOERRS", "WRITE_PATIENCE_S", "begin", "busy", "rollback", "short"]
