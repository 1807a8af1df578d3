"""A keyword find counts how many documents hold each phrase of its query once, and every part
of it (the calibration bound, the keyword list, each search of the agreement pool) uses that
one count: on a query whose every word matches nearly every document each count walks a whole
posting list."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from robot_mcp_memory.processes import ranking
from robot_mcp_memory.processes.sqlite import store as sql
from robot_mcp_memory.processes.sqlite.search import Snapshot
from robot_mcp_memory.search.embedders import HashingEmbedder
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.sqlite import vectorstore
from robot_mcp_memory.search.sqlite.vectorstore import VectorCache
from tests.processes.tie_corpus import tie_heavy_db

#: The statement `_doc_counts` runs (one per count of a query's phrases).
COUNT_SQL = "SELECT (SELECT count(*) FROM processes), "


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    c = tie_heavy_db(7, counts=True, edit=lambda d: {"success_count": d.success_count + 1})
    yield c
    c.close()


def _counts_run(conn: sqlite3.Connection, run: object) -> int:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        assert callable(run)
        run()
    finally:
        conn.set_trace_callback(None)
    return sum(s.startswith(COUNT_SQL) for s in seen)


@pytest.mark.parametrize("query", ["fetch the red parcel", "deliver the blue parcel to the kitchen door"])
def test_a_keyword_find_counts_its_phrases_once(conn: sqlite3.Connection, query: str) -> None:
    q = Query.parse(query)
    assert _counts_run(conn, lambda: ranking.keyword_search(Snapshot(conn), q, 3, None)) == 1
    # A colour the query names makes the agreement pool search more than once: still one count.
    assert _counts_run(conn, lambda: ranking.keyword_search(Snapshot(conn), q, 3, ["rap-1", "shared"])) == 1


def test_the_hybrid_candidates_count_their_phrases_once(conn: sqlite3.Connection) -> None:
    """The keyword top 50 and the bound calibrating it read one count (`hybrid_candidates`)."""
    emb = HashingEmbedder(32)
    docs = list(sql.each_doc(conn))
    for doc, vec in zip(docs, emb.embed([sql.embed_text(d) for d in docs]), strict=True):
        vectorstore.upsert(conn, "process", doc.id, emb.model_id, vec)
    query = Query.parse("fetch the red parcel from the mailroom")
    qvec = emb.embed([query.text])[0]
    got: list[ranking.Candidates | None] = []
    snap = Snapshot(conn, VectorCache())
    runs = _counts_run(conn, lambda: got.append(ranking.hybrid_candidates(snap, query, qvec, emb.model_id, None)))
    assert got[0] is not None
    assert got[0].keyword  # the keyword leg ran
    assert runs == 1
    counted = ranking.count_phrases(snap, query.phrases)
    assert ranking.keyword_leg(snap, query, 50, None, counted) == ranking.keyword_leg(snap, query, 50, None)
    assert ranking.query_bound(snap, query, counted) == ranking.query_bound(snap, query)


def test_counts_of_other_phrases_are_not_used(conn: sqlite3.Connection) -> None:
    snap = Snapshot(conn)
    other = ranking.count_phrases(snap, Query.parse("kitchen door").phrases)
    query = Query.parse("fetch the red parcel")
    assert _counts_run(conn, lambda: ranking.query_bound(snap, query, other)) == 1
    assert ranking.query_bound(snap, query, other) == ranking.query_bound(snap, query)
