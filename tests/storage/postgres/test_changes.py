"""The change feed against a real cluster: concurrent writers whose transactions commit out of order,
readers polling meanwhile, and the pruning that tells a reader left behind to reload."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

import pytest

from robot_mcp_memory.errors import InvalidInput, StorageError
from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from robot_mcp_memory.storage.postgres.changes import (
    Batch,
    ChangeFeed,
    Cursor,
    Listener,
    Pruned,
    Reload,
    migrate,
)

pytestmark = pytest.mark.postgres

FEED = ChangeFeed("vectors")
WRITERS = 4
TRANSACTIONS = 30  # per writer
READERS = 2


class _Abandoned(Exception):
    """Raised inside a writer's transaction so that it rolls back."""


@pytest.fixture
def feed_store(pg_store: PostgresStore, pg_url: str) -> Iterator[PostgresStore]:
    """A store on the test's schema with a connection for every writer and reader at once."""
    migrate(pg_store)
    store = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=2 * (WRITERS + READERS) + 2)
    try:
        yield store
    finally:
        store.close()


def _read(store: PostgresStore, cursor: Cursor) -> Batch:
    result = store.read_blocking(lambda c: FEED.since(cursor, c))
    assert isinstance(result, Batch), "nothing was pruned"
    return result


def _by_sequence(conn: Connection, after: int) -> list[tuple[int, str]]:
    """The cursor the feed replaces: every entry with a higher ``id`` than the last one seen."""
    rows = conn.execute(
        "SELECT id, ref FROM change_log WHERE component = %s AND id > %s ORDER BY id", (FEED.component, after)
    ).fetchall()
    return [(int(i), str(r)) for i, r in rows]


@dataclass
class Race:
    """What one run of the schedule committed, rolled back, and what each reader was returned."""

    committed: set[str] = field(default_factory=set)
    rolled_back: set[str] = field(default_factory=set)
    by_snapshot: list[Counter[str]] = field(default_factory=list)
    by_sequence: list[Counter[str]] = field(default_factory=list)
    polls: int = 0
    pruned: int = 0
    errors: list[BaseException] = field(default_factory=list)
    xids: dict[str, int] = field(default_factory=dict)
    cursors: list[list[Cursor]] = field(default_factory=list)
    prunes: list[Pruned] = field(default_factory=list)
    #: With `reload`: each reader's cache at the end, entries returned that it already held, reloads.
    caches: list[set[str]] = field(default_factory=list)
    again: list[list[str]] = field(default_factory=list)
    reloads: list[int] = field(default_factory=list)

    def missed(self, reader: int) -> str:
        """What `reader` missed, with each writer's id and the cursors around it (empty if nothing)."""
        lost = sorted(self.committed - set(self.by_snapshot[reader]))
        if not lost:
            return ""
        chain = self.cursors[reader]
        about = [
            f"{ref} xid {self.xids[ref]}: "
            + " ".join(str(c) for c in chain if c.xmin - 3 <= self.xids[ref] <= c.xmax + 3)
            for ref in lost
        ]
        return "\n".join([f"reader {reader} missed {len(lost)}", *about, f"prunes {self.prunes[-8:]}"])


def _read_or_reload(cursor: Cursor, conn: Connection) -> tuple[Batch | Reload, set[str] | None]:
    """A replica's poll: the entries since `cursor`, or on `Reload` the whole table in the same snapshot."""
    result = FEED.since(cursor, conn)
    if isinstance(result, Batch):
        return result, None
    return result, {str(ref) for (ref,) in conn.execute("SELECT ref FROM items").fetchall()}


def _race(store: PostgresStore, seed: int, *, prune: bool = False, reload: bool = False) -> Race:
    """`WRITERS` threads each run `TRANSACTIONS` transactions that record one or two entries, then
    pause (seeded, random) before committing — one in seven rolls back instead; `READERS` readers
    with a snapshot cursor and as many with a sequence cursor poll all along, and once more after
    the writers are done. With `prune`, the snapshot readers acknowledge each batch and a pruner
    deletes what they have all passed, all along. With `reload` (and `prune`), the pruner deletes
    every committed entry, read or not (horizon 0), each writer also inserts its refs into
    ``items``, and a reader told to `Reload` rebuilds its cache from ``items`` in that snapshot."""
    race = Race()
    lock = threading.Lock()
    done = threading.Event()
    start = threading.Barrier(WRITERS + 2 * READERS + (1 if prune else 0))
    start_cursor = store.read_blocking(FEED.start)
    for r in range(READERS if prune else 0):
        _ack(store, f"reader-{r}", start_cursor)

    def reported(fn: Callable[..., None]) -> Callable[..., None]:
        def run(*args: object) -> None:
            try:
                fn(*args)
            except BaseException as exc:
                with lock:
                    race.errors.append(exc)
                start.abort()  # the others stop waiting for this thread
                done.set()

        return run

    def writer(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        start.wait(30)
        for t in range(TRANSACTIONS):
            refs = [f"w{n}-t{t}-e{e}" for e in range(rng.choice((1, 1, 2)))]
            abandon = rng.random() < 1 / 7
            pause = rng.uniform(0.0, 0.012)

            def work(c: Connection, refs: list[str] = refs, abandon: bool = abandon, pause: float = pause) -> int:
                if reload:
                    c.cursor().executemany("INSERT INTO items (ref) VALUES (%s)", [(ref,) for ref in refs])
                FEED.record_many(c, [(ref, "put", {"writer": n}) for ref in refs])
                row = c.execute("SELECT pg_current_xact_id()::text").fetchone()
                assert row is not None
                done.wait(pause)  # the pause inside the transaction, between the entry and the commit
                if abandon:
                    raise _Abandoned
                return int(row[0])

            try:
                xid = store.write_blocking(work)
            except _Abandoned:
                with lock:
                    race.rolled_back.update(refs)
            else:
                with lock:
                    race.committed.update(refs)
                    race.xids.update(dict.fromkeys(refs, xid))

    def snapshot_reader(r: int, seen: Counter[str]) -> None:
        cursor = start_cursor
        start.wait(30)
        while True:
            finished = done.is_set()  # read before the poll: a poll after the writers ended comes last
            if reload:
                result, table = store.read_blocking(partial(_read_or_reload, cursor))
                if table is not None:
                    race.caches[r] = table
                    race.reloads[r] += 1
                else:
                    assert isinstance(result, Batch)
                    race.again[r] += [e.ref for e in result.entries if e.ref in race.caches[r]]
                    race.caches[r].update(e.ref for e in result.entries)
                cursor = result.cursor
                race.cursors[r].append(cursor)
                with lock:
                    race.polls += 1
                if finished:
                    return
                continue
            batch = _read(store, cursor)
            seen.update(e.ref for e in batch.entries)
            cursor = batch.cursor
            race.cursors[r].append(cursor)
            if prune:
                _ack(store, f"reader-{r}", cursor)
            with lock:
                race.polls += 1
            if finished:
                return

    def pruner() -> None:
        start.wait(30)
        while True:
            finished = done.is_set()  # as the readers: one prune after the writers ended comes last
            done_ = store.write_blocking(lambda c: FEED.prune(c, horizon=timedelta(0) if reload else DAY))
            race.prunes.append(done_)
            race.pruned += done_.deleted
            if finished:
                return
            done.wait(0.02)  # the pruner's cadence

    def sequence_reader(seen: Counter[str]) -> None:
        last = 0
        start.wait(30)
        while True:
            finished = done.is_set()
            rows = store.read_blocking(partial(_by_sequence, after=last))
            seen.update(ref for _, ref in rows)
            last = max([last, *(i for i, _ in rows)])
            if finished:
                return

    race.by_snapshot = [Counter() for _ in range(READERS)]
    race.by_sequence = [Counter() for _ in range(READERS)]
    race.cursors = [[] for _ in range(READERS)]
    race.caches = [set() for _ in range(READERS)]
    race.again = [[] for _ in range(READERS)]
    race.reloads = [0 for _ in range(READERS)]
    writers = [threading.Thread(target=reported(writer), args=(n,)) for n in range(WRITERS)]
    readers = [threading.Thread(target=reported(snapshot_reader), args=rs) for rs in enumerate(race.by_snapshot)]
    readers += [threading.Thread(target=reported(sequence_reader), args=(s,)) for s in race.by_sequence]
    readers += [threading.Thread(target=reported(pruner))] if prune else []
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join(120)
    done.set()
    for t in readers:
        t.join(120)
    assert not any(t.is_alive() for t in writers + readers)
    assert race.errors == []
    return race


def test_every_committed_entry_reaches_every_reader_exactly_once_under_concurrent_writers(
    feed_store: PostgresStore,
) -> None:
    race = _race(feed_store, seed=27)
    assert race.committed, "the schedule commits"
    assert race.rolled_back, "and rolls back"
    assert race.polls > 4 * READERS, "the readers polled while the writers wrote"
    for r, seen in enumerate(race.by_snapshot):
        assert race.missed(r) == ""
        duplicated = {ref for ref, n in seen.items() if n > 1}
        assert duplicated == set()
        assert not set(seen) & race.rolled_back, "a rolled-back entry is never returned"
        assert set(seen) == race.committed


@pytest.mark.parametrize("seed", [28, 29, 30])
def test_pruning_while_they_write_and_read_loses_nothing_a_registered_reader_needs(
    feed_store: PostgresStore, seed: int
) -> None:
    race = _race(feed_store, seed=seed, prune=True)
    assert race.pruned > 0, "the pruner deleted entries while the race ran"
    for r, seen in enumerate(race.by_snapshot):
        assert race.missed(r) == "", "no reader was told to reload, and none missed an entry"
        assert max(seen.values()) == 1


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_a_reader_the_pruning_left_behind_reloads_and_then_holds_every_committed_entry_exactly_once(
    feed_store: PostgresStore, seed: int
) -> None:
    feed_store.write_blocking(lambda c: c.execute("CREATE TABLE items (ref TEXT PRIMARY KEY)"))
    race = _race(feed_store, seed=seed, prune=True, reload=True)
    assert race.pruned == len(race.committed), "horizon 0: the pruner deleted every committed entry, read or not"
    for r, cache in enumerate(race.caches):
        assert race.again[r] == [], "no entry returned to a cache that already held it"
        assert cache == race.committed, "a reader's cache is the table: nothing missed, nothing rolled back"


def test_a_sequence_cursor_would_miss_entries_under_the_same_schedule(feed_store: PostgresStore) -> None:
    race = _race(feed_store, seed=27)
    missed = [len(race.committed - set(seen)) for seen in race.by_sequence]
    assert sum(missed) > 0, "a later sequence value committed before an earlier one, and was read between"
    for seen in race.by_snapshot:
        assert set(seen) == race.committed
        assert max(seen.values()) == 1


@contextmanager
def _held_open(store: PostgresStore, ref: str) -> Iterator[Callable[[], None]]:
    """A writer that records `ref` and keeps its transaction open until the yielded function (or
    the end of the block) commits it."""
    recorded, commit = threading.Event(), threading.Event()

    def work(c: Connection) -> None:
        FEED.record(c, ref, "put")
        recorded.set()
        assert commit.wait(30)

    def committed() -> None:
        commit.set()
        thread.join(30)

    thread = threading.Thread(target=store.write_blocking, args=(work,))
    thread.start()
    try:
        assert recorded.wait(30)
        yield committed
    finally:
        committed()


def test_an_entry_in_progress_at_a_read_is_returned_by_the_read_after_its_commit(feed_store: PostgresStore) -> None:
    cursor = feed_store.read_blocking(FEED.start)
    with _held_open(feed_store, "early") as commit:  # draws the lower sequence value, commits last
        feed_store.write_blocking(lambda c: FEED.record(c, "late", "put"))
        first = _read(feed_store, cursor)
        last_id = feed_store.read_blocking(lambda c: _by_sequence(c, 0))[-1][0]
        commit()
    second = _read(feed_store, first.cursor)
    third = _read(feed_store, second.cursor)

    assert [e.ref for e in first.entries] == ["late"]
    assert [e.ref for e in second.entries] == ["early"]
    assert third.entries == ()
    assert feed_store.read_blocking(lambda c: _by_sequence(c, last_id)) == [], "the sequence cursor lost it"


def test_a_read_outside_a_snapshot_transaction_is_refused(feed_store: PostgresStore) -> None:
    cursor = feed_store.read_blocking(FEED.start)
    with pytest.raises(StorageError):
        feed_store.write_blocking(lambda c: FEED.since(cursor, c))


def test_entries_carry_their_op_payload_and_writer(feed_store: PostgresStore) -> None:
    cursor = feed_store.read_blocking(FEED.start)

    def work(c: Connection) -> int:
        FEED.record(c, "m-1", "put", {"dim": 3})
        FEED.record(c, "m-2", "delete")
        ChangeFeed("other").record(c, "x", "put")
        row = c.execute("SELECT pg_current_xact_id()::text").fetchone()
        assert row is not None
        return int(row[0])

    xid = feed_store.write_blocking(work)
    batch = _read(feed_store, cursor)
    assert [(e.ref, e.op, e.payload, e.xid) for e in batch.entries] == [
        ("m-1", "put", {"dim": 3}, xid),
        ("m-2", "delete", None, xid),
    ]
    assert batch.cursor.sees(xid)
    assert not cursor.sees(xid)


def _write(store: PostgresStore, *refs: str) -> None:
    store.write_blocking(lambda c: FEED.record_many(c, [(r, "put", None) for r in refs]))


def _count(store: PostgresStore) -> int:
    row = store.read_blocking(lambda c: c.execute("SELECT count(*) FROM change_log").fetchone())
    assert row is not None
    return int(row[0])


def _ack(store: PostgresStore, reader: str, cursor: Cursor) -> None:
    store.write_blocking(lambda c: FEED.acknowledge(c, reader, cursor))


def _prune(store: PostgresStore, horizon: timedelta) -> tuple[int, int]:
    done = store.write_blocking(lambda c: FEED.prune(c, horizon=horizon))
    return done.deleted, done.forgotten


DAY = timedelta(days=1)


def test_pruning_deletes_what_every_registered_reader_passed_and_keeps_the_rest(feed_store: PostgresStore) -> None:
    fast = slow = feed_store.read_blocking(FEED.start)
    _ack(feed_store, "fast", fast)
    _ack(feed_store, "slow", slow)
    _write(feed_store, "a", "b")
    fast = _read(feed_store, fast).cursor
    _ack(feed_store, "fast", fast)

    assert _prune(feed_store, DAY) == (0, 0), "slow has passed nothing"
    slow_batch = _read(feed_store, slow)
    assert [e.ref for e in slow_batch.entries] == ["a", "b"]
    _ack(feed_store, "slow", slow_batch.cursor)
    assert _prune(feed_store, DAY) == (2, 0)
    assert _count(feed_store) == 0

    _write(feed_store, "c")
    for cursor in (fast, slow_batch.cursor):
        assert [e.ref for e in _read(feed_store, cursor).entries] == ["c"], "no reader that passed is told to reload"


@pytest.mark.parametrize("ids", [(999, 1000, 1001), (9_998, 9_999, 10_000), (99_999, 100_000, 123)])
def test_the_prune_watermark_is_the_largest_writer_id_deleted_not_the_last_in_text_order(
    feed_store: PostgresStore, ids: tuple[int, ...]
) -> None:
    """Writer ids straddling a digit boundary ("999" sorts after "1000" as text): the watermark is
    the numerically largest, or a reader that had not read the newest entry would not reload."""
    feed_store.write_blocking(
        lambda c: [
            c.execute(
                "INSERT INTO change_log (component, ref, op, writer_xid) VALUES (%s, %s, 'saved', %s::xid8)",
                (FEED.component, f"r{x}", str(x)),
            )
            for x in ids
        ]
    )
    pruned = feed_store.write_blocking(lambda c: FEED.prune(c, horizon=timedelta(0)))
    assert (pruned.deleted, pruned.through) == (len(ids), max(ids))


def test_a_reader_behind_the_prune_horizon_is_told_to_reload_and_then_misses_nothing(
    feed_store: PostgresStore,
) -> None:
    behind = feed_store.read_blocking(FEED.start)
    _write(feed_store, "a", "b")
    ahead = _read(feed_store, behind).cursor

    assert _prune(feed_store, timedelta(0)) == (2, 0), "past the horizon, whoever has not read them"
    told = feed_store.read_blocking(lambda c: FEED.since(behind, c))
    assert isinstance(told, Reload)
    assert _read(feed_store, ahead).entries == (), "a reader past everything pruned reads on"
    assert isinstance(feed_store.read_blocking(lambda c: FEED.since(behind, c)), Reload), "until it reloads"

    _write(feed_store, "c")
    assert [e.ref for e in _read(feed_store, told.cursor).entries] == ["c"]


def test_a_reload_cursor_reads_on_while_an_older_transaction_is_still_open(feed_store: PostgresStore) -> None:
    behind = feed_store.read_blocking(FEED.start)
    with _held_open(feed_store, "long"):
        _write(feed_store, "a")
        assert _prune(feed_store, timedelta(0)) == (1, 0)
        told = feed_store.read_blocking(lambda c: FEED.since(behind, c))
        assert isinstance(told, Reload)
        assert told.cursor.xip, "the long transaction holds the snapshot's xmin below what was pruned"
        again = _read(feed_store, told.cursor)
        assert again.entries == (), "the prune it has seen does not make it reload again"
    assert [e.ref for e in _read(feed_store, again.cursor).entries] == ["long"]


def test_a_registration_not_refreshed_within_the_horizon_is_forgotten(feed_store: PostgresStore) -> None:
    gone = live = feed_store.read_blocking(FEED.start)
    _ack(feed_store, "gone", gone)
    _write(feed_store, "a")
    live = _read(feed_store, live).cursor
    _ack(feed_store, "live", live)
    feed_store.write_blocking(
        lambda c: c.execute("UPDATE change_readers SET seen_at = now() - interval '2 hours' WHERE reader = 'gone'")
    )
    assert _prune(feed_store, timedelta(hours=1)) == (1, 1)
    assert isinstance(feed_store.read_blocking(lambda c: FEED.since(gone, c)), Reload)
    assert isinstance(feed_store.read_blocking(lambda c: FEED.since(live, c)), Batch)


def test_prunes_of_one_component_leave_the_others_alone(feed_store: PostgresStore) -> None:
    other = ChangeFeed("other")
    cursor = feed_store.read_blocking(other.start)
    feed_store.write_blocking(lambda c: other.record(c, "x", "put"))
    _write(feed_store, "a")
    assert _prune(feed_store, timedelta(0)) == (1, 0)
    batch = feed_store.read_blocking(lambda c: other.since(cursor, c))
    assert isinstance(batch, Batch)
    assert [e.ref for e in batch.entries] == ["x"]


def test_a_commit_wakes_a_listener_of_its_schema(feed_store: PostgresStore, pg_url: str) -> None:
    listener = Listener(pg_url, feed_store.schema)
    stranger = Listener(pg_url, "another_schema")
    try:
        listener.listen()
        stranger.listen()
        assert listener.wait(0) == frozenset()
        _write(feed_store, "a")
        assert listener.wait(30) == frozenset({"vectors"})
        assert stranger.wait(0) == frozenset()
        feed_store.write_blocking(lambda c: FEED.record(c, "quiet", "put", notify=False))
        assert listener.wait(0) == frozenset()
    finally:
        listener.close()
        stranger.close()


def test_a_listener_that_cannot_connect_returns_nothing_at_its_timeout() -> None:
    listener = Listener("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1", "robot_memory")
    try:
        assert listener.wait(0.01) == frozenset()
    finally:
        listener.close()


def test_migrating_twice_changes_nothing(feed_store: PostgresStore) -> None:
    again = migrate(feed_store)
    assert again.from_version == again.to_version == 1


@pytest.mark.parametrize("text", ["", "1:2", "a:b:", "5:3:", "3:9:2", "3:9:9"])
def test_a_malformed_cursor_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        Cursor.parse(text)


def test_a_cursor_round_trips_through_its_text() -> None:
    for cursor in (Cursor(5, 5), Cursor(3, 9, (3, 7))):
        assert Cursor.parse(str(cursor)) == cursor
    assert Cursor(3, 9, (3, 7)).sees(4)
    assert not Cursor(3, 9, (3, 7)).sees(7)
    assert not Cursor(3, 9).sees(9)


def test_entries_need_an_op_and_names_without_nul(feed_store: PostgresStore) -> None:
    bad: list[Callable[[Connection], None]] = [
        lambda c: FEED.record(c, "a", ""),
        lambda c: FEED.record(c, "a\x00", "put"),
        lambda c: FEED.acknowledge(c, "", Cursor(1, 1)),
    ]
    for fn in bad:
        with pytest.raises(InvalidInput):
            feed_store.write_blocking(fn)
    with pytest.raises(InvalidInput):
        ChangeFeed("")


def test_a_read_and_its_cursor_describe_the_callers_snapshot_not_the_latest_commit(feed_store: PostgresStore) -> None:
    before = feed_store.read_blocking(FEED.start)

    def read(c: Connection) -> tuple[Cursor, Batch | Reload, int]:
        opened = FEED.start(c)
        _write(feed_store, "meanwhile")  # commits on another connection while this snapshot is open
        row = c.execute("SELECT count(*) FROM change_log").fetchone()
        assert row is not None
        return opened, FEED.since(before, c), int(row[0])

    opened, result, count = feed_store.read_blocking(read)
    assert result == Batch((), opened)
    assert count == 0
    assert [e.ref for e in _read(feed_store, opened).entries] == ["meanwhile"]
