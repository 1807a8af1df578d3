"""The change feed's prune against readers, one interleaving at a time: each test drives two or three
connections step by step (explicit transactions held open between steps, no sleeps) through a
schedule that could lose an entry, and checks the invariant — every committed entry reaches the
reader exactly once, or the reader is told to `Reload`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from psycopg import sql

from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from robot_mcp_memory.storage.postgres.changes import Batch, ChangeFeed, Cursor, Reload, migrate

pytestmark = pytest.mark.postgres

FEED = ChangeFeed("vectors")
NOW = timedelta(0)  # a horizon that deletes every committed entry, read or not
DAY = timedelta(days=1)


class Session:
    """One connection of the store's pool, in a transaction the test opens and ends by hand."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.conn: Connection = store.pool.getconn()

    def begin_read(self) -> Session:
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        return self._search_path()

    def begin_write(self) -> Session:
        self.conn.execute("BEGIN")
        return self._search_path()

    def _search_path(self) -> Session:
        self.conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(self.store.schema)))
        return self

    def xid(self) -> int:
        row = self.conn.execute("SELECT pg_current_xact_id()::text").fetchone()
        assert row is not None
        return int(row[0])

    def pid(self) -> int:
        row = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.execute("ROLLBACK")  # a no-op (a warning) when nothing is open
        self.store.pool.putconn(self.conn)


@pytest.fixture
def store(pg_store: PostgresStore, pg_url: str) -> Iterator[PostgresStore]:
    migrate(pg_store)
    store = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=6)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def sessions(store: PostgresStore) -> Iterator[list[Session]]:
    """Three sessions: the reader, a writer, a pruner (by convention; any may play any part)."""
    opened = [Session(store) for _ in range(3)]
    try:
        yield opened
    finally:
        for s in reversed(opened):  # the later sessions first: one may hold a lock an earlier one waits for
            s.close()


def _write(store: PostgresStore, ref: str) -> int:
    def work(c: Connection) -> int:
        FEED.record(c, ref, "put")
        row = c.execute("SELECT pg_current_xact_id()::text").fetchone()
        assert row is not None
        return int(row[0])

    return store.write_blocking(work)


def _read(store: PostgresStore, cursor: Cursor) -> Batch | Reload:
    return store.read_blocking(lambda c: FEED.since(cursor, c))


def _refs(result: Batch | Reload) -> list[str]:
    assert isinstance(result, Batch), f"expected entries, was told {result}"
    return [e.ref for e in result.entries]


def test_a_prune_that_commits_after_the_readers_snapshot_deletes_nothing_that_read_sees(
    store: PostgresStore, sessions: list[Session]
) -> None:
    reader, pruner, _ = sessions
    cursor = store.read_blocking(FEED.start)
    _write(store, "a")
    reader.begin_read()
    taken = FEED.start(reader.conn)  # the reader's snapshot is taken here, before the prune
    pruner.begin_write()
    assert FEED.prune(pruner.conn, horizon=NOW).deleted == 1, "'a' is deleted, unread"
    pruner.commit()
    first = FEED.since(cursor, reader.conn)
    reader.commit()

    assert _refs(first) == ["a"], "the deletion is not visible in the older snapshot"
    assert first.cursor == taken
    second = _read(store, first.cursor)
    assert _refs(second) == [], "nothing twice, and no reload: everything pruned was returned"


def test_a_prune_in_progress_at_the_readers_snapshot_is_seen_by_the_next_read(
    store: PostgresStore, sessions: list[Session]
) -> None:
    reader, pruner, _ = sessions
    cursor = store.read_blocking(FEED.start)
    _write(store, "a")
    pruner.begin_write()
    assert FEED.prune(pruner.conn, horizon=NOW).deleted == 1
    pruner_xid = pruner.xid()
    reader.begin_read()
    first = FEED.since(cursor, reader.conn)
    pruner.commit()  # commits while the reader's snapshot, which holds it in progress, is still open
    reader.commit()

    assert _refs(first) == ["a"]
    assert isinstance(first, Batch)
    assert not first.cursor.sees(pruner_xid), "the prune was in progress in that snapshot"
    assert _refs(_read(store, first.cursor)) == [], "what it deleted was below that snapshot's xmin"


def test_a_writer_in_progress_is_in_every_cursor_it_is_not_visible_in_so_an_id_below_xmin_has_ended(
    store: PostgresStore, sessions: list[Session]
) -> None:
    writer, _, _ = sessions
    writer.begin_write()
    FEED.record(writer.conn, "long", "put")
    long_xid = writer.xid()
    later = _write(store, "later")  # a younger transaction ends first, so xmax passes the open one
    cursor = store.read_blocking(FEED.start)
    writer.commit()

    assert cursor.xmin == long_xid
    assert long_xid in cursor.xip
    assert cursor.sees(later)
    assert not cursor.sees(long_xid)


def test_an_acknowledged_cursor_keeps_the_entry_of_a_writer_in_progress_at_it(
    store: PostgresStore, sessions: list[Session]
) -> None:
    writer, _, _ = sessions
    start = store.read_blocking(FEED.start)
    store.write_blocking(lambda c: FEED.acknowledge(c, "r", start))
    writer.begin_write()
    FEED.record(writer.conn, "long", "put")
    _write(store, "short")
    first = _read(store, start)
    assert _refs(first) == ["short"]
    store.write_blocking(lambda c: FEED.acknowledge(c, "r", first.cursor))
    writer.commit()  # 'long' commits after the cursor the reader acknowledged
    pruned = store.write_blocking(lambda c: FEED.prune(c, horizon=DAY))

    assert pruned.deleted == 0, "both entries are at or above the acknowledged xmin"
    assert _refs(_read(store, first.cursor)) == ["long"]


def _waiting_for_a_lock(store: PostgresStore, pid: int) -> bool:
    row = store.write_blocking(
        lambda c: c.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", (pid,)).fetchone()
    )
    return row is not None and int(row[0]) > 0


def test_a_prune_whose_id_predates_the_last_prunes_still_tells_a_reader_it_left_behind_to_reload(
    store: PostgresStore, sessions: list[Session]
) -> None:
    """Prune ids need not follow their commit order (a caller's transaction may have an id before
    it calls `prune`); the check needs only that the last prune to commit is the one recorded."""
    older, newer, writer = sessions
    cursor0 = store.read_blocking(FEED.start)
    _write(store, "a")
    writer.begin_write()
    FEED.record(writer.conn, "b", "put")  # written first: older than the older prune's now()
    older.begin_write()
    FEED.acknowledge(older.conn, "r", cursor0)  # the older transaction takes its id first
    older_xid, older_pid = older.xid(), older.pid()
    newer.begin_write()
    assert FEED.prune(newer.conn, horizon=NOW).deleted == 1, "'a'"
    newer_xid = newer.xid()
    assert older_xid < newer_xid

    outcome: list[object] = []
    blocked = threading.Thread(target=lambda: outcome.append(FEED.prune(older.conn, horizon=NOW)))
    blocked.start()
    deadline = time.monotonic() + 30
    while not _waiting_for_a_lock(store, older_pid) and time.monotonic() < deadline:
        time.sleep(0.005)  # bounded poll of the server's lock table, not a guess at timing
    assert _waiting_for_a_lock(store, older_pid), "the older prune waits for the newer one's lock"
    cursor = store.read_blocking(FEED.start)  # 'b' and both prunes in progress: not seen here
    writer.commit()
    newer.commit()
    blocked.join(30)
    assert not blocked.is_alive()
    older.commit()  # recorded last, with the lower id

    assert [getattr(p, "deleted", None) for p in outcome] == [1], "'b', which the reader had not been returned"
    told = _read(store, cursor)
    assert isinstance(told, Reload)
    assert _refs(_read(store, told.cursor)) == []
