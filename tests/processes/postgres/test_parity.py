"""Cross-backend parity of keyword search: the same corpus and queries give the same ids, order
and scores on SQLite (FTS5's ``bm25()``) and PostgreSQL (`search.bm25` over FTS5's own tokens)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.postgres import store as pg
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.processes.sqlite import store as sqlite_store
from robot_mcp_memory.search import fts
from robot_mcp_memory.storage.postgres import PostgresStore
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
    weights = ", ".join(str(w) for w in sqlite_store.BM25_WEIGHTS)
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
    got = store.read_blocking(lambda c: pg.relevance(c, query))
    assert got == want
    assert want or query in ("zebra",), "a query of the corpus's words matches"


@pytest.mark.parametrize("visible", [None, frozenset({"rap-1", "shared"})])
@pytest.mark.parametrize("query", QUERIES)
def test_keyword_search_ranks_alike_on_both_backends(
    both: tuple[SqliteStore, PostgresStore], query: str, visible: frozenset[str] | None
) -> None:
    lite, store = both
    want = lite.read_blocking(lambda c: sqlite_store.search(c, query, 10, visible))
    got = store.read_blocking(lambda c: pg.search(c, query, 10, visible))
    assert [h.doc.id for h in got] == [h.doc.id for h in want]
    # SQLite's search may count a common phrase twice and halve back (its floor path), which can
    # move a score's last bit; the plain bm25 above is compared exactly.
    for g, w in zip(got, want, strict=True):
        assert g.relevance == pytest.approx(w.relevance, rel=1e-12)
        assert g.score == pytest.approx(w.score, rel=1e-12)
