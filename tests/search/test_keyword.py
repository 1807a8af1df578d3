"""`store.keyword_candidates`: the keyword list of hybrid search.

It ranks on FTS5 rowids and joins only the matches above a floor to their ids and rows; it must
return exactly what a plain join over every match returns (the query it replaced): the `n` best
visible matches by ``-bm25``, then id."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Collection, Iterator

import pytest

from robot_mcp_memory import db
from robot_mcp_memory import store as sql
from robot_mcp_memory.docmodel import ProcessDoc
from robot_mcp_memory.search import fts

WORDS = ("fetch", "deliver", "parcel", "mailroom", "kitchen", "door", "elevator", "red", "blue", "floor", "the")
ROBOTS = ("rap-1", "rap-2", "g1", "shared")
QUERIES = ("fetch the red parcel", "the", "deliver to the kitchen", "elevator floor", "blue door mailroom", "zebra")


def plain_join(conn: sqlite3.Connection, expr: str, n: int, visible: Collection[str] | None) -> list[tuple[str, float]]:
    """Every match joined to its row, then ranked: what `keyword_candidates` ran before."""
    where, params = sql._visible_clause(visible, "p.robot")
    w = ",".join(str(x) for x in sql.BM25_WEIGHTS)
    rows = conn.execute(
        f"SELECT p.id, -bm25(processes_fts, {w}) AS relevance "  # noqa: S608 - fixed names
        "FROM processes_fts JOIN processes p ON p.id = processes_fts.id "
        f"WHERE processes_fts MATCH ? AND {where} ORDER BY relevance DESC, p.id LIMIT ?",
        [expr, *params, n],
    )
    return [(r[0], float(r[1])) for r in rows]


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    """~700 documents over a tiny vocabulary: many identical texts, so relevances tie."""
    c = sqlite3.connect(":memory:", isolation_level=None)
    for step in db.MIGRATIONS:
        step(c)
    rng = random.Random(11)
    docs = []
    for i in range(700):
        words = rng.choices(WORDS, k=rng.randint(1, 6))
        docs.append(
            ProcessDoc(
                id=f"doc-{i:04d}",
                title=" ".join(words[:3]),
                body=" ".join(words) + "\n",
                robot="rare" if i % 100 == 0 else rng.choice(ROBOTS),
                created="2026-01-01T00:00:00Z",
                updated="2026-01-01T00:00:00Z",
            )
        )
    for d in docs:
        sql.upsert(c, d)
    for d in rng.sample(docs, 150):  # re-indexed rows: FTS rowids no longer follow the table's
        sql.upsert(c, d.model_copy(update={"title": d.title + " again"}))
    yield c
    c.close()


@pytest.mark.parametrize("n", [1, 3, 50, 200])
@pytest.mark.parametrize("visible", [None, {"rap-1"}, {"rap-1", "shared"}, {"rare"}, {"nobody"}, set()])
def test_keyword_candidates_rank_exactly_like_a_join_over_every_match(
    conn: sqlite3.Connection, n: int, visible: set[str] | None
) -> None:
    for query in QUERIES:
        expr = sql.keyword_expression(conn, query)
        assert expr is not None
        got = sql.keyword_candidates(conn, query, n, visible)
        assert got == plain_join(conn, expr, n, visible), query
        if visible is None and query != "zebra":
            assert len(got) == min(n, len(plain_join(conn, expr, 10_000, None)))


def test_a_query_with_nothing_searchable_has_no_candidates(conn: sqlite3.Connection) -> None:
    assert sql.keyword_candidates(conn, "?! --", 50, None) == []
    assert fts.match_expression("?! --") is None
