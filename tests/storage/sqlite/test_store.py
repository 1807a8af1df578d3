"""SqliteStore: the writer thread, the hot queue, read-only readers and the versioned open.

Threading is asserted on SQLite's own statement trace (``set_trace_callback`` installed on the
writer's connection), which records the thread each statement really ran on. Waits are bounded
`threading.Event` waits, never sleeps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from robot_mcp_memory.errors import (
    InvalidInput,
    MigrationFailed,
    SchemaTooNew,
    StorageError,
    StoreNotWritable,
    StoreUnreadable,
)
from robot_mcp_memory.storage.sqlite import Kind, Migration, Schema, SqliteStore, Table
from robot_mcp_memory.storage.sqlite.checkpoint import COMMITS_PER_CHECKPOINT
from robot_mcp_memory.storage.sqlite.store import translate
from tests.conftest import eventually

WAIT = 10.0  # upper bound for any cross-thread wait; a passing test never gets near it

STORE_META = Table(
    "store_meta", Kind.DEFINITION, ("CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT)",)
)
NOTES = Table("notes", Kind.DEFINITION, ("CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY, text TEXT)",))
COUNTERS = Table(
    "counters", Kind.RECORD, ("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL)",)
)
SCHEMA = Schema((STORE_META, NOTES, COUNTERS))


def _create_tables(conn: sqlite3.Connection) -> None:
    for t in (NOTES, COUNTERS):
        for stmt in t.ddl:
            conn.execute(stmt)
    conn.execute("INSERT INTO counters(name, n) VALUES ('x', 0)")


MIGRATIONS: list[Migration] = [_create_tables]


def open_store(path: Path, *, hot_queue_max: int = 100) -> SqliteStore:
    return SqliteStore.open(path, SCHEMA, MIGRATIONS, hot_queue_max=hot_queue_max, readers=2)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_store(tmp_path / "index.db", hot_queue_max=3)
    yield s
    s.close()


Trace = list[tuple[int, str]]


@pytest.fixture
def trace(store: SqliteStore) -> Trace:
    """Every statement the writer's connection executes, with the thread it ran on."""
    seen: Trace = []
    store.on_writer(lambda c: c.set_trace_callback(lambda sql: seen.append((threading.get_ident(), sql))))
    return seen


@contextmanager
def writer_blocked(store: SqliteStore) -> Iterator[int]:
    """Hold the writer thread inside a job until the block exits; yields the writer's thread id."""
    started, release = threading.Event(), threading.Event()
    ident: list[int] = []

    def hold(_conn: sqlite3.Connection) -> None:
        ident.append(threading.get_ident())
        started.set()
        release.wait(WAIT)

    holder = threading.Thread(target=store.on_writer, args=(hold,))
    holder.start()
    try:
        assert started.wait(WAIT), "the writer thread never picked up the blocking job"
        yield ident[0]
    finally:
        release.set()
        holder.join(WAIT)


def bump(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE counters SET n = n + 1 WHERE name = 'x'")


def counter(store: SqliteStore) -> int:
    n: int = store.read_blocking(lambda c: c.execute("SELECT n FROM counters WHERE name = 'x'").fetchone()[0])
    return n


def notes(store: SqliteStore) -> list[str]:
    return store.read_blocking(lambda c: [r[0] for r in c.execute("SELECT id FROM notes ORDER BY id")])


def insert_note(pid: str) -> Callable[[sqlite3.Connection], None]:
    def write(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO notes(id, text) VALUES (?, 'hello')", (pid,))

    return write


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ran(trace: Trace, prefix: str) -> list[int]:
    """The threads that ran statements starting with `prefix`, in order."""
    return [ident for ident, sql in trace if sql.lstrip().startswith(prefix)]


# ---------------------------------------------------------------------------- hot and definition writes
def test_a_hot_counter_write_runs_on_the_writer_thread_after_hot_has_returned(store: SqliteStore, trace: Trace) -> None:
    with writer_blocked(store) as writer:
        fut = store.hot(bump)
        assert fut is not None
        assert ran(trace, "UPDATE counters") == [], "hot() returned before its statement executed"
        assert not fut.done()
    fut.result(WAIT)

    assert ran(trace, "UPDATE counters") == [writer]
    assert writer != threading.get_ident()
    assert counter(store) == 1


def test_a_definition_write_has_committed_when_write_blocking_returns(store: SqliteStore, trace: Trace) -> None:
    store.write_blocking(insert_note("a"))

    statements = [sql for _, sql in trace]
    insert_at = next(i for i, sql in enumerate(statements) if sql.startswith("INSERT INTO notes"))
    assert "COMMIT" in statements[insert_at:]
    assert notes(store) == ["a"], "a fresh reader already sees it"


async def test_an_awaited_definition_write_has_committed_when_it_returns(store: SqliteStore, trace: Trace) -> None:
    await store.write(insert_note("b"))

    assert "COMMIT" in [sql for _, sql in trace][-2:]
    assert await store.read(lambda c: c.execute("SELECT count(*) FROM notes").fetchone()[0]) == 1


# ---------------------------------------------------------------------------- blocking writes run by their caller
def test_a_blocking_write_runs_on_the_calling_thread_when_the_writer_is_idle(store: SqliteStore, trace: Trace) -> None:
    store.write_blocking(insert_note("inline"))

    me = threading.get_ident()
    assert ran(trace, "BEGIN IMMEDIATE")[-1:] == [me]
    assert ran(trace, "INSERT INTO notes") == [me]
    assert ran(trace, "COMMIT")[-1:] == [me]
    assert notes(store) == ["inline"]
    assert store.stats.writes_done >= 1


def test_a_blocking_write_while_the_writer_is_busy_waits_its_turn_and_runs_on_the_writer(
    store: SqliteStore, trace: Trace
) -> None:
    done = threading.Event()

    def write() -> None:
        store.write_blocking(insert_note("queued"))
        done.set()

    caller = threading.Thread(target=write)
    with writer_blocked(store) as writer:
        caller.start()
        # It must not run beside the writer's job on the one connection: it queues behind it.
        assert not done.wait(0.3), "a blocking write ran while the writer was inside a job"
        assert ran(trace, "INSERT INTO notes") == []
    caller.join(WAIT)

    assert done.is_set()
    assert ran(trace, "INSERT INTO notes") == [writer]
    assert notes(store) == ["queued"]


def test_after_runs_once_committed_and_before_the_next_write_on_either_path(store: SqliteStore) -> None:
    """`after(result)` sees the commit and finishes before any other write begins — inline and
    queued behind a busy writer alike — and its failure does not fail the committed write."""
    events: list[str] = []

    def slow_after(pid: str) -> Callable[[None], None]:
        def after(_result: None) -> None:
            events.append(f"after {pid}: {notes(store)}")
            time.sleep(0.05)
            events.append(f"after {pid} done")

        return after

    def logged(pid: str) -> Callable[[sqlite3.Connection], None]:
        def write(conn: sqlite3.Connection) -> None:
            events.append(f"write {pid}")
            insert_note(pid)(conn)

        return write

    threads = [threading.Thread(target=store.write_blocking, args=(logged(p), slow_after(p))) for p in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert len(events) == 9
    for i in range(0, 9, 3):  # write, its after, its end: never interleaved with another write
        pid = events[i].removeprefix("write ")
        assert events[i + 1].startswith(f"after {pid}: ")
        assert f"'{pid}'" in events[i + 1].removeprefix(f"after {pid}: ")  # it saw its own commit
        assert events[i + 2] == f"after {pid} done"

    def broken(_result: None) -> None:
        raise RuntimeError("a cache patch failed")

    returned: list[str] = []

    def write_queued() -> None:
        store.write_blocking(insert_note("queued"), broken)
        returned.append("queued")

    with writer_blocked(store):
        queued = threading.Thread(target=write_queued)
        queued.start()
    queued.join(WAIT)
    store.write_blocking(insert_note("inline"), broken)
    assert returned == ["queued"]
    assert notes(store) == ["a", "b", "c", "inline", "queued"]


def test_writes_from_many_threads_and_the_event_loop_all_commit_one_at_a_time(store: SqliteStore) -> None:
    """Blocking callers on several threads (each running its own write whenever the writer is
    idle), awaited writes and hot writes, all at once: every write commits exactly once, none
    sees "database is locked", and no two transactions ever overlap on the connection."""
    inside = threading.Lock()
    overlaps: list[int] = []
    ran_on: set[int] = set()

    def guarded_bump(conn: sqlite3.Connection) -> None:
        ran_on.add(threading.get_ident())
        if not inside.acquire(blocking=False):
            overlaps.append(threading.get_ident())
            return
        try:
            bump(conn)
        finally:
            inside.release()

    per_thread, threads = 150, 4

    def blocking_writer() -> None:
        for _ in range(per_thread):
            store.write_blocking(guarded_bump)

    async def awaited() -> None:
        for _ in range(per_thread):
            await store.write(guarded_bump)

    workers = [threading.Thread(target=blocking_writer) for _ in range(threads)]
    for w in workers:
        w.start()
    asyncio.run(awaited())
    hot = [store.hot(guarded_bump) for _ in range(2)]
    for w in workers:
        w.join(WAIT * 3)
    store.flush(WAIT)

    accepted_hot = sum(f is not None for f in hot)
    assert overlaps == []
    assert counter(store) == per_thread * (threads + 1) + accepted_hot
    assert store.stats.writes_done == per_thread * (threads + 1) + 1  # + the flush
    assert ran_on & {w.ident for w in workers}, "no blocking write ran on its caller's thread"
    assert ran_on - {w.ident for w in workers}, "nothing ran on the writer thread"


def test_ctrl_c_during_blocking_writes_never_leaves_the_store_stuck(tmp_path: Path) -> None:
    """A training loop writing from the main thread while Ctrl-C arrives: wherever the
    KeyboardInterrupt lands (taking the write lock included), the store keeps working — no lock
    left held, no transaction left open, later writes from any thread commit, and close drains.
    Interrupts come from a fast interval timer, so they land at many different points."""
    s = open_store(tmp_path / "index.db")
    armed = False

    def interrupt(_signum: int, _frame: object) -> None:
        nonlocal armed
        if armed:
            armed = False
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    interrupted = 0
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                armed = True
                s.write_blocking(bump)
                armed = False
            except KeyboardInterrupt:
                interrupted += 1
                assert not s._writing.locked(), "an interrupt left the write lock held"
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
    try:
        assert interrupted > 0, "no interrupt landed: the test proved nothing"
        other = concurrent.futures.ThreadPoolExecutor(1)
        other.submit(s.write_blocking, insert_note("after")).result(WAIT)
        other.shutdown()
        assert notes(s) == ["after"]
    finally:
        closer = threading.Thread(target=s.close, kwargs={"timeout": WAIT}, daemon=True)
        closer.start()
        closer.join(WAIT * 2)
    assert not closer.is_alive(), "close hung: an interrupt left a lock of the store's threads held"
    assert not s._thread.is_alive(), "the writer never stopped: a job was stuck behind a held lock"


def test_closing_waits_for_a_blocking_write_in_progress_and_keeps_it(tmp_path: Path) -> None:
    s = open_store(tmp_path / "index.db")
    started, release = threading.Event(), threading.Event()

    def slow(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO notes(id, text) VALUES ('in-flight', 'x')")
        started.set()
        release.wait(WAIT)

    caller = threading.Thread(target=s.write_blocking, args=(slow,))
    caller.start()
    assert started.wait(WAIT)
    closer = threading.Thread(target=s.close)
    closer.start()
    assert eventually(lambda: s._closed, WAIT)
    with pytest.raises(StorageError):
        s.write_blocking(insert_note("after-close"))  # refused: the store is closing
    closer.join(0.3)
    assert closer.is_alive(), "the store closed under a write in progress"
    release.set()
    caller.join(WAIT)
    closer.join(WAIT)

    assert not closer.is_alive()
    with open_store(tmp_path / "index.db") as again:
        assert notes(again) == ["in-flight"]


def test_the_hot_queue_is_bounded_and_counts_what_it_drops(store: SqliteStore) -> None:
    assert store.hot_queue_max == 3
    with concurrent.futures.ThreadPoolExecutor(1) as pool, writer_blocked(store):
        accepted = [store.hot(bump) for _ in range(3)]
        dropped = store.hot(bump)
        definition = pool.submit(store.write_blocking, insert_note("never-dropped"))
        assert all(f is not None for f in accepted)
        assert dropped is None
        assert store.stats.hot_dropped == 1
    definition.result(WAIT)
    for f in accepted:
        assert f is not None
        f.result(WAIT)

    assert counter(store) == 3
    assert notes(store) == ["never-dropped"]
    assert store.stats.hot_pending == 0
    assert store.stats.hot_done == 3


def test_hot_accepts_again_once_the_queue_drains(store: SqliteStore) -> None:
    with writer_blocked(store):
        for _ in range(4):
            store.hot(bump)
    store.flush(WAIT)
    fut = store.hot(bump)
    assert fut is not None
    fut.result(WAIT)
    assert counter(store) == 4
    assert store.stats.hot_dropped == 1


# ---------------------------------------------------------------------------- failures and cancellation
def test_a_failing_write_rolls_back_and_raises_storage_error_not_sqlite_error(store: SqliteStore) -> None:
    def half_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO notes(id, text) VALUES ('partial', 'x')")
        conn.execute("INSERT INTO notes(id, text) VALUES ('partial', 'duplicate key')")

    with pytest.raises(StorageError) as caught:
        store.write_blocking(half_then_fail)

    assert caught.value.code == "storage"
    assert not isinstance(caught.value, sqlite3.Error)
    assert notes(store) == []


def test_a_write_that_raises_our_own_error_rolls_back_and_passes_it_through(store: SqliteStore) -> None:
    def refuse(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO notes(id, text) VALUES ('partial', 'x')")
        raise InvalidInput("no")

    with pytest.raises(InvalidInput):
        store.write_blocking(refuse)
    assert notes(store) == []
    store.write_blocking(insert_note("after"))  # the writer is still healthy
    assert notes(store) == ["after"]


def test_a_failing_hot_write_rolls_back_and_reports_storage_error_on_its_future(store: SqliteStore) -> None:
    def bump_then_fail(conn: sqlite3.Connection) -> None:
        bump(conn)
        conn.execute("INSERT INTO counters(name, n) VALUES ('x', 1)")

    fut = store.hot(bump_then_fail)
    assert fut is not None
    with pytest.raises(StorageError):
        fut.result(WAIT)
    assert counter(store) == 0


async def test_a_write_whose_awaiting_coroutine_is_cancelled_still_commits(store: SqliteStore) -> None:
    with writer_blocked(store):
        task = asyncio.create_task(store.write(insert_note("cancelled-caller")))
        await anyio.wait_all_tasks_blocked()  # the write is queued behind the blocked writer
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    store.flush(WAIT)
    assert notes(store) == ["cancelled-caller"]


def test_a_hot_write_whose_future_is_cancelled_still_commits(store: SqliteStore) -> None:
    with writer_blocked(store):
        fut = store.hot(bump)
        assert fut is not None
        assert fut.cancel(), "still queued, so the caller could cancel its future"
    store.flush(WAIT)
    assert counter(store) == 1
    assert store.stats.hot_pending == 0


def test_a_closed_store_refuses_writes_with_storage_error(tmp_path: Path) -> None:
    s = open_store(tmp_path / "index.db")
    s.close()
    with pytest.raises(StorageError):
        s.write_blocking(insert_note("late"))
    with pytest.raises(StorageError):
        s.hot(bump)
    assert s.stats.hot_pending == 0


# ---------------------------------------------------------------------------- another process holding the write lock
@contextmanager
def lock_held_elsewhere(path: Path) -> Iterator[Callable[[], None]]:
    """Another connection (as another process would) holds SQLite's write lock on `path` until the
    yielded release is called (or the block exits)."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO notes(id, text) VALUES ('theirs', 'held')")

    def release() -> None:
        if other.in_transaction:
            other.execute("COMMIT")

    try:
        yield release
    finally:
        release()
        other.close()


def test_a_write_waits_past_one_busy_timeout_for_a_lock_another_process_holds_and_commits(tmp_path: Path) -> None:
    """SQLite's busy handler polls: a waiter can sleep through every short gap in another
    process's stream of batches and, after one busy timeout, its write failed. The store tries
    `BEGIN IMMEDIATE` again until its patience runs out; nothing of the write has run before."""
    path = tmp_path / "index.db"
    with SqliteStore.open(path, SCHEMA, MIGRATIONS, busy_timeout_ms=20, write_patience_s=WAIT) as s:
        begins: list[str] = []
        s.on_writer(lambda c: c.set_trace_callback(lambda sql: begins.append(sql) if "IMMEDIATE" in sql else None))
        with lock_held_elsewhere(path) as release, concurrent.futures.ThreadPoolExecutor(1) as pool:
            done = pool.submit(s.write_blocking, insert_note("ours"))
            assert eventually(lambda: len(begins) >= 3), "the write never tried again"
            assert not done.done(), "the write gave up while the lock was held"
            release()
            done.result(WAIT)
        assert notes(s) == ["ours", "theirs"]


def test_a_write_whose_patience_runs_out_is_refused_as_busy_and_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with SqliteStore.open(path, SCHEMA, MIGRATIONS, busy_timeout_ms=20, write_patience_s=0.2) as s:
        with lock_held_elsewhere(path), pytest.raises(StorageError, match=r"busy.*Retry"):
            s.write_blocking(insert_note("ours"))
        assert notes(s) == ["theirs"]
        s.write_blocking(insert_note("later"))  # the connection is usable again
        assert notes(s) == ["later", "theirs"]


# ---------------------------------------------------------------------------- readers
def test_readers_are_read_only(store: SqliteStore) -> None:
    with pytest.raises(StorageError) as caught:
        store.read_blocking(lambda c: c.execute("INSERT INTO notes(id, text) VALUES ('r', 'x')"))
    assert caught.value.code == "storage"
    assert notes(store) == []


def test_an_awaited_read_runs_on_a_reader_thread_or_with_reads_on_loop_on_the_loops_own(store: SqliteStore) -> None:
    """The HTTP server keeps its event loop free for other sessions while SQLite works; a stdio
    server (one client) saves the two thread hops. Either way the read sees committed writes."""
    store.write_blocking(insert_note("seen"))

    async def where() -> tuple[int, int, list[str]]:
        got = await store.read(lambda c: (threading.get_ident(), [r[0] for r in c.execute("SELECT id FROM notes")]))
        return threading.get_ident(), got[0], got[1]

    loop_thread, read_thread, seen = asyncio.run(where())
    assert read_thread != loop_thread
    assert seen == ["seen"]
    store.reads_on_loop = True
    loop_thread, read_thread, seen = asyncio.run(where())
    assert read_thread == loop_thread
    assert seen == ["seen"]


def _noting(pid: str, ran: list[tuple[str, int]]) -> Callable[[sqlite3.Connection], int]:
    """A write of note `pid` that records on which thread it ran and returns that thread."""

    def run(conn: sqlite3.Connection) -> int:
        insert_note(pid)(conn)
        ran.append(("write", threading.get_ident()))
        return threading.get_ident()

    return run


def test_an_awaited_write_runs_on_the_writer_thread_or_with_writes_on_loop_on_the_loops_own(
    store: SqliteStore,
) -> None:
    """The HTTP server hands writes to the writer thread; a stdio server (one client) runs one
    that need not wait on the event loop's thread, saving two thread hops — its `after` too,
    right after the commit. A `long` write (a reindex) always goes to the writer thread."""
    ran: list[tuple[str, int]] = []

    async def where(pid: str, long: bool = False) -> tuple[int, int]:
        after = lambda _r: ran.append(("after", threading.get_ident()))  # noqa: E731
        return threading.get_ident(), await store.write(_noting(pid, ran), after, long=long)

    loop_thread, write_thread = asyncio.run(where("a"))
    assert write_thread != loop_thread
    store.writes_on_loop = True
    loop_thread, write_thread = asyncio.run(where("b"))
    assert write_thread == loop_thread
    assert ran[-2:] == [("write", loop_thread), ("after", loop_thread)]
    loop_thread, write_thread = asyncio.run(where("c", long=True))
    assert write_thread != loop_thread
    assert notes(store) == ["a", "b", "c"]


def _loop_serves_while_the_write_waits(
    store: SqliteStore, wait: Callable[[], Any], release: Callable[[], object]
) -> None:
    """Inside `wait` (a context in which a write must wait), a stdio server's awaited write waits
    off the event loop: another task on the loop runs while it is pending. After `release` it
    commits, its `after` with it."""
    served, finished = threading.Event(), threading.Event()
    outcome: list[Any] = []

    async def client() -> None:
        after = lambda _r: outcome.append("after")  # noqa: E731
        write = asyncio.ensure_future(store.write(insert_note("late"), after))
        await asyncio.sleep(0.01)  # another call the loop serves meanwhile
        outcome.append(write.done())
        served.set()
        await write
        finished.set()

    store.writes_on_loop = True
    with wait():
        loop = threading.Thread(target=lambda: asyncio.run(client()))
        loop.start()
        assert served.wait(WAIT), "the event loop was held by the waiting write"
        assert outcome == [False]  # still waiting
        release()
    loop.join(WAIT)
    assert finished.is_set()
    assert outcome == [False, "after"]
    assert notes(store) == ["late"]


def test_a_stdio_write_behind_a_busy_writer_waits_off_the_event_loop(store: SqliteStore) -> None:
    _loop_serves_while_the_write_waits(store, lambda: writer_blocked(store), lambda: None)


def test_a_stdio_write_facing_another_processs_write_lock_waits_off_the_event_loop(store: SqliteStore) -> None:
    """Another process (a training loop's `RobotMemory`, a CLI command) holds index.db's write
    lock: the write waits on the writer thread (its patience), not on the loop — not even for
    SQLite's busy wait, here made longer than this test waits for the loop."""
    store.busy_timeout_ms = 60_000
    store.on_writer(lambda c: c.execute("PRAGMA busy_timeout=60000"))
    other = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)

    @contextmanager
    def locked() -> Iterator[None]:
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            if other.in_transaction:
                other.execute("ROLLBACK")

    try:
        _loop_serves_while_the_write_waits(store, locked, lambda: other.execute("ROLLBACK"))
    finally:
        other.close()


def test_a_reader_is_not_blocked_by_a_busy_writer(store: SqliteStore) -> None:
    store.write_blocking(insert_note("visible"))
    with writer_blocked(store):
        assert notes(store) == ["visible"]


def test_a_closed_store_is_one_file_holding_every_committed_write(tmp_path: Path) -> None:
    """Backup is one file copy: closing folds the WAL into the main file."""
    s = open_store(tmp_path / "index.db")
    s.write_blocking(insert_note("kept"))
    assert notes(s) == ["kept"]  # a reader connection is open while the store closes
    s.close()

    backup = tmp_path / "backup" / "index.db"
    backup.parent.mkdir()
    shutil.copy(tmp_path / "index.db", backup)
    with open_store(backup) as copy:
        assert notes(copy) == ["kept"]


def test_commits_reach_the_main_file_by_a_background_checkpoint_not_the_writer(tmp_path: Path) -> None:
    """The writer's own autocheckpoint is far away (10,000 pages); the checkpointer thread copies
    the WAL into index.db every COMMITS_PER_CHECKPOINT commits, so the file alone holds them."""
    s = open_store(tmp_path / "index.db")
    try:
        checkpointer = s._checkpointer
        assert checkpointer is not None
        before = checkpointer.runs
        for i in range(COMMITS_PER_CHECKPOINT):
            s.write_blocking(insert_note(f"n{i:02}"))
        assert eventually(lambda: checkpointer.runs > before, WAIT)
        assert eventually(lambda: _notes_in_main_file(tmp_path) == COMMITS_PER_CHECKPOINT, WAIT)
        assert checkpointer.failures == 0
    finally:
        s.close()


def _notes_in_main_file(tmp_path: Path) -> int:
    """How many notes index.db holds on its own (copied without its -wal and -shm)."""
    alone = tmp_path / "alone"
    alone.mkdir(exist_ok=True)
    shutil.copy(tmp_path / "index.db", alone / "index.db")
    conn = sqlite3.connect(alone / "index.db")
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        return int(conn.execute("SELECT count(*) FROM notes").fetchone()[0]) if "notes" in names else 0
    finally:
        conn.close()


def test_the_checkpointer_connection_cannot_change_a_row(tmp_path: Path) -> None:
    from robot_mcp_memory.storage.sqlite.checkpoint import Checkpointer

    s = open_store(tmp_path / "index.db")
    s.close()
    cp = Checkpointer(tmp_path / "index.db")
    try:
        conn = cp._connect()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("INSERT INTO notes(id, text) VALUES ('sneaky', 'x')")
        conn.close()
    finally:
        cp.stop()


@contextmanager
def read_in_progress(store: SqliteStore) -> Iterator[tuple[concurrent.futures.Future[int], threading.Event]]:
    """A read running on another thread, held inside its transaction until the yielded event is
    set; the future gives the number of notes it then counts."""
    inside, release = threading.Event(), threading.Event()

    def slow(conn: sqlite3.Connection) -> int:
        inside.set()
        release.wait(WAIT)
        n: int = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
        return n

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reading = pool.submit(store.read_blocking, slow)
        assert inside.wait(WAIT)
        try:
            yield reading, release
        finally:
            release.set()


def test_close_waits_for_the_reads_in_progress_and_refuses_new_ones(tmp_path: Path) -> None:
    """`close` closed the connections of reads still running on other threads: the process died
    (SIGSEGV) — a training loop closing its RobotMemory while a worker thread recalled."""
    s = open_store(tmp_path / "index.db")
    with read_in_progress(s) as (reading, release):
        closing = threading.Thread(target=s.close)
        closing.start()
        assert eventually(lambda: s._closed)
        with pytest.raises(StorageError, match="closed"):
            s.read_blocking(lambda c: None)  # a read starting now is refused
        assert closing.is_alive()  # close waits for the read in progress
        release.set()
        assert reading.result(WAIT) == 0  # which finished on its open connection
        closing.join(WAIT)
        assert not closing.is_alive()


def test_a_read_outlasting_close_keeps_its_connection_but_the_rest_closes(tmp_path: Path) -> None:
    """When a read outlived close's wait, close returned early: the writer thread, its connection
    and the checkpointer stayed up and the WAL was never folded back."""
    s = open_store(tmp_path / "index.db")
    s.write_blocking(insert_note("a"))
    with read_in_progress(s) as (reading, release):
        s.close(timeout=0.05)
        assert not s._thread.is_alive()  # the writer stopped and closed its connection
        release.set()
        assert reading.result(WAIT) == 1  # the read finished on its own connection


def test_reader_connections_of_ended_threads_are_closed(tmp_path: Path) -> None:
    """Each thread that read kept its connection (two file descriptors) until close: a loop
    starting a thread per episode ran out of descriptors at ~120 threads."""
    with open_store(tmp_path / "index.db") as s:
        for _ in range(20):
            t = threading.Thread(target=s.read_blocking, args=(lambda c: c.execute("SELECT 1").fetchone(),))
            t.start()
            t.join(WAIT)
        s.read_blocking(lambda c: None)
        assert len(s._reader_conns) <= 2  # this thread's, and at most one not yet noticed


@pytest.mark.e2e  # starts a child interpreter
def test_a_forked_child_is_told_to_open_its_own_store_instead_of_hanging(tmp_path: Path) -> None:
    """A store inherited through fork: its writer thread stayed in the parent and its write
    lock could be copied while held, so the child's first write waited forever."""
    s = open_store(tmp_path / "index.db")
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: answer through the pipe, then leave without cleanup
            try:
                s.write_blocking(insert_note("child"))
                os.write(w, b"wrote")
            except StorageError as exc:
                os.write(w, b"refused: " + exc.detail.encode())
            s.close()  # leaves the parent's connections alone
            os._exit(0)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        answer = os.read(r, 4096).decode()
        os.close(r)
        assert os.WEXITSTATUS(status) == 0
        assert answer.startswith("refused: ")
        assert "forked" in answer
        assert "new RobotMemory" in answer
        s.write_blocking(insert_note("parent"))  # the parent's store is untouched
        assert notes(s) == ["parent"]
    finally:
        s.close()


# ---------------------------------------------------------------------------- versioned open
class Steps:
    """Injected migrations: step i creates table t<i> and records that it ran."""

    def __init__(self) -> None:
        self.ran: list[int] = []

    def __call__(self, n: int) -> list[Migration]:
        return [self._step(i) for i in range(n)]

    def _step(self, i: int) -> Migration:
        def step(conn: sqlite3.Connection) -> None:
            self.ran.append(i)
            conn.execute(f"CREATE TABLE t{i} (x)")

        return step


def _schema(n: int) -> Schema:
    return Schema((STORE_META, *(Table(f"t{i}", Kind.DEFINITION, ()) for i in range(n))))


def _version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()[0])
    finally:
        conn.close()


def test_migrations_run_in_order_from_zero_and_record_the_version(tmp_path: Path) -> None:
    steps = Steps()
    path = tmp_path / "index.db"
    with SqliteStore.open(path, _schema(3), steps(3)) as s:
        assert s.report is not None
        assert (s.report.from_version, s.report.to_version, s.report.created) == (0, 3, True)
    assert steps.ran == [0, 1, 2]
    assert _version(path) == 3


def test_reopening_applies_only_the_new_migrations(tmp_path: Path) -> None:
    steps = Steps()
    path = tmp_path / "index.db"
    SqliteStore.open(path, _schema(2), steps(2)).close()
    steps.ran.clear()

    with SqliteStore.open(path, _schema(4), steps(4)) as s:
        assert s.report is not None
        assert (s.report.from_version, s.report.to_version, s.report.created) == (2, 4, False)
    assert steps.ran == [2, 3]
    assert _version(path) == 4

    steps.ran.clear()
    SqliteStore.open(path, _schema(4), steps(4)).close()
    assert steps.ran == []


def test_a_failing_migration_keeps_the_last_completed_version(tmp_path: Path) -> None:
    steps = Steps()
    path = tmp_path / "index.db"

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("step 2 is broken")

    with pytest.raises(MigrationFailed) as caught:
        SqliteStore.open(path, _schema(2), [*steps(2), broken])
    assert (caught.value.at, caught.value.to) == (2, 3)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert _version(path) == 2
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_file_from_a_newer_version_raises_schema_too_new_and_is_left_untouched(tmp_path: Path) -> None:
    steps = Steps()
    path = tmp_path / "index.db"
    SqliteStore.open(path, _schema(3), steps(3)).close()
    before = sha256(path)
    steps.ran.clear()

    with pytest.raises(SchemaTooNew) as caught:
        SqliteStore.open(path, _schema(2), steps(2))

    assert (caught.value.found, caught.value.supported) == (3, 2)
    assert caught.value.code == "storage"
    assert str(path) in str(caught.value)
    assert steps.ran == []
    assert sha256(path) == before


def _assert_unreadable(path: Path, caught: pytest.ExceptionInfo[StoreUnreadable]) -> None:
    exc = caught.value
    assert exc.code == "storage"
    assert exc.path == str(path)
    assert str(path) in str(exc), "the message names the file"
    assert exc.remedy in str(exc), "the message says how to fix it"


def test_a_garbage_file_raises_store_unreadable_naming_the_path_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    path.write_bytes(b'{"robots": [{"id": "rap-1", "gro')  # the truncated JSON that crash-looped fleets
    before = sha256(path)

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert sha256(path) == before


def test_a_truncated_database_raises_store_unreadable_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with open_store(path) as s:
        s.write_blocking(
            lambda c: c.executemany("INSERT INTO notes VALUES (?, ?)", [(str(i), "x" * 500) for i in range(200)])
        )
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    before = sha256(path)

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert sha256(path) == before


def test_a_foreign_sqlite_database_raises_store_unreadable_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
        conn.execute("INSERT INTO users(email) VALUES ('a@example.com')")
    conn.close()
    before = sha256(path)

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert sha256(path) == before


@pytest.mark.parametrize("value", ["-1", "-7"])
def test_a_negative_schema_version_raises_store_unreadable_and_is_left_untouched(tmp_path: Path, value: str) -> None:
    """No migration leads from a negative version: run, its step indexes counted from the end of
    the list, re-ran the last migrations over the file and left it unopenable."""
    path = tmp_path / "index.db"
    open_store(path).close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", (value,))
    conn.close()
    before = sha256(path)

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert "negative" in caught.value.reason
    assert sha256(path) == before


@pytest.mark.parametrize("empty", [True, False])
def test_a_directory_where_the_file_belongs_raises_store_unreadable_and_is_left_alone(
    tmp_path: Path, empty: bool
) -> None:
    path = tmp_path / "index.db"
    path.mkdir()
    if not empty:
        (path / "x").write_text("kept")

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert "directory" in caught.value.reason
    assert path.is_dir()
    assert sorted(p.name for p in path.iterdir()) == ([] if empty else ["x"])


def test_a_zero_byte_file_is_opened_as_a_new_empty_database(tmp_path: Path) -> None:
    """An empty file holds nothing to lose (a `touch`, or a crash before sqlite wrote its first
    page), and SQLite itself treats it as an empty database: refusing it would turn a harmless
    state into an outage."""
    path = tmp_path / "index.db"
    path.touch()

    with open_store(path) as s:
        assert s.report is not None
        assert (s.report.from_version, s.report.to_version, s.report.created) == (0, 1, True)
        assert notes(s) == []


# ---------------------------------------------------------------------------- write failures, read-only
def _sqlite_error(code: int) -> sqlite3.Error:
    exc = sqlite3.OperationalError("as sqlite reports it")
    exc.sqlite_errorcode = code  # set by sqlite3 itself on real errors
    return exc


@pytest.mark.parametrize(
    "code",
    [
        sqlite3.SQLITE_FULL,  # ENOSPC
        sqlite3.SQLITE_IOERR_WRITE,  # EFBIG (a file-size limit), EROFS/EPERM, EIO, ENOSPC mid-page
        sqlite3.SQLITE_IOERR_FSYNC,
        sqlite3.SQLITE_IOERR_TRUNCATE,
        sqlite3.SQLITE_IOERR_SHMSIZE,
    ],
)
def test_a_write_the_disk_refused_is_reported_as_not_stored_naming_the_disk(code: int) -> None:
    err = translate(_sqlite_error(code), "the write")

    assert err.code == "storage"
    assert "not stored" in err.detail
    assert "disk" in err.detail
    assert "Reads still work" in err.detail


def test_an_unknown_sqlite_failure_says_nothing_internal() -> None:
    err = translate(_sqlite_error(sqlite3.SQLITE_IOERR_READ), "the read")

    assert err.code == "storage"
    assert "as sqlite reports it" not in err.detail


@contextmanager
def read_only(d: Path) -> Iterator[Path]:
    """`d` made read-only for this process, as a snapshot or a read-only mount is: permission bits
    for a normal user; for root (whom they do not stop) the immutable attribute, where the file
    system has it. The files in it keep their mode."""
    d.chmod(0o555)
    immutable = False
    if os.access(d, os.W_OK):
        chattr = shutil.which("chattr")
        immutable = chattr is not None and subprocess.run([chattr, "+i", str(d)], capture_output=True).returncode == 0
        if not immutable:
            d.chmod(0o755)
            pytest.skip(
                "running as root without chattr, so no directory can be made read-only: install e2fsprogs "
                "(chattr, on ext4 or xfs) or run the tests as a normal user"
            )
    try:
        yield d
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(d)], check=True)
        d.chmod(0o755)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot write: permission bits for a normal user; for root (whom
    permission bits do not stop) the immutable attribute, where the file system has it."""
    d = tmp_path / "ro"
    d.mkdir()
    with open_store(d / "index.db") as s:
        s.write_blocking(insert_note("kept"))
    with read_only(d):
        yield d


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_read_only_directory_raises_store_not_writable_naming_the_path_not_store_unreadable(
    read_only_dir: Path,
) -> None:
    """SQLite alone would say "unable to open database file", which reads as a broken file whose
    remedy (restore a backup, or start empty) would be wrong for a good one."""
    path = read_only_dir / "index.db"
    before = sha256(path)

    with pytest.raises(StoreNotWritable) as caught:
        open_store(path)

    assert caught.value.code == "storage"
    assert caught.value.path == str(path)
    assert str(path) in caught.value.detail
    assert sha256(path) == before
    assert sorted(p.name for p in read_only_dir.iterdir()) == ["index.db"]


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_data_directory_that_cannot_be_created_raises_store_not_writable(read_only_dir: Path) -> None:
    with pytest.raises(StoreNotWritable):
        open_store(read_only_dir / "data" / "index.db")


def test_a_data_directory_that_is_a_file_says_so(tmp_path: Path) -> None:
    """`--data-dir notes.txt` said "its directory cannot be created: File exists", then to grant
    write access — the wrong remedy."""
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(StoreNotWritable) as caught:
        open_store(tmp_path / "notes.txt" / "index.db")
    assert "notes.txt is a file, not a directory" in caught.value.detail
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_a_transaction_left_open_on_the_connection_is_rolled_back_before_the_next_write(store: SqliteStore) -> None:
    """An interrupt between a failed write and its rollback would leave the transaction open on
    the connection; the next write rolls it back (nothing of it was committed) and goes on."""

    def leave_open(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO notes(id, text) VALUES ('stale', 'never committed')")

    store.on_writer(leave_open)
    store.write_blocking(insert_note("fresh"))

    assert notes(store) == ["fresh"]
