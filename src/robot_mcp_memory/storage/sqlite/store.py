"""SqliteStore: reads and writes on one SQLite file — one writer thread, read-only readers (the
Datasette pattern). Opening the file (WAL, migrations, the checks that leave a bad file untouched,
read-only opening, the open report) is `opening`'s; this module runs the work once it is open.

- The only read-write connection is owned by one writer thread. Jobs arrive on a queue as
  ``(fn, future, context)`` and each runs in ``BEGIN IMMEDIATE … COMMIT`` (or ``ROLLBACK`` and the
  exception goes to the future). The caller's contextvars are copied so log fields survive the hop.
  A ``BEGIN IMMEDIATE`` that finds the lock held by another process is tried again for up to
  `WRITE_PATIENCE_S` (`transaction.begin`).
- One departure, for callers that block anyway (`write_blocking`: the Python API, worker
  threads): when the writer is idle, the caller runs its transaction itself — on the same
  connection, holding the same lock the writer holds for each job — instead of paying two thread
  wake-ups to hand it over and back. Transactions stay one at a time on one connection.
- **Definition writes** (`write`, `write_blocking`) are never dropped: the caller waits for the
  commit, so an acknowledged write is a committed one. A write whose awaiting coroutine is
  cancelled still commits: once accepted it is either already committed (run inline) or queued,
  and the writer runs a queued job whatever became of its future.
- **Hot record writes** (`hot`) are fire-and-forget from the caller's thread: bounded by
  `hot_queue_max`; beyond it they are dropped, counted and logged — a counter must never stall
  the event loop that serves the whole fleet. They always run on the writer thread.
- Readers use their own ``mode=ro`` connections (``PRAGMA query_only``), one per thread that
  reads; under WAL they never wait for the writer.

**Modes.** How the awaited calls (`read`, `write`) run is fixed when the store is opened
(`SqliteStore.open`'s `mode`, a `StoreMode`), and never changes after:

- `StoreMode.SERVER` — an event loop serving many sessions at once (the HTTP transports, ``web``).
  The awaiting thread never runs SQLite: an awaited `read` runs on a thread of the reader pool, an
  awaited `write` on the writer thread, so the loop serves the other sessions meanwhile.
- `StoreMode.BLOCKING` — one caller whose calls come one after another (the Python API, the CLI,
  a stdio server's one client): there is nothing for its thread to do meanwhile, and a hop to
  another thread and back costs two thread wake-ups each way (docs/experiences.md). An awaited
  `read` runs on the awaiting thread, on that thread's read-only connection (there is no reader
  pool). An awaited `write` runs there too when it need not wait: the writer idle with nothing
  queued, and ``BEGIN IMMEDIATE`` taking the database's write lock at once (`_write_now`). One
  that would wait — behind the writer's job or queue, or for another process's lock — and a
  `long` one (a reindex, a deep check) go to the writer thread and are awaited, so an event loop
  still answers its other calls and a stop signal meanwhile.

In both modes `read_blocking` and `write_blocking` run on the caller's thread (the latter when
the writer is idle, else it queues and waits), for threads that may block: worker threads,
start-up, the Python API; `on_writer` and `flush` wait for the writer thread.

**Order.** Transactions run one at a time on the read-write connection, under `_writing`, in
the order they took it. A job's `after` runs on the thread that ran its transaction, right after
the commit and before any other write begins, so an in-memory mirror patched there (the vector
index) sees the commits in order. The writer runs its queue — definition and hot writes alike —
in the order it was filled; an awaited write runs inline only when that queue is empty, so it
never overtakes a queued one. A `write_blocking` run inline takes the lock as soon as it is free
and may commit before jobs other threads queued but the writer has not begun; a caller's own
hot writes are not ordered with its definition writes.

``read_only=True`` opens without the writer connection (commands that only read, in a directory
they cannot write: see `readonly`): every write is refused. A store opened before a fork refuses
every call in the child (`_after_fork`); `close` drains the queue (every accepted write commits).

No `sqlite3.Error` escapes this module: it is translated into `StorageError` at the boundary.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import enum
import itertools
import os
import queue
import secrets
import sqlite3
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from robot_mcp_memory import logs
from robot_mcp_memory.errors import CHECK_THE_STORE, StorageError, StoreFailed
from robot_mcp_memory.storage.clock import now_iso
from robot_mcp_memory.storage.sqlite.checkpoint import Checkpointer
from robot_mcp_memory.storage.sqlite.kinds import Schema
from robot_mcp_memory.storage.sqlite.opening import Migration, Opener, OpenReport
from robot_mcp_memory.storage.sqlite.readonly import ReadView
from robot_mcp_memory.storage.sqlite.transaction import (
    BUSY_TIMEOUT_MS,
    WRITE_IOERRS,
    WRITE_PATIENCE_S,
    begin,
    rollback,
    short,
)

T = TypeVar("T")

_log = logs.get("robot_mcp_memory.processes.sqlite.store")


class StoreMode(enum.Enum):
    """How a store runs its awaited calls, fixed at `SqliteStore.open` (see the module docstring)."""

    #: Many sessions on one event loop: an awaited call never runs SQLite on the awaiting thread.
    SERVER = "server"
    #: One caller at a time: an awaited call runs on the awaiting thread unless it would wait.
    BLOCKING = "blocking"


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


def translate(exc: sqlite3.Error, action: str) -> StoreFailed:
    """Map an sqlite error to a reader-facing `StorageError` (no SQL, no path)."""
    code = getattr(exc, "sqlite_errorcode", None)
    base = None if code is None else code & 0xFF
    if base == sqlite3.SQLITE_FULL:
        return StoreFailed(
            f"the disk is full: {action} was not stored. Reads still work; "
            "retry once the operator has freed space on the server."
        )
    if code in WRITE_IOERRS:
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
    """One SQLite file with one writer thread, in one `StoreMode`. Build it with `SqliteStore.open`."""

    def __init__(
        self,
        path: Path,
        schema: Schema,
        migrations: list[Migration],
        *,
        mode: StoreMode = StoreMode.SERVER,
        hot_queue_max: int = 10_000,
        readers: int = 4,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        write_patience_s: float = WRITE_PATIENCE_S,
        read_only: bool = False,
        baseline: Migration | None = None,
        refuse_emptied: bool = True,
    ) -> None:
        self.path = Path(path)
        self._mode = mode
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
        self._opener = Opener(
            self.path,
            schema,
            list(migrations),
            busy_timeout_ms,
            write_patience_s,
            baseline=baseline,
            refuse_emptied=refuse_emptied,
        )
        self.hot_queue_max = hot_queue_max
        self.stats = StoreStats()
        self._lock = threading.Lock()
        #: Held by whichever thread is running a write on the read-write connection: the writer
        #: thread for a queued job, or a caller running its own write (`write_blocking`, `_write_now`).
        self._writing = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._conn: sqlite3.Connection | None = None
        self._readers_local = threading.local()
        self._reader_conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._reads = 0  # reads in progress (`read_blocking`), which `close` waits for
        self._reads_idle = threading.Condition(threading.Lock())
        self._forked = False  # this process is a fork of the one that opened the store
        _OPEN.add(self)
        #: The threads an awaited `read` runs on: only a server's (a blocking store reads inline).
        self._pool = (
            concurrent.futures.ThreadPoolExecutor(
                max_workers=readers, thread_name_prefix=f"sqlite-read-{self.path.name}"
            )
            if mode is StoreMode.SERVER
            else None
        )
        self._closed = False
        self._accepting = threading.Lock()  # `_closed` and queueing, together (`_enqueue`)
        self._drop_logged_at = 0
        self.report: OpenReport | None = None
        self._checkpointer: Checkpointer | None = None
        self._thread = threading.Thread(target=self._run, name=f"sqlite-writer-{self.path.name}", daemon=True)
        self._ready: concurrent.futures.Future[OpenReport] = concurrent.futures.Future()
        self._thread.start()

    @property
    def mode(self) -> StoreMode:
        """How awaited calls run (`StoreMode`): chosen at `open`, read-only after."""
        return self._mode

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(
        cls,
        path: Path,
        schema: Schema,
        migrations: list[Migration],
        *,
        mode: StoreMode = StoreMode.SERVER,
        hot_queue_max: int = 10_000,
        readers: int = 4,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        write_patience_s: float = WRITE_PATIENCE_S,
        read_only: bool = False,
        baseline: Migration | None = None,
        refuse_emptied: bool = True,
    ) -> SqliteStore:
        """Open `path`, creating or migrating it (`opening.Opener`), in `mode` (`StoreMode`: a
        server of many sessions, or one blocking caller). With `read_only` (commands that only
        read, on a directory they cannot write: a snapshot, a read-only mount) nothing is
        written: the file must exist at the last version, every write is refused, and readers
        open it as `readonly.read_view` says. `readers`: the size of a server's reader pool."""
        store = cls(
            path,
            schema,
            migrations,
            mode=mode,
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
            if store._pool is not None:
                store._pool.shutdown(wait=False)
            raise
        if not read_only:
            store._checkpointer = Checkpointer(store.path)
        return store

    def _open_ro(self) -> OpenReport:
        """Open for reading only (`Opener.read_only`); the report is read as any read is."""
        view, version = self._opener.read_only()
        self._view = view
        report = self.read_blocking(lambda conn: self._opener.report(conn, version))
        _log.info("store.opened_read_only", path=str(self.path), immutable=view.immutable)
        return report

    # ------------------------------------------------------------------ writer thread
    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            if self.read_only:
                report = self._open_ro()
            else:
                conn, report = self._opener.read_write(self._stamp)
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
            _log.warning("store.checkpoint_failed", error=short(exc), path=str(self.path))
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
                begin(conn, self.write_patience_s, self.path)
            result = job.context.run(job.fn, conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            rollback(conn, self.path)
            if isinstance(exc, sqlite3.Error):
                _log.error("store.write_failed", error=short(exc), hot=job.hot)
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

        A server's write runs on the writer thread. A blocking store runs one that need not wait
        right here (`_write_now`), saving the hop to the writer thread and back; one that would
        wait — for the writer's job or queue, or for another process's write lock — and a `long`
        one (a reindex, a deep check) go to the writer thread as a server's do, so an event loop
        meanwhile answers its other calls and a stop signal."""
        if self._mode is StoreMode.BLOCKING and not long:
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
            _log.error("store.read_failed", error=short(exc))
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
        """Await a read (`read_blocking`). A server runs it on a reader thread, so that the event
        loop serves other sessions meanwhile; a blocking store runs it right here, on the
        awaiting thread's own read-only connection: its one caller's calls come one after
        another, so there is nothing to do meanwhile that would pay for two thread hops."""
        pool = self._pool
        if pool is None:
            return self.read_blocking(fn)
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        return await loop.run_in_executor(pool, ctx.run, self.read_blocking, fn)

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
        if self._pool is not None:
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


__all__ = ["Migration", "OpenReport", "SqliteStore", "StoreMode", "StoreStats", "now_iso", "translate"]
