"""The two modes a `SqliteStore` is opened in (`StoreMode`), each doing what the store's module
docstring says: which thread runs an awaited read or write, what waits off the event loop, and
that the mode is fixed at open."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from robot_mcp_memory.errors import StorageError
from robot_mcp_memory.storage.sqlite import SqliteStore, StoreMode
from tests.storage.sqlite.test_store import (
    MIGRATIONS,
    SCHEMA,
    WAIT,
    bump,
    counter,
    insert_note,
    notes,
    writer_blocked,
)


def open_in(path: Path, mode: StoreMode) -> SqliteStore:
    return SqliteStore.open(path, SCHEMA, MIGRATIONS, mode=mode, hot_queue_max=3, readers=2)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_in(tmp_path / "index.db", StoreMode.SERVER)
    yield s
    s.close()


@pytest.fixture
def blocking(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_in(tmp_path / "index.db", StoreMode.BLOCKING)
    yield s
    s.close()


def _reading(c: sqlite3.Connection) -> tuple[int, list[str]]:
    return threading.get_ident(), [r[0] for r in c.execute("SELECT id FROM notes")]


def _noting(pid: str, ran: list[tuple[str, int]]) -> Callable[[sqlite3.Connection], int]:
    """A write of note `pid` that records on which thread it ran and returns that thread."""

    def run(conn: sqlite3.Connection) -> int:
        insert_note(pid)(conn)
        ran.append(("write", threading.get_ident()))
        return threading.get_ident()

    return run


async def _awaited_write(store: SqliteStore, pid: str, ran: list[tuple[str, int]], *, long: bool = False) -> int:
    after = lambda _r: ran.append(("after", threading.get_ident()))  # noqa: E731
    return await store.write(_noting(pid, ran), after, long=long)


def _reader_threads(store: SqliteStore) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"sqlite-read-{store.path.name}")]


# ---------------------------------------------------------------------------- fixed at open
def test_the_mode_is_chosen_at_open_and_cannot_change_after(tmp_path: Path) -> None:
    """No flag flipped after construction: `mode` is read-only, and a store opened without one
    is a server's (every caller that does not say otherwise keeps the loop free)."""
    with SqliteStore.open(tmp_path / "a.db", SCHEMA, MIGRATIONS) as default:
        assert default.mode is StoreMode.SERVER
        with pytest.raises(AttributeError):
            default.mode = StoreMode.BLOCKING  # type: ignore[misc]  # the point: it cannot be set
        assert default.mode is StoreMode.SERVER
    with open_in(tmp_path / "b.db", StoreMode.BLOCKING) as blocking:
        assert blocking.mode is StoreMode.BLOCKING


# ---------------------------------------------------------------------------- reads
def test_a_servers_awaited_read_never_runs_on_the_loops_thread(server: SqliteStore) -> None:
    """The HTTP server keeps its event loop free for other sessions while SQLite works."""
    server.write_blocking(insert_note("seen"))

    async def where() -> tuple[int, list[tuple[int, list[str]]]]:
        got = await asyncio.gather(*(server.read(_reading) for _ in range(4)))
        return threading.get_ident(), list(got)

    loop_thread, reads = asyncio.run(where())
    assert all(ident != loop_thread for ident, _ in reads)
    assert all(seen == ["seen"] for _, seen in reads)
    assert _reader_threads(server), "the reads ran on the reader pool"


def test_a_blocking_stores_awaited_read_runs_on_the_awaiting_thread_with_no_reader_pool(
    blocking: SqliteStore,
) -> None:
    """One caller (a stdio server, the CLI) saves the two thread hops; the read sees committed
    writes all the same."""
    blocking.write_blocking(insert_note("seen"))

    async def where() -> tuple[int, tuple[int, list[str]]]:
        return threading.get_ident(), await blocking.read(_reading)

    loop_thread, (read_thread, seen) = asyncio.run(where())
    assert read_thread == loop_thread
    assert seen == ["seen"]
    assert _reader_threads(blocking) == []


@pytest.mark.parametrize("mode", list(StoreMode))
def test_a_blocking_read_runs_on_the_callers_thread_in_either_mode(tmp_path: Path, mode: StoreMode) -> None:
    with open_in(tmp_path / "index.db", mode) as s:
        s.write_blocking(insert_note("seen"))
        assert s.read_blocking(_reading) == (threading.get_ident(), ["seen"])


# ---------------------------------------------------------------------------- writes
def test_a_servers_awaited_write_and_its_after_run_on_the_writer_thread(server: SqliteStore) -> None:
    """Even with the writer idle and nothing queued, a server's write leaves the loop's thread;
    `after` runs right after the commit, on the thread that committed."""
    ran: list[tuple[str, int]] = []

    async def where() -> tuple[int, int]:
        return threading.get_ident(), await _awaited_write(server, "a", ran)

    loop_thread, write_thread = asyncio.run(where())
    assert write_thread != loop_thread
    assert ran == [("write", write_thread), ("after", write_thread)]
    assert server._thread.ident == write_thread
    assert notes(server) == ["a"]


def test_a_blocking_stores_awaited_write_runs_on_the_awaiting_thread_and_a_long_one_on_the_writer(
    blocking: SqliteStore,
) -> None:
    """A write that need not wait runs on the awaiting thread, its `after` right after the
    commit; a `long` write (a reindex) always goes to the writer thread."""
    ran: list[tuple[str, int]] = []

    async def where(pid: str, long: bool = False) -> tuple[int, int]:
        return threading.get_ident(), await _awaited_write(blocking, pid, ran, long=long)

    loop_thread, write_thread = asyncio.run(where("b"))
    assert write_thread == loop_thread
    assert ran == [("write", loop_thread), ("after", loop_thread)]
    loop_thread, write_thread = asyncio.run(where("c", long=True))
    assert write_thread != loop_thread
    assert write_thread == blocking._thread.ident
    assert ran[-1] == ("after", write_thread)
    assert notes(blocking) == ["b", "c"]


@pytest.mark.parametrize("mode", list(StoreMode))
def test_a_blocking_write_runs_on_the_callers_thread_when_the_writer_is_idle_in_either_mode(
    tmp_path: Path, mode: StoreMode
) -> None:
    ran: list[tuple[str, int]] = []
    with open_in(tmp_path / "index.db", mode) as s:
        assert s.write_blocking(_noting("w", ran)) == threading.get_ident()
        assert notes(s) == ["w"]


def test_a_blocking_stores_awaited_write_never_overtakes_a_queued_one(blocking: SqliteStore) -> None:
    """The writer is between jobs (the write lock free) with a hot write still queued: an
    awaited write joins the queue behind it instead of running on the awaiting thread."""
    order: list[str] = []
    between, release = threading.Event(), threading.Event()

    def hot_write(name: str) -> Callable[[sqlite3.Connection], None]:
        def run(conn: sqlite3.Connection) -> None:
            bump(conn)
            order.append(name)

        return run

    def awaited(conn: sqlite3.Connection) -> int:
        insert_note("after-hot")(conn)
        order.append("awaited")
        return threading.get_ident()

    def hold_the_writer_between_jobs(_f: object) -> None:  # runs on the writer, lock released
        between.set()
        release.wait(WAIT)

    outcome: list[Any] = []

    async def client() -> None:
        write = asyncio.ensure_future(blocking.write(awaited))
        await asyncio.sleep(0.01)  # the write has started: inline, it would have finished
        outcome.append((list(order), write.done()))
        release.set()
        outcome.append((threading.get_ident(), await write))

    with writer_blocked(blocking):
        first = blocking.hot(hot_write("hot1"))
        assert first is not None
        first.add_done_callback(hold_the_writer_between_jobs)
        assert blocking.hot(hot_write("hot2")) is not None
    assert between.wait(WAIT)
    assert not blocking._writing.locked()  # an inline write could take the lock now
    asyncio.run(client())
    assert outcome[0] == (["hot1"], False)
    loop_thread, write_thread = outcome[1]
    assert write_thread == blocking._thread.ident != loop_thread
    assert order == ["hot1", "hot2", "awaited"]
    assert counter(blocking) == 2
    assert notes(blocking) == ["after-hot"]


def _loop_serves_while_the_write_waits(
    store: SqliteStore, wait: Callable[[], Any], release: Callable[[], object]
) -> None:
    """Inside `wait` (a context in which a write must wait), a blocking store's awaited write
    waits off the event loop: another task on the loop runs while it is pending. After `release`
    it commits, its `after` with it."""
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


def test_a_blocking_stores_write_behind_a_busy_writer_waits_off_the_event_loop(blocking: SqliteStore) -> None:
    _loop_serves_while_the_write_waits(blocking, lambda: writer_blocked(blocking), lambda: None)


def test_a_blocking_stores_write_facing_another_processs_write_lock_waits_off_the_event_loop(
    blocking: SqliteStore,
) -> None:
    """Another process (a training loop's `RobotMemory`, a CLI command) holds index.db's write
    lock: the write waits on the writer thread (its patience), not on the loop — not even for
    SQLite's busy wait, here made longer than this test waits for the loop."""
    blocking.busy_timeout_ms = 60_000
    blocking.on_writer(lambda c: c.execute("PRAGMA busy_timeout=60000"))
    other = sqlite3.connect(blocking.path, isolation_level=None, check_same_thread=False)

    @contextmanager
    def locked() -> Iterator[None]:
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            if other.in_transaction:
                other.execute("ROLLBACK")

    try:
        _loop_serves_while_the_write_waits(blocking, locked, lambda: other.execute("ROLLBACK"))
    finally:
        other.close()


@pytest.mark.parametrize("mode", list(StoreMode))
async def test_a_write_whose_awaiting_coroutine_is_cancelled_still_commits_in_either_mode(
    tmp_path: Path, mode: StoreMode
) -> None:
    with open_in(tmp_path / "index.db", mode) as s:
        with writer_blocked(s):
            task = asyncio.create_task(s.write(insert_note("cancelled-caller")))
            await anyio.wait_all_tasks_blocked()  # queued behind the blocked writer, off the loop
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        s.flush(WAIT)
        assert notes(s) == ["cancelled-caller"]


@pytest.mark.parametrize("mode", list(StoreMode))
def test_close_drains_every_accepted_write_in_either_mode(tmp_path: Path, mode: StoreMode) -> None:
    path = tmp_path / "index.db"
    s = open_in(path, mode)
    with writer_blocked(s):
        futures = [s.hot(bump) for _ in range(3)]
        closer = threading.Thread(target=s.close)
        closer.start()
    closer.join(WAIT)
    assert all(f is not None and f.result(WAIT) is None for f in futures)
    with pytest.raises(StorageError):
        s.write_blocking(insert_note("late"))
    with open_in(path, mode) as again:
        assert counter(again) == 3


@pytest.mark.e2e  # forks the test process
@pytest.mark.parametrize("mode", list(StoreMode))
def test_a_forked_child_refuses_an_inherited_store_in_either_mode(tmp_path: Path, mode: StoreMode) -> None:
    """An awaited read or write of a blocking store would run right here, in the child: it is
    refused as the blocking calls are, and the parent's store is untouched."""
    s = open_in(tmp_path / "index.db", mode)
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: answer through the pipe, then leave without cleanup
            answers = []
            for call in (lambda: s.read(_reading), lambda: s.write(insert_note("child"))):
                try:
                    asyncio.run(call())
                    answers.append("ran")
                except StorageError:
                    answers.append("refused")
            os.write(w, ",".join(answers).encode())
            os._exit(0)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        answer = os.read(r, 4096).decode()
        os.close(r)
        assert os.WEXITSTATUS(status) == 0
        assert answer == "refused,refused"
        s.write_blocking(insert_note("parent"))
        assert notes(s) == ["parent"]
    finally:
        s.close()
