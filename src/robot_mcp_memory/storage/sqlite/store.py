"""SqliteStore: one writer thread, read-only readers, versioned open (the Datasette pattern).

- The only read-write connection is owned by one writer thread. Jobs arrive on a queue as
  ``(fn, future, context)`` and each runs in ``BEGIN IMMEDIATE … COMMIT`` (or ``ROLLBACK`` and the
  exception goes to the future). The caller's contextvars are copied so log fields survive the hop.
  A ``BEGIN IMMEDIATE`` that finds the lock held by another process is tried again for up to
  `WRITE_PATIENCE_S` (`SqliteStore._begin`): SQLite's own wait polls, and loses to a busy neighbour.
- One departure, for callers that block anyway (`write_blocking`: the Python API, worker
  threads): when the writer is idle, the caller runs its transaction itself — on the same
  connection, holding the same lock the writer holds for each job — instead of paying two thread
  wake-ups to hand it over and back. Transactions stay one at a time on one connection. The event
  loop touches SQLite only in a stdio server (`reads_on_loop`, `writes_on_loop`: one client), and
  there only for a write that cannot wait (`_write_now`); any other async `write` queues.
- **Definition writes** (`write`, `write_blocking`) are never dropped: the caller waits for the
  commit, so an acknowledged write is a committed one.
- **Hot record writes** (`hot`) are fire-and-forget from the caller's thread: bounded by
  `hot_queue_max`; beyond it they are dropped, counted and logged — a counter must never stall
  the event loop that serves the whole fleet.
- Readers use their own ``mode=ro`` connections (``PRAGMA query_only``) on a small thread pool;
  under WAL they never wait for the writer.
- Opening is versioned: migrations are an append-only list, each applied in its own transaction
  together with the version bump, chosen from the version read under the write lock (processes
  started together share one file's creation or upgrade; `_migrate`); a newer file raises
  `SchemaTooNew` and a file that is not an SQLite database (or fails its integrity check, or
  belongs to another application) raises `StoreUnreadable`; a file or directory that cannot be
  written raises `StoreNotWritable`. In every case the file is left untouched. A lock another
  process kept past the patience raises `StoreBusy`, a disk that refused the upgrade's writes
  `StoreWriteFailed` (the step rolled back): neither is the file's fault (`_open_failure`).
- ``read_only=True`` opens without the writer (commands that only read, in a directory they cannot
  write): see `kit.readonly`.

No `sqlite3.Error` escapes this module: it is translated into `StorageError` at the boundary.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import itertools
import os
import queue
import secrets
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from robot_mcp_memory import logs
from robot_mcp_memory.errors import (
    CHECK_THE_STORE,
    ForeignWal,
    MigrationFailed,
    SchemaTooNew,
    StorageError,
    StoreBusy,
    StoreFailed,
    StoreNotWritable,
    StoreUnreadable,
    StoreWriteFailed,
)
from robot_mcp_memory.storage.clock import now_iso
from robot_mcp_memory.storage.sqlite.checkpoint import WRITER_AUTOCHECKPOINT, Checkpointer
from robot_mcp_memory.storage.sqlite.kinds import Kind, Schema
from robot_mcp_memory.storage.sqlite.readonly import ReadView, read_view

T = TypeVar("T")
Migration = Callable[[sqlite3.Connection], None]

_log = logs.get("robot_mcp_memory.processes.sqlite.store")
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: How long one attempt to take SQLite's write lock waits (its busy handler), in milliseconds.
BUSY_TIMEOUT_MS = 5_000
#: How long a write keeps trying for the lock, in seconds, across attempts. Another process on the
#: same data directory (a training loop's `RobotMemory`, the CLI) may hold it for a big batch, and
#: SQLite's waiting is polling, not a queue: a waiter that sleeps through each short gap between
#: that process's transactions loses the race, and after one `BUSY_TIMEOUT_MS` its write failed
#: with "busy". Nothing of the write has run when `BEGIN IMMEDIATE` fails, so it is simply tried
#: again until this patience runs out (docs/experiences.md, "Python API").
WRITE_PATIENCE_S = 30.0
_META_DDL = "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


@dataclass(frozen=True)
class OpenReport:
    """What happened when the file was opened; logged once as ``store_ready``."""

    path: str
    from_version: int
    to_version: int
    created: bool
    counts: dict[str, int]
    undeclared: list[str]
    pruned: dict[str, int]

    def log_fields(self) -> dict[str, object]:
        """The fields of the one ``store_ready`` line every store logs at open."""
        return {
            "path": self.path,
            "schema_from": self.from_version,
            "schema_to": self.to_version,
            "created": self.created,
            "rows": self.counts,
            "pruned": self.pruned,
        }


@dataclass
class StoreStats:
    hot_pending: int = 0
    hot_dropped: int = 0
    hot_done: int = 0
    writes_done: int = 0


class _Waiter:
    """What a blocking caller waits on: the writer hands it the result and releases one lock.

    The subset of `concurrent.futures.Future` the writer thread uses. A Future's `result` waits on
    a `Condition` (a fresh lock per wait, Python-level bookkeeping on both sides); this is one C
    lock, acquired by the waiting caller, released by the writer: a training loop pays the wait on
    every `learn`, so the wait is kept to what a blocking write needs."""

    __slots__ = ("_done", "_exc", "_result")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self._result: Any = None
        self._exc: BaseException | None = None

    def set_running_or_notify_cancel(self) -> bool:
        return True  # a blocking caller cannot cancel

    def set_result(self, result: Any) -> None:
        self._result = result
        self._done.release()

    def set_exception(self, exc: BaseException) -> None:
        self._exc = exc
        self._done.release()

    def result(self) -> Any:
        self._done.acquire()
        if self._exc is not None:
            raise self._exc
        return self._result


@dataclass
class _Job:
    """One write: run by the writer thread (queued with the future its caller waits on) or by a
    blocking caller itself (`SqliteStore.write_blocking`)."""

    fn: Callable[[sqlite3.Connection], Any]
    context: contextvars.Context
    hot: bool
    transaction: bool = True
    #: Run with the result once the transaction has committed, before the next write begins: an
    #: in-memory mirror of the tables (the vector index) patched here sees the commits in order.
    after: Callable[[Any], None] | None = None


_Future = concurrent.futures.Future[Any] | _Waiter


_STOP = object()


#: I/O errors SQLite reports when the operating system refused to *write* the file: ENOSPC where
#: SQLite does not see it as SQLITE_FULL, EFBIG (a file-size limit), EROFS/EPERM (the disk or the
#: file turned read-only under the server), EIO from a failing disk.
_WRITE_IOERRS = frozenset(
    {
        sqlite3.SQLITE_IOERR_WRITE,
        sqlite3.SQLITE_IOERR_FSYNC,
        sqlite3.SQLITE_IOERR_DIR_FSYNC,
        sqlite3.SQLITE_IOERR_TRUNCATE,
        sqlite3.SQLITE_IOERR_SHMSIZE,
    }
)


def translate(exc: sqlite3.Error, action: str) -> StoreFailed:
    """Map an sqlite error to a reader-facing `StorageError` (no SQL, no path)."""
    code = getattr(exc, "sqlite_errorcode", None)
    base = None if code is None else code & 0xFF
    if base == sqlite3.SQLITE_FULL:
        return StoreFailed(
            f"the disk is full: {action} was not stored. Reads still work; "
            "retry once the operator has freed space on the server."
        )
    if code in _WRITE_IOERRS:
        return StoreFailed(
            f"the server could not write its database file (the disk is full, a file-size limit was "
            f"reached, or the disk is read-only or failing): {action} was not stored. Reads still work; "
            "retry once the operator has freed space or fixed the data directory."
        )
    if base == sqlite3.SQLITE_READONLY:
        return StoreFailed(
            f"the database is read-only: {action} was not stored. Reads still work; "
            "the operator must make the data directory writable."
        )
    if base == sqlite3.SQLITE_BUSY:
        return StoreFailed(f"the database is busy: {action} did not complete. Retry shortly.")
    if base in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB):
        return StoreFailed(f"the database could not be accessed: {action} did not complete. {CHECK_THE_STORE}")
    return StoreFailed(f"the database refused {action}. {CHECK_THE_STORE}")


#: Every store opened in this process, so that a forked child can disown them (`_after_fork`).
_OPEN: weakref.WeakSet[SqliteStore] = weakref.WeakSet()


def _after_fork() -> None:
    """In a forked child: the stores the parent opened are unusable here — their writer and
    reader threads did not cross the fork, their locks may have been copied while held (a first
    write then waited forever), and SQLite connections must not cross one. Each refuses every
    call with a message saying so, and its close leaves the parent's connections alone."""
    for store in list(_OPEN):
        store._forked = True
        store._closed = True
        store._accepting = threading.Lock()
        store._writing = threading.Lock()
        store._lock = threading.Lock()
        store._reads_idle = threading.Condition(threading.Lock())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class SqliteStore:
    """One SQLite file with one writer thread. Build it with `SqliteStore.open`."""

    def __init__(
        self,
        path: Path,
        schema: Schema,
        migrations: list[Migration],
        *,
        hot_queue_max: int = 10_000,
        readers: int = 4,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        write_patience_s: float = WRITE_PATIENCE_S,
        read_only: bool = False,
        baseline: Migration | None = None,
        refuse_emptied: bool = True,
    ) -> None:
        self.path = Path(path)
        #: Opened for reading only (`open`): no writer connection, no migrations, no checkpoints.
        self.read_only = read_only
        self._view: ReadView | None = None  # how readers open the file when `read_only`
        self.busy_timeout_ms = busy_timeout_ms
        self.write_patience_s = write_patience_s
        #: This open store's own mark, unlike any other process's (or any other store's in this
        #: one): ``store_stamp()`` on the read-write connection returns it with a serial number.
        self.instance = secrets.token_hex(6)
        self._stamps = itertools.count(1)
        self.schema = schema
        self.migrations = list(migrations)
        #: Creates a new file's whole schema at the last version in one step (None: a new file runs
        #: every migration). Must leave the schema the migrations leave (a test per store checks).
        self.baseline = baseline
        #: Whether a 0-byte file is refused when another database beside it holds data
        #: (`refuse_emptied`); off for a caller that checked the directory before opening any.
        self.refuse_emptied = refuse_emptied
        self.hot_queue_max = hot_queue_max
        self.stats = StoreStats()
        self._lock = threading.Lock()
        #: Held by whichever thread is running a write on the read-write connection: the writer
        #: thread for a queued job, or a blocking caller running its own write (`write_blocking`).
        self._writing = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._conn: sqlite3.Connection | None = None
        self._readers_local = threading.local()
        self._reader_conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        #: Whether `read` runs on the awaiting (event loop) thread instead of a reader thread: set by
        #: a stdio server, whose one client's calls come one after another (see `read`).
        self.reads_on_loop = False
        #: Whether `write` runs a transaction that cannot wait on the awaiting (event loop)
        #: thread instead of handing it to the writer thread: set by a stdio server too (see
        #: `write`).
        self.writes_on_loop = False
        self._reads = 0  # reads in progress (`read_blocking`), which `close` waits for
        self._reads_idle = threading.Condition(threading.Lock())
        self._forked = False  # this process is a fork of the one that opened the store
        _OPEN.add(self)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=readers, thread_name_prefix=f"sqlite-read-{self.path.name}"
        )
        self._closed = False
        self._accepting = threading.Lock()  # `_closed` and queueing, together (`_enqueue`)
        self._drop_logged_at = 0
        self.report: OpenReport | None = None
        self._checkpointer: Checkpointer | None = None
        self._thread = threading.Thread(target=self._run, name=f"sqlite-writer-{self.path.name}", daemon=True)
        self._ready: concurrent.futures.Future[OpenReport] = concurrent.futures.Future()
        self._thread.start()

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(
        cls,
        path: Path,
        schema: Schema,
        migrations: list[Migration],
        *,
        hot_queue_max: int = 10_000,
        readers: int = 4,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        write_patience_s: float = WRITE_PATIENCE_S,
        read_only: bool = False,
        baseline: Migration | None = None,
        refuse_emptied: bool = True,
    ) -> SqliteStore:
        """Open `path`, creating or migrating it. With `read_only` (commands that only read, on a
        directory they cannot write: a snapshot, a read-only mount) nothing is written: the file
        must exist at the last version, every write is refused, and readers open it as
        `readonly.read_view` says."""
        store = cls(
            path,
            schema,
            migrations,
            hot_queue_max=hot_queue_max,
            readers=readers,
            busy_timeout_ms=busy_timeout_ms,
            write_patience_s=write_patience_s,
            read_only=read_only,
            baseline=baseline,
            refuse_emptied=refuse_emptied,
        )
        try:
            store.report = store._ready.result()
        except BaseException:
            store._thread.join(timeout=5)
            store._pool.shutdown(wait=False)
            raise
        if not read_only:
            store._checkpointer = Checkpointer(store.path)
        return store

    def _open_rw(self) -> tuple[sqlite3.Connection, OpenReport]:
        path = self.path
        spath = str(path)
        started = time.monotonic()
        self._check_writable(path)
        if path.is_dir():  # (an empty one can have a size of 0, which would read as "create it")
            raise StoreUnreadable(spath, "it is a directory, not a file")
        new = not (path.exists() and path.stat().st_size > 0)
        if new and path.exists() and self.refuse_emptied:
            refuse_emptied(path)
        _refuse_foreign_wal(path)
        if not new:
            seen = self._inspect(path, started)  # ours, whole, not too new: checked before anything writes
            if seen > len(self.migrations):
                raise SchemaTooNew(spath, seen, len(self.migrations))
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(spath, isolation_level=None, check_same_thread=False)
            # A value no other writer of the file produces, for rows that let a reader tell this
            # store's writes from another process's (`vectorstore`'s freshness stamps).
            conn.create_function("store_stamp", 0, self._stamp)
            conn.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
            self._enter_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT}")  # kit/checkpoint.py
            from_version, version = self._migrate(conn, started)
            names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            undeclared = self.schema.undeclared(names)
            for name in undeclared:
                _log.warning("store.undeclared_table", table=name, path=spath)
            pruned: dict[str, int] = {}
            for t in self.schema.pruned:
                self._begin(conn)
                try:
                    pruned[t.name] = self.schema.prune(conn, t.name)
                    conn.execute("COMMIT")
                except BaseException:
                    self._rollback(conn)
                    raise
            counts = {
                t.name: conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0]  # noqa: S608 - declared
                for t in self.schema.tables
                if t.kind is not Kind.DERIVED and t.name in names
            }
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise self._open_failure(exc, "creating it" if new else "opening it", started) from exc
            raise
        report = OpenReport(
            path=spath,
            from_version=from_version,
            to_version=version,
            created=from_version == 0,
            counts=counts,
            undeclared=undeclared,
            pruned=pruned,
        )
        return conn, report

    def _enter_wal(self, conn: sqlite3.Connection) -> None:
        """``PRAGMA journal_mode=WAL``, tried again while another process creating the same new
        file holds its lock. SQLite answers that "busy" at once, without waiting (its busy handler
        is skipped where waiting could deadlock), so the busy timeout does not cover it: one of
        several processes started together on an empty data directory failed to open it."""
        deadline = time.monotonic() + self.write_patience_s
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self, conn: sqlite3.Connection, started: float) -> tuple[int, int]:
        """Bring the file to the last version, one step per transaction: (the version this process
        found, the version it left). Several processes may open one new or old file at the same
        moment (a server and training loops started together): each step is chosen from the
        version read *under the write lock*, so a step never runs twice and the version never goes
        down — a process that planned its steps from a version read before the lock re-ran steps
        1-4 over a finished file, wrote version 4 over it, failed at step 5, and left a store no
        later start could open. A file already at the last version is opened without the lock."""
        spath = str(self.path)
        target = len(self.migrations)
        version = self._version(conn)
        found: int | None = None
        while version < target:
            doing = "creating it" if version == 0 else f"upgrading it from schema version {version} to {target}"
            waiting = time.monotonic()
            step_to = version + 1
            try:
                # Waits for the lock like any write: another process may be running a long step.
                self._begin(conn)
            except sqlite3.Error as exc:
                raise self._open_failure(exc, doing, waiting) from exc
            try:
                version = self._version(conn)  # what the processes that held the lock before left
                if found is None:
                    found = version
                if version >= target:
                    conn.execute("COMMIT")
                    break
                conn.execute(_META_DDL)
                if version == 0 and self.baseline is not None:
                    step, step_to = self.baseline, target  # a new file: the whole schema at once
                else:
                    step, step_to = self.migrations[version], version + 1
                step(conn)
                conn.execute(
                    "INSERT INTO store_meta(key, value) VALUES('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(step_to),),
                )
                conn.execute("COMMIT")
            except BaseException as exc:
                self._rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise self._open_failure(exc, doing, started, at=version) from exc
                if isinstance(exc, Exception) and not isinstance(exc, StorageError):
                    raise MigrationFailed(spath, version, step_to, _short(exc)) from exc
                raise
            version = step_to
        if version > target:  # a newer robot-mcp-memory upgraded it meanwhile
            raise SchemaTooNew(spath, version, target)
        return (version if found is None else found), version

    def _version(self, conn: sqlite3.Connection) -> int:
        """The file's schema version as `conn` sees it now (0: a new file)."""
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='store_meta'").fetchone() is None:
            return 0
        row = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
        return _parse_version(str(self.path), row)

    def _open_failure(self, exc: sqlite3.Error, doing: str, started: float, at: int | None = None) -> StorageError:
        """What an SQLite error while opening means for the operator. Only damage to the file gets
        `StoreUnreadable` (restore a backup, or move it aside): a lock another process held, a
        full disk or a read-only one leave a good file, and that advice would throw its data away.
        `started`: when the wait a "busy" ended began; `at`: the version a failed migration step
        started from (rolled back to)."""
        spath = str(self.path)
        code = getattr(exc, "sqlite_errorcode", None) or 0
        base = code & 0xFF
        if base in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return StoreBusy(spath, doing, time.monotonic() - started)
        if base == sqlite3.SQLITE_FULL or code in _WRITE_IOERRS:
            reason = (
                "the disk is full"
                if base == sqlite3.SQLITE_FULL
                else "the disk refused the write (it is full, a file-size limit was reached, or it is failing)"
            )
            return StoreWriteFailed(spath, doing, reason, self._room_hint())
        if base == sqlite3.SQLITE_READONLY:
            return StoreNotWritable(spath, "the disk or the file is read-only")
        if at is not None and base not in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return MigrationFailed(spath, at, at + 1, _short(exc))
        return StoreUnreadable(spath, _short(exc))

    def _room_hint(self) -> str:
        """How much room an upgrade wants: its steps rewrite rows, and the WAL holds the new pages
        until they are folded into the file (up to about the file's own size)."""
        try:
            mib = self.path.stat().st_size // (1024 * 1024)
        except OSError:
            return ""
        return f" (an upgrade needs about as much free space as {self.path.name} takes: {mib + 1} MiB)" if mib else ""

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """Roll back what is left of a failed transaction. SQLite has already rolled it back after
        some errors (a full disk): a ROLLBACK then fails with an error of its own ("no transaction
        is active"), which must not take the place of the one that says what happened."""
        if not conn.in_transaction:
            return
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            _log.error("store.rollback_failed", error=_short(exc), path=str(self.path))

    def _open_ro(self) -> OpenReport:
        """Open for reading only: nothing is created, migrated or pruned, so the file must exist at
        the last version (an older one is upgraded by the first process that can write it)."""
        path = self.path
        spath = str(path)
        started = time.monotonic()
        if path.is_dir():
            raise StoreUnreadable(spath, "it is a directory, not a file")
        if not path.exists() or path.stat().st_size == 0:
            raise StoreUnreadable(spath, "there is no database in it")
        _refuse_foreign_wal(path)
        self._view = read_view(path)
        version = self._inspect(path, started)
        target = len(self.migrations)
        if version > target:
            raise SchemaTooNew(spath, version, target)
        if version < target:
            raise StoreNotWritable(
                spath,
                f"it is at schema version {version}, and this robot-mcp-memory reads it only once "
                f"upgraded to {target}, which writes it: run it once where its directory is writable",
            )
        report = self.read_blocking(lambda conn: self._report(conn, version))
        _log.info("store.opened_read_only", path=spath, immutable=self._view.immutable)
        return report

    def _report(self, conn: sqlite3.Connection, version: int) -> OpenReport:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        counts = {
            t.name: conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0]  # noqa: S608 - declared
            for t in self.schema.tables
            if t.kind is not Kind.DERIVED and t.name in names
        }
        return OpenReport(str(self.path), version, version, False, counts, self.schema.undeclared(names), {})

    @staticmethod
    def _check_writable(path: Path) -> None:
        """Fail with `StoreNotWritable` before SQLite is involved when the directory (where the
        ``-wal`` and ``-shm`` files go) or the file cannot be written. Otherwise SQLite reports
        "unable to open database file", which reads as a broken database — and whose remedy,
        restoring a backup or starting empty, would be the wrong thing to do to a good file."""
        for folder in (path.parent, *path.parent.parents):
            if folder.exists() and not folder.is_dir():  # the data directory given is a file
                raise StoreNotWritable(str(path), f"{folder} is a file, not a directory")
        try:
            # Made here: only this user reads it (memories, lessons); one that exists is left as it is.
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreNotWritable(str(path), f"its directory cannot be created: {exc.strerror}") from exc
        # os.access honours read-only mounts and immutable files even for root (permission bits
        # do not stop root; those two do).
        if not os.access(path.parent, os.W_OK):
            raise StoreNotWritable(str(path), "its directory is read-only")
        if path.exists() and not os.access(path, os.W_OK):
            raise StoreNotWritable(str(path), "the file is read-only")

    def _inspect(self, path: Path, started: float) -> int:
        """Read-only look at an existing file: is it ours, is it whole, which version is it?"""
        spath = str(path)
        try:
            with path.open("rb") as fh:
                head = fh.read(16)
        except OSError as exc:
            raise StoreUnreadable(spath, f"it cannot be read: {exc.strerror or type(exc).__name__}") from exc
        if head != _SQLITE_MAGIC:
            raise StoreUnreadable(spath, "it is not an SQLite database")
        try:
            ro = sqlite3.connect(self._reader_uri(), uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._open_failure(exc, "opening it", started) from exc
        try:
            ro.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
            check = ro.execute("PRAGMA quick_check").fetchone()
            if not check or check[0] != "ok":
                raise StoreUnreadable(spath, "its integrity check failed")
            names = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "store_meta" not in names:
                if {n for n in names if not n.startswith("sqlite_")}:
                    raise StoreUnreadable(spath, "it belongs to another application (no store_meta table)")
                return 0
            row = ro.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
            return _parse_version(spath, row)
        except sqlite3.Error as exc:
            raise self._open_failure(exc, "opening it", started) from exc
        finally:
            ro.close()

    # ------------------------------------------------------------------ writer thread
    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            if self.read_only:
                report = self._open_ro()
            else:
                conn, report = self._open_rw()
        except BaseException as exc:
            self._ready.set_exception(exc)
            return
        self._conn = conn
        self._ready.set_result(report)
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            job: _Job
            future: _Future
            job, future = item
            # An accepted write commits even if its future was cancelled meanwhile (an awaiting
            # coroutine that gave up cancels it through `asyncio.wrap_future`): the caller cannot
            # tell how far a cancelled write got, so "accepted" has to mean "will commit".
            abandoned = not future.set_running_or_notify_cancel()
            failure: BaseException | None = None
            result: Any = None
            with self._writing:
                try:
                    if conn is None:
                        raise self._read_only_error()
                    result = self._execute(conn, job)
                except BaseException as exc:
                    failure = exc
                self._job_done(job)  # counted before the caller wakes, so stats agree with what it saw
                if failure is None:
                    self._committed(job)
            if abandoned:
                continue
            if failure is not None:
                future.set_exception(failure)
            else:
                future.set_result(result)
        if conn is not None:
            with self._writing:  # after a blocking caller's write in progress, if any
                self._close_writer(conn)

    def _committed(self, job: _Job) -> None:
        checkpointer = self._checkpointer
        if checkpointer is not None and job.transaction:
            checkpointer.committed()

    def _close_writer(self, conn: sqlite3.Connection) -> None:
        """Fold the WAL back into the main file, then close: a closed store is one file, so a
        backup made by copying ``index.db`` alone holds every committed write."""
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            _log.warning("store.checkpoint_failed", error=_short(exc), path=str(self.path))
        conn.close()

    def _execute(self, conn: sqlite3.Connection, job: _Job, *, begun: bool = False) -> Any:
        """Run `job` in its transaction (`begun`: the caller has begun it, `_write_now`)."""
        if not job.transaction:
            return job.context.run(job.fn, conn)
        try:
            if not begun:
                if conn.in_transaction:
                    # Left open by an interrupt that landed between a failure and its rollback (a
                    # second Ctrl-C in a blocking caller's own write): nothing of it was committed.
                    _log.warning("store.stale_transaction_rolled_back", path=str(self.path))
                    conn.execute("ROLLBACK")
                self._begin(conn)
            result = job.context.run(job.fn, conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback(conn)
            if isinstance(exc, sqlite3.Error):
                _log.error("store.write_failed", error=_short(exc), hot=job.hot)
                raise translate(exc, "the write") from exc
            raise
        if job.after is not None:
            try:
                job.context.run(job.after, result)
            except Exception:  # the write has committed: its caller gets its result all the same
                _log.exception("store.after_commit_failed", path=str(self.path))
        return result

    def _stamp(self) -> str:
        return f"{self.instance}:{next(self._stamps)}"

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, tried again while another connection holds the write lock, for up
        to `write_patience_s` in all (`WRITE_PATIENCE_S`); then the last "busy" is raised."""
        deadline = time.monotonic() + self.write_patience_s
        waits = 0
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
                waits += 1
                _log.warning("store.write_lock_busy", attempt=waits, path=str(self.path))
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))  # busy at once: no spin
                continue
            if waits:
                _log.info("store.write_lock_taken", attempts=waits + 1, path=str(self.path))
            return

    def _job_done(self, job: _Job) -> None:
        with self._lock:
            if job.hot:
                self.stats.hot_pending -= 1
                self.stats.hot_done += 1
            else:
                self.stats.writes_done += 1

    def _enqueue(self, job: _Job, future: _Future) -> None:
        """Queue `job` for the writer unless the store is closing: checked and queued under one
        lock, so no job can land behind the writer's stop and wait for it forever."""
        with self._accepting:
            if self._closed:
                raise self._closed_error()
            self._queue.put((job, future))

    def _submit(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        hot: bool = False,
        transaction: bool = True,
        after: Callable[[T], None] | None = None,
    ) -> concurrent.futures.Future[T]:
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._enqueue(_Job(fn, contextvars.copy_context(), hot, transaction, after), fut)
        return fut

    # ------------------------------------------------------------------ public API: writes
    def write_blocking(self, fn: Callable[[sqlite3.Connection], T], after: Callable[[T], None] | None = None) -> T:
        """Run a definition write in one transaction and wait for its commit; `after(result)`
        runs once it has committed, before any other write begins (see `_Job.after`).

        When the writer is idle the calling thread runs the transaction itself, on the same
        read-write connection and holding the same lock the writer holds for each job, so writes
        are serialised exactly as before. A write handed to the writer thread and back costs two
        thread wake-ups (waking an idle vCPU, a large share of a small write); a training loop
        calling ``learn`` one insight at a time would pay them on every call. When the
        writer is busy the job joins its queue as any other."""
        if not self._writing.locked():
            # `with`, not acquire() then try: a signal (Ctrl-C in a training loop) landing between
            # the two would leave the lock held and every later write queued behind it forever.
            # Should the writer take the lock first, this waits for its one job, then runs.
            with self._writing:
                conn = self._conn
                if self._closed:
                    raise self._closed_error()
                if conn is None:
                    raise self._read_only_error()
                return self._run_here(conn, fn, after)
        waiter = _Waiter()
        self._enqueue(_Job(fn, contextvars.copy_context(), hot=False, after=after), waiter)
        queued: T = waiter.result()
        return queued

    async def write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        after: Callable[[T], None] | None = None,
        *,
        long: bool = False,
    ) -> T:
        """Await a definition write; `after(result)` runs once it has committed, before any other
        write begins (see `_Job.after`). If the awaiting coroutine is cancelled the write still
        commits.

        With `writes_on_loop` (a stdio server) a write that cannot wait runs right here
        (`_write_now`): the hop to the writer thread and back costs two thread wake-ups on each
        side, a large share of a small learn over MCP stdio. One that would wait —
        for the writer's job or queue, or for another process's write lock — and a `long` one (a
        reindex, a deep check) go to the writer thread as always, so the loop meanwhile answers
        the client's other calls and a stop signal."""
        if self.writes_on_loop and not long:
            done = self._write_now(fn, after)
            if done is not None:
                result: T = done[0]
                return result
        fut = self._submit(fn, after=after)
        return await asyncio.shield(asyncio.wrap_future(fut))

    def _write_now(self, fn: Callable[[sqlite3.Connection], T], after: Callable[[T], None] | None) -> tuple[T] | None:
        """Run the write on this thread if it need not wait: the writer idle with nothing queued
        (the queue's order is kept) and the database's write lock free — ``BEGIN IMMEDIATE`` is
        tried once, without SQLite's busy wait. ``(result,)``, or None (nothing was run) when it
        would have had to wait or the store cannot take it now (closed, read-only: the queue's
        path says why)."""
        if not self._writing.acquire(blocking=False):
            return None
        try:
            conn = self._conn
            if self._closed or conn is None or conn.in_transaction or not self._queue.empty():
                return None
            if not self._begin_now(conn):
                return None
            return (self._run_here(conn, fn, after, begun=True),)
        finally:
            self._writing.release()

    def _run_here(
        self,
        conn: sqlite3.Connection,
        fn: Callable[[sqlite3.Connection], T],
        after: Callable[[T], None] | None,
        *,
        begun: bool = False,
    ) -> T:
        """A write run by its caller's thread, which holds `_writing` (`write_blocking`,
        `_write_now`), counted as the writer counts its jobs."""
        job = _Job(fn, contextvars.copy_context(), hot=False, after=after)
        try:
            result: T = self._execute(conn, job, begun=begun)
        finally:
            self._job_done(job)
        self._committed(job)
        return result

    def _begin_now(self, conn: sqlite3.Connection) -> bool:
        """``BEGIN IMMEDIATE`` if the write lock is free this instant; False, with nothing begun,
        when another connection holds it (or anything else went wrong: the writer's path will
        meet it again and report it)."""
        try:
            conn.execute("PRAGMA busy_timeout=0")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                conn.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
        except sqlite3.Error:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            return False
        return True

    def hot(self, fn: Callable[[sqlite3.Connection], T]) -> concurrent.futures.Future[T] | None:
        """Enqueue a hot record write without waiting. Returns None when the queue is full and
        the write was dropped (counted in `stats.hot_dropped` and logged)."""
        if self._closed:
            raise self._closed_error()
        with self._lock:
            if self.stats.hot_pending >= self.hot_queue_max:
                self.stats.hot_dropped += 1
                dropped = self.stats.hot_dropped
                log_now = dropped - self._drop_logged_at >= 100 or self._drop_logged_at == 0
                if log_now:
                    self._drop_logged_at = dropped
            else:
                self.stats.hot_pending += 1
                return self._submit(fn, hot=True)
        if log_now:
            _log.warning("store.hot_write_dropped", dropped_total=dropped, queue_max=self.hot_queue_max)
        return None

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until every write queued before this call has finished."""
        self._submit(lambda _c: None, transaction=False).result(timeout)

    def on_writer(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` on the writer thread outside a transaction (pragmas, tracing, checkpoints)."""
        return self._submit(fn, transaction=False).result()

    # ------------------------------------------------------------------ public API: reads
    def _reader(self) -> sqlite3.Connection:
        """This thread's read-only connection. Each thread that reads gets one (a training loop
        may read from many); those of threads that have ended are closed when a new one is made,
        so the open connections follow the live threads (each held ~2 file descriptors until
        `close`: a loop starting a thread per episode ran out of them)."""
        conn: sqlite3.Connection | None = getattr(self._readers_local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self._reader_uri(),
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute("PRAGMA query_only=1")
            conn.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
            self._readers_local.conn = conn
            with self._lock:
                ended = [(t, c) for t, c in self._reader_conns if not t.is_alive()]
                self._reader_conns = [(t, c) for t, c in self._reader_conns if t.is_alive()]
                self._reader_conns.append((threading.current_thread(), conn))
            for _t, old in ended:
                old.close()
        return conn

    def read_blocking(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` on this thread's read-only connection, in one read transaction (a snapshot).
        `close` waits for the reads in progress before it closes their connections."""
        with self._reads_idle:
            if self._closed:
                raise self._closed_error()
            self._reads += 1
        try:
            conn = self._reader()
            conn.execute("BEGIN")
            try:
                result = fn(conn)
            finally:
                conn.execute("COMMIT")
            if self._view is not None:
                self._view.check()  # read without locks: refused if another process changed the file
            return result
        except sqlite3.Error as exc:
            _log.error("store.read_failed", error=_short(exc))
            raise translate(exc, "the read") from exc
        finally:
            with self._reads_idle:
                self._reads -= 1
                if not self._reads:
                    self._reads_idle.notify_all()

    def _reader_uri(self) -> str:
        view = self._view
        return view.uri if view is not None else f"{self.path.resolve().as_uri()}?mode=ro"

    def _read_only_error(self) -> StorageError:
        return StoreFailed(
            f"{self.path.name} was opened read-only (its directory cannot be written): nothing can be stored"
        )

    def _closed_error(self) -> StorageError:
        if self._forked:
            return StorageError(
                "this database was opened before the process forked, and a connection cannot cross a "
                "fork: open a new RobotMemory in the child process (or start it with the 'spawn' method)"
            )
        return StoreFailed("the store is closed; the server is shutting down: retry once it has restarted")

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Await a read (`read_blocking`) run on a reader thread, so that the event loop serves
        other sessions meanwhile; with `reads_on_loop`, run it right here. A hop to a reader and
        back costs two thread wake-ups on each side, a noticeable share of a recall; a stdio
        server has one client, whose calls
        come one after another, so there is nothing for the loop to do meanwhile."""
        if self.reads_on_loop:
            return self.read_blocking(fn)
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        return await loop.run_in_executor(self._pool, ctx.run, self.read_blocking, fn)

    # ------------------------------------------------------------------ lifecycle
    def close(self, timeout: float = 10.0) -> None:
        """Drain the queue (every accepted write commits), stop the writer, close readers."""
        with self._accepting:
            if self._closed:
                return
            self._closed = True
        if self._forked:  # the threads and connections are the parent's: leave them alone
            return
        # Readers first: the writer's connection must be the last one open, or sqlite leaves the
        # WAL beside the file instead of checkpointing it (a read-only connection cannot).
        self._pool.shutdown(wait=True)
        with self._reads_idle:
            # A read another thread is running keeps its connection (closing it under the read
            # crashed the process); reads that start from now on are refused.
            reads_done = self._reads_idle.wait_for(lambda: not self._reads, timeout)
        if reads_done:
            with self._lock:
                for _thread, conn in self._reader_conns:
                    conn.close()
                self._reader_conns.clear()
        else:  # their connections stay open (closed when collected); the rest closes as usual
            _log.warning("store.reads_still_running", reads=self._reads, path=str(self.path))
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` is SQLite's "database is locked": another connection holds the lock."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_BUSY


def _parse_version(path: str, row: tuple[Any, ...] | None) -> int:
    """The ``schema_version`` row's value as a step count; a file without one is version 0."""
    try:
        version = int(row[0]) if row else 0
    except ValueError as exc:
        raise StoreUnreadable(path, "its schema version is not a number") from exc
    if version < 0:  # no migration leads from it: step indexes would count from the end
        raise StoreUnreadable(path, f"its schema version is negative ({version})")
    return version


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def refuse_emptied(path: Path) -> None:
    """Refuse a 0-byte `path` where data was expected: another database of the data directory
    holds data, and no ``-wal`` beside this one does (a new file's first pages may stand
    only there). A brand-new directory's empty file is created as ever; this one was emptied
    — an interrupted copy, a truncated restore — and opening it would start an empty store
    that robots then write into. Nothing is written to it."""
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return
    others = sorted(
        p.name
        for p in path.parent.glob("*.db")
        if p != path and p.is_file() and (p.stat().st_size > 0 or _size(p.with_name(p.name + "-wal")) > 0)
    )
    if others:
        raise StoreUnreadable(
            str(path),
            f"it is empty (0 bytes) while {', '.join(others)} beside it holds data, so its own data is "
            "missing (an interrupted copy or a truncated file?). To start it empty on purpose, delete it",
        )


def _refuse_foreign_wal(path: Path) -> None:
    """Raise `ForeignWal` when `path` is a copy made by ``backup`` and a non-empty ``-wal`` lies
    beside it. ``backup`` writes its copies in rollback-journal mode (header bytes 18-19 are 1)
    and a store it opens is switched to WAL for good (2), so a WAL holding frames beside a file
    in journal mode was written for another file: SQLite replays any WAL whose own checksums
    hold, onto whatever file it lies beside (a crashed server's state over the restored backup)."""
    if _size(path.with_name(path.name + "-wal")) == 0:
        return
    try:
        with path.open("rb") as f:
            header = f.read(20)
    except OSError:
        return  # SQLite's own open says what is wrong with the file
    if header.startswith(b"SQLite format 3\x00") and header[18:20] == b"\x01\x01":
        raise ForeignWal(str(path))


def _size(path: Path) -> int:
    """The size of `path` in bytes, 0 when there is no such file."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


__all__ = ["Migration", "OpenReport", "SqliteStore", "StoreStats", "now_iso", "translate"]
