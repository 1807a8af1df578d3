"""The PostgreSQL processes' posting cache (`processes.postgres.postings`) answers a find's keyword
leg exactly as the SQL path (`store._Scored`) and as SQLite do — the same ids, the same order, the
very same doubles — through every kind of write, from any replica, or it does not answer and SQL
ranks: a snapshot older than the cache's, a mirror broken by hand. A pruned feed reads everything
again."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TypeVar

import pytest

from robot_mcp_memory.processes import ranking
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Phrases
from robot_mcp_memory.processes.postgres import postings
from robot_mcp_memory.processes.postgres import store as pg
from robot_mcp_memory.processes.postgres.postings import FEED, PostingCache
from robot_mcp_memory.processes.sqlite import postings as lite_postings
from robot_mcp_memory.processes.sqlite import search as lite_search
from robot_mcp_memory.processes.sqlite import store as lite_store
from robot_mcp_memory.search import fts
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from robot_mcp_memory.storage.sqlite import index_db
from tests.processes.sqlite.test_postings import ROBOTS, random_doc  # one corpus for both backends

pytestmark = pytest.mark.postgres

T = TypeVar("T")

TENANTS = (None, "group:g-1")
QUERIES = (
    "fetch the red parcel",
    "the",
    "deliver to the kitchen left",
    "open the door",
    "right door floor",
    "zebra",
    "deliver 12.5 to floor 1.2.10",
    "收发室 取包裹",
    "error E-42",
    "mailroom mailroom parcel",
)
VISIBLE: tuple[frozenset[str] | None, ...] = (None, frozenset({"rap-1", "shared"}), frozenset({"rare"}), frozenset())
NOW = "2026-01-02T00:00:00Z"


def lite_db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for step in index_db.MIGRATIONS:
        step(conn)
    return conn


def read(store: PostgresStore, fn: Callable[[Connection], T]) -> T:
    return store.read_blocking(fn)


def assert_cache_answers_as_sql(
    store: PostgresStore, cache: PostingCache, lite: sqlite3.Connection | None = None
) -> None:
    """In one snapshot: the cache's answers are the SQL path's, bit for bit (and SQLite's, with
    its own posting cache, when `lite` holds the same processes)."""
    lite_cache = lite_postings.PostingCache() if lite is not None else None

    def check(c: Connection) -> None:
        for query in QUERIES:
            phrases: Phrases = tuple(fts.phrases(query))
            assert cache.score(c, [pg._tokens_of(p) for p in phrases]) is not None, query
            cached, plain = pg.Snapshot(c, None, cache), pg.Snapshot(c)
            other = None if lite is None else lite_search.Snapshot(lite, None, lite_cache)
            assert cached.phrase_counts(phrases) == plain.phrase_counts(phrases), query
            if other is not None:
                assert cached.phrase_counts(phrases) == other.phrase_counts(phrases), query
            for visible in VISIBLE:
                for n in (1, 50):
                    got = cached.keyword_relevant(phrases, None, n, visible)
                    assert got == plain.keyword_relevant(phrases, None, n, visible), (query, visible, n)
                    if other is not None:
                        assert got == other.keyword_relevant(phrases, None, n, visible), (query, visible, n)
                for k in (1, 10):
                    for tenant in TENANTS:
                        hits = cached.keyword_top(phrases, None, k, visible, tenant)
                        mine = [(h.doc.id, h.relevance, h.score, h.fleet) for h in hits]
                        sql = plain.keyword_top(phrases, None, k, visible, tenant)
                        assert mine == [(h.doc.id, h.relevance, h.score, h.fleet) for h in sql], (query, visible, k)
                        if other is not None:
                            theirs = other.keyword_top(phrases, None, k, visible, tenant)
                            assert mine == [(h.doc.id, h.relevance, h.score, h.fleet) for h in theirs]

    read(store, check)


def write_round(
    store: PostgresStore, lite: sqlite3.Connection, rng: random.Random, ids: list[str], fresh: Iterator[int]
) -> None:
    """Random writes of every kind, in one transaction on each backend: saves of new and of
    changed processes, a change of owner alone (as a hand-over makes it), deletes, outcomes
    (counters only), postings written again (a reindex of one process)."""
    plan: list[tuple[str, str, ProcessDoc | None, str]] = []
    for _ in range(rng.randint(5, 30)):
        kind = rng.random()
        if kind < 0.3 or not ids:
            pid = f"doc-{next(fresh):05d}"
            ids.append(pid)
            plan.append(("save", pid, random_doc(rng, pid), ""))
        elif kind < 0.55:
            pid = rng.choice(ids)
            plan.append(("save", pid, random_doc(rng, pid), ""))
        elif kind < 0.65:
            plan.append(("owner", rng.choice(ids), None, rng.choice(ROBOTS)))
        elif kind < 0.75:
            plan.append(("delete", ids.pop(rng.randrange(len(ids))), None, ""))
        elif kind < 0.9:
            plan.append(("outcome", rng.choice(ids), None, rng.choice(("group:g-1", "group:g-2"))))
        else:
            plan.append(("reindex", rng.choice(ids), None, ""))

    def on_pg(c: Connection) -> None:
        for what, pid, doc, arg in plan:
            if what == "save":
                assert doc is not None
                pg.upsert(c, doc)
            elif what == "owner":
                c.execute("UPDATE processes SET robot = %s WHERE id = %s", (arg, pid))
            elif what == "delete":
                pg.delete_doc(c, pid)
            elif what == "outcome":
                c.execute("UPDATE processes SET success_count = success_count + 1 WHERE id = %s", (pid,))
                c.execute(
                    "INSERT INTO process_tenant_counts(process_id, tenant, failure_count) VALUES (%s, %s, 1) "
                    "ON CONFLICT (process_id, tenant) DO UPDATE SET failure_count = "
                    "process_tenant_counts.failure_count + 1",
                    (pid, arg),
                )
                c.execute("UPDATE processes SET failure_count = failure_count + 1 WHERE id = %s", (pid,))
            else:
                found = pg.select_one(c, pid)
                assert found is not None
                pg._index(c, found)

    store.write_blocking(on_pg)
    lite.execute("BEGIN")
    for what, pid, doc, arg in plan:
        if what == "save":
            assert doc is not None
            lite_store.upsert(lite, doc)
        elif what == "owner":
            lite.execute("UPDATE processes SET robot = ? WHERE id = ?", (arg, pid))
        elif what == "delete":
            lite_store.delete_doc(lite, pid)
        elif what == "outcome":
            lite.execute("UPDATE processes SET success_count = success_count + 1 WHERE id = ?", (pid,))
            lite.execute(
                "INSERT INTO process_tenant_counts(process_id, tenant, success_count, failure_count) "
                "VALUES (?, ?, 0, 1) ON CONFLICT(process_id, tenant) DO UPDATE SET failure_count = failure_count + 1",
                (pid, arg),
            )
            lite.execute("UPDATE processes SET failure_count = failure_count + 1 WHERE id = ?", (pid,))
    lite.execute("COMMIT")


@pytest.fixture
def repo(pg_store: PostgresStore) -> Iterator[pg.PostgresProcesses]:
    processes = pg.PostgresProcesses(pg_store)
    yield processes
    processes.close()


def fill(store: PostgresStore, docs: list[ProcessDoc]) -> None:
    def job(c: Connection) -> None:
        for d in docs:
            pg.upsert(c, d)

    store.write_blocking(job)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_cache_ranks_as_sql_and_as_sqlite_through_every_kind_of_write(
    repo: pg.PostgresProcesses, seed: int
) -> None:
    store, rng, lite = repo.db, random.Random(seed), lite_db()
    fresh = iter(range(1_000_000))
    ids: list[str] = []
    for _ in range(4):
        write_round(store, lite, rng, ids, fresh)  # ~70 processes, with ties (a small vocabulary)
    cache = PostingCache()
    assert_cache_answers_as_sql(store, cache, lite)
    assert cache.loads == 1
    for _ in range(4):
        write_round(store, lite, rng, ids, fresh)
        assert_cache_answers_as_sql(store, cache, lite)
    assert cache.loads == 1  # every change since was patched in, none read again
    assert cache.patched > 0


def test_outcomes_record_nothing_in_the_feed(repo: pg.PostgresProcesses) -> None:
    rng = random.Random(5)
    fill(repo.db, [random_doc(rng, f"d{i}") for i in range(20)])

    def entries(c: Connection) -> int:
        row = c.execute("SELECT count(*) FROM change_log WHERE component = %s", (FEED.component,)).fetchone()
        return int(row[0]) if row else 0

    before = read(repo.db, entries)
    asyncio.run(repo.record_outcome("d1", True, "ok"))
    assert read(repo.db, entries) == before
    asyncio.run(repo.save(random_doc(rng, "d1")))
    assert read(repo.db, entries) > before


def test_writes_through_one_replica_are_ranked_by_the_others_cache(pg_store: PostgresStore) -> None:
    """Two `PostgresProcesses` on one schema, each with its own cache: what one writes (a save, an
    owner handed over, a delete) the other's next find ranks, from its cache, as SQL does."""
    a, b = pg.PostgresProcesses(pg_store), pg.PostgresProcesses(pg_store)
    rng = random.Random(7)
    try:
        fill(pg_store, [random_doc(rng, f"d{i}") for i in range(40)])
        zebra = Query.parse("zebra parcel")

        def both(visible: frozenset[str] | None = None) -> tuple[list[str], list[str]]:
            got = asyncio.run(b.find(zebra, 5, visible))
            want = read(pg_store, lambda c: ranking.keyword_search(pg.Snapshot(c), zebra, 5, visible, None))
            return [h.doc.id for h in got], [h.doc.id for h in want]

        got, want = both()
        assert got == want
        assert "z" not in got
        assert b.postings.loads == 1
        doc = random_doc(rng, "z").model_copy(update={"title": "zebra", "robot": "unknown"})
        asyncio.run(a.save(doc))
        got, want = both()
        assert got == want
        assert got[0] == "z"
        assert both(frozenset({"unknown"})) == (["z"], ["z"])
        # an owner changed by another module's SQL (`PostgresOperations.hand_over_unknown`'s)
        pg_store.write_blocking(lambda c: c.execute("UPDATE processes SET robot = 'rap-9' WHERE robot = 'unknown'"))
        got, want = both(frozenset({"rap-9"}))
        assert got == want == ["z"]
        assert both(frozenset({"unknown"})) == ([], [])
        asyncio.run(a.delete("z"))
        got, want = both()
        assert got == want
        assert "z" not in got
        assert b.postings.loads == 1
        assert b.postings.patched >= 3
    finally:
        a.close()
        b.close()


def test_a_snapshot_older_than_the_cache_ranks_in_sql(repo: pg.PostgresProcesses) -> None:
    store, rng = repo.db, random.Random(13)
    fill(store, [random_doc(rng, f"d{i}") for i in range(40)])
    cache = PostingCache()
    phrases = tuple(fts.phrases("deliver the red parcel"))
    tokens = [pg._tokens_of(p) for p in phrases]
    with store.pool.connection() as old, old.transaction():
        old.execute(store._begin_read)
        before = pg.Snapshot(old).keyword_relevant(phrases, None, 50, None)  # the old snapshot starts here
        fill(store, [random_doc(rng, f"new{i}").model_copy(update={"title": "red parcel"}) for i in range(10)])
        assert read(store, lambda c: cache.score(c, tokens)) is not None  # the cache moves to a newer snapshot
        assert cache.score(old, tokens) is None  # and cannot answer for the older one
        got = pg.Snapshot(old, None, cache).keyword_relevant(phrases, None, 50, None)  # SQL, in the old snapshot
        assert got == before
        assert not any(pid.startswith("new") for pid, _ in got)
    assert read(store, lambda c: cache.score(c, tokens)) is not None
    assert cache.loads == 1


def test_a_pruned_feed_reads_everything_again(repo: pg.PostgresProcesses) -> None:
    store, rng = repo.db, random.Random(17)
    fill(store, [random_doc(rng, f"d{i}") for i in range(40)])
    cache = PostingCache(max_batch=1000)
    assert_cache_answers_as_sql(store, cache)
    fill(store, [random_doc(rng, f"d{i}") for i in range(10)])  # changes the cache has not read
    pruned = store.write_blocking(lambda c: FEED.prune(c, horizon=timedelta(0)))
    assert pruned.deleted > 0
    assert_cache_answers_as_sql(store, cache)
    assert cache.loads == 2


def test_many_changes_at_once_read_everything_again(repo: pg.PostgresProcesses) -> None:
    store, rng = repo.db, random.Random(19)
    fill(store, [random_doc(rng, f"d{i}") for i in range(60)])
    cache = PostingCache(max_batch=10)
    assert_cache_answers_as_sql(store, cache)
    asyncio.run(repo.reindex())  # every process's postings written again: all recorded
    assert_cache_answers_as_sql(store, cache)
    assert cache.loads == 2


def test_a_length_written_by_hand_turns_the_cache_off_until_the_next_write(repo: pg.PostgresProcesses) -> None:
    store, rng = repo.db, random.Random(23)
    fill(store, [random_doc(rng, f"d{i}") for i in range(30)])
    cache = PostingCache()
    tokens = [pg._tokens_of(p) for p in fts.phrases("red parcel")]
    assert read(store, lambda c: cache.score(c, tokens)) is not None
    store.write_blocking(lambda c: c.execute("UPDATE processes SET doclen = doclen + 1 WHERE id = 'd3'"))
    assert read(store, lambda c: cache.score(c, tokens)) is None  # the SQL path counts another length
    assert read(store, lambda c: cache.score(c, tokens)) is None  # and nothing was written since
    asyncio.run(repo.reindex())
    assert read(store, lambda c: cache.score(c, tokens)) is not None
    assert_cache_answers_as_sql(store, cache)


def test_saves_prune_the_feed_when_due_and_a_cache_behind_it_reads_everything_again(
    repo: pg.PostgresProcesses, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(29)
    query = Query.parse("fetch the red parcel")
    asyncio.run(repo.save(random_doc(rng, "a")))
    asyncio.run(repo.find(query, 5))
    assert repo.postings.loads == 1
    monkeypatch.setattr(postings, "FEED_HORIZON", timedelta(0))
    monkeypatch.setattr(postings, "PRUNE_EVERY_S", 0.0)
    doc = random_doc(rng, "b").model_copy(update={"title": "fetch the red parcel"})
    asyncio.run(repo.save(doc))  # prunes every entry, its own too (a horizon of 0)

    def entries(c: Connection) -> int:
        row = c.execute("SELECT count(*) FROM change_log WHERE component = %s", (FEED.component,)).fetchone()
        return int(row[0]) if row else 0

    assert read(repo.db, entries) == 0
    hits = asyncio.run(repo.find(query, 5))
    assert hits
    assert hits[0].doc.id == "b"
    assert repo.postings.loads == 2
