"""Cross-backend parity of keyword search: the same corpus and queries give the same ids, order
and scores on SQLite (FTS5's ``bm25()``) and PostgreSQL (`search.bm25` over FTS5's own tokens) —
the raw keyword top and `find`'s answer, which `processes.ranking` plans on either backend's
snapshot (calibrated relevance, content words, agreement re-ranking)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from functools import partial

import psycopg
import pytest

from robot_mcp_memory.processes import ranking
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Hit
from robot_mcp_memory.processes.postgres import store as pg
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.processes.sqlite import search as sqlite_search
from robot_mcp_memory.processes.sqlite import store as sqlite_store
from robot_mcp_memory.search import fts
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from robot_mcp_memory.storage.sqlite import SqliteStore, index_db

pytestmark = pytest.mark.postgres

#: Our own words: stems that fold together (mop, mopping, mopped), rare and common words,
#: compounds ("mail room" / "mailroom"), dotted numbers, accents and a CJK title.
WORDS = (
    *("mop", "mopping", "mopped", "floor", "floors", "hall", "kitchen", "the", "a", "to", "of"),
    *("fetch", "fetching", "parcel", "parcels", "mail", "room", "mailroom", "deliver", "delivered"),
    *("door", "elevator", "charge", "charging", "dock", "battery", "red", "blue", "shelf"),
    *("café", "naïve", "firmware"),
)
TAGS = ("cleaning", "delivery", "charging", "kitchen", "mailroom")
ROBOTS = ("rap-1", "rap-2", "shared")
NUMBERS = ("1.2.10", "1.10.2", "12.5", "19.5")
CJK = ("把包裹送到收发室", "清洁厨房地板", "研究所的门")
QUERIES = (
    "mop the hall floor",
    "mopping",
    "the",
    "fetch a parcel from the mail room",
    "deliver parcels to the kitchen",
    "firmware 1.2.10",
    "12.5",
    "charge at the dock battery",
    "red blue door elevator",
    "cafe naive",
    "café",
    "收发室",
    "研究所",
    "zebra",
    "mailroom shelf",
    "floors floors floor",
    "Kitchen",
    "dock",
    "delivered",
    "a of to",
    # Slots the agreement re-ranking reads: a colour, a side, a count, on/off.
    "fetch the red parcel",
    "deliver the blue parcel to the kitchen door",
    "turn left at the red door",
    "charge two batteries at the dock",
    "turn off the elevator",
)


def corpus(seed: int = 7, n: int = 80) -> list[ProcessDoc]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(2, 14))
        body = " ".join(words)
        if rng.random() < 0.3:
            body += f" firmware {rng.choice(NUMBERS)}"
        title = " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))
        if i % 17 == 0:
            title = rng.choice(CJK)
        docs.append(
            ProcessDoc(
                id=f"p-{i:03d}",
                title=title,
                task_pattern=" ".join(rng.choices(WORDS, k=rng.randint(0, 3))),
                tags=tuple(rng.sample(TAGS, rng.randint(0, 2))),
                body=f"## Steps\n1. {body}\n",
                robot=rng.choice(ROBOTS),
                created="2026-01-01T00:00:00Z",
                updated="2026-01-01T00:00:00Z",
                success_count=rng.choice((0, 0, 1, 3, 9)),
                failure_count=rng.choice((0, 0, 1, 2)),
            )
        )
    return docs


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Iterator[tuple[SqliteStore, PostgresStore]]:
    """The corpus saved on each backend once for the module (the tests only read), each save as
    the stores' own `save_doc` makes it."""
    docs = corpus()
    lite = index_db.open_index(tmp_path_factory.mktemp("parity") / "index.db")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    store = PostgresStore.open(pg_url, schema=schema, max_size=2)
    try:
        PostgresProcesses(store)  # creates the tables
        now = "2026-01-01T00:00:00Z"
        lite.write_blocking(lambda c: [sqlite_store.save_doc(c, d, now) for d in docs])
        store.write_blocking(lambda c: [pg.save_doc(c, schema, d, now, lambda _o: True) for d in docs])
        yield lite, store
    finally:
        lite.close()
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize("query", QUERIES)
def test_relevance_is_fts5s_bm25_to_the_last_bit(both: tuple[SqliteStore, PostgresStore], query: str) -> None:
    lite, store = both
    expr = fts.any_of(fts.phrases(query))
    weights = ", ".join(str(w) for w in ranking.BM25_WEIGHTS)
    want = dict(
        lite.read_blocking(
            lambda c: c.execute(
                f"SELECT id, -bm25(processes_fts, {weights}) FROM processes_fts WHERE processes_fts MATCH ?",  # noqa: S608
                (expr,),
            ).fetchall()
        )
        if expr
        else {}
    )
    got = store.read_blocking(lambda c: pg.relevance(c, tuple(fts.phrases(query))))
    assert got == want
    assert want or query in ("zebra",), "a query of the corpus's words matches"


@pytest.mark.parametrize("visible", [None, frozenset({"rap-1", "shared"})])
@pytest.mark.parametrize("query", QUERIES)
def test_keyword_search_ranks_alike_on_both_backends(
    both: tuple[SqliteStore, PostgresStore], query: str, visible: frozenset[str] | None
) -> None:
    lite, store = both
    want = lite.read_blocking(lambda c: sqlite_search.search(c, tuple(fts.phrases(query)), 10, visible))
    got = store.read_blocking(lambda c: pg.search(c, tuple(fts.phrases(query)), 10, visible))
    assert_same_hits(got, want)


def assert_same_hits(got: list[Hit], want: list[Hit]) -> None:
    """Same ids in the same order, same relevances and scores. SQLite's search may count a
    common phrase twice and halve back (its floor path), which can move a score's last bit;
    the plain bm25 above is compared exactly."""
    assert [h.doc.id for h in got] == [h.doc.id for h in want]
    for g, w in zip(got, want, strict=True):
        assert g.relevance == pytest.approx(w.relevance, rel=1e-12)
        assert g.score == pytest.approx(w.score, rel=1e-12)
        assert g.fleet == w.fleet


@pytest.mark.parametrize("tenant", [None, "group:g1"])
@pytest.mark.parametrize("visible", [None, frozenset({"rap-1", "shared"})])
@pytest.mark.parametrize("query", QUERIES)
def test_find_answers_alike_on_both_backends(
    both: tuple[SqliteStore, PostgresStore], query: str, visible: frozenset[str] | None, tenant: str | None
) -> None:
    """`find` in keyword mode — calibrated relevance over the content words, agreement-aware —
    gives the same hits and scores: one plan (`ranking.keyword_search`) on either snapshot."""
    lite, store = both
    q = Query.parse(query)

    def on_sqlite(k: int) -> list[Hit]:
        return lite.read_blocking(lambda c: ranking.keyword_search(sqlite_search.Snapshot(c), q, k, visible, tenant))

    def on_postgres(k: int) -> list[Hit]:
        return store.read_blocking(lambda c: ranking.keyword_search(pg.Snapshot(c), q, k, visible, tenant))

    for k in (1, 3, 10):
        want, got = on_sqlite(k), on_postgres(k)
        assert_same_hits(got, want)
        assert all(0.0 <= h.relevance <= 1.0 for h in got)
    assert want or not q.searchable or query == "zebra", "a query of the corpus's words is answered"


def test_the_agreement_re_ranking_changes_answers_of_this_corpus(both: tuple[SqliteStore, PostgresStore]) -> None:
    """The comparison above covers documents the query's slots demote: for some queries the
    agreement-aware top differs from the raw keyword top (order or scores)."""
    _, store = both
    changed = []
    for q in map(Query.parse, QUERIES):
        if not q.slots:
            continue
        agreed = store.read_blocking(partial(_agreeing, q))
        plain = store.read_blocking(partial(_plain, q))
        if [(h.doc.id, h.score) for h in agreed] != [(h.doc.id, h.score) for h in plain]:
            changed.append(q.text)
    assert changed


def _agreeing(q: Query, c: Connection) -> list[Hit]:
    return ranking.agreeing_search(pg.Snapshot(c), q, 3, None)


def _plain(q: Query, c: Connection) -> list[Hit]:
    return pg.search(c, q.phrases, 3, None)
