"""A keyword find counts how many documents hold each phrase of its query once, and every part
of it (the calibration bound, the keyword list, each search of the agreement pool) uses that
one count: on a query whose every word matches nearly every document each count walks a whole
posting list."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from robot_mcp_memory.processes.sqlite import store as sql
from robot_mcp_memory.search import fts
from robot_mcp_memory.search.embedders import HashingEmbedder
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
    assert _counts_run(conn, lambda: sql.keyword_search(conn, query, 3, None)) == 1
    # A colour the query names makes the agreement pool search more than once: still one count.
    assert _counts_run(conn, lambda: sql.keyword_search(conn, query, 3, ["rap-1", "shared"])) == 1


def test_the_hybrid_candidates_count_their_phrases_once(conn: sqlite3.Connection) -> None:
    """The keyword top 50 and the bound calibrating it read one count (`hybrid_candidates`)."""
    emb = HashingEmbedder(32)
    docs = list(sql.each_doc(conn))
    for doc, vec in zip(docs, emb.embed([sql.embed_text(d) for d in docs]), strict=True):
        vectorstore.upsert(conn, "process", doc.id, emb.model_id, vec)
    query = "fetch the red parcel from the mailroom"
    qvec = emb.embed([query])[0]
    got: list[sql.Candidates | None] = []
    runs = _counts_run(
        conn, lambda: got.append(sql.hybrid_candidates(conn, query, qvec, emb.model_id, None, VectorCache()))
    )
    assert got[0] is not None
    assert got[0].keyword  # the keyword leg ran
    assert runs == 1
    counted = sql.count_phrases(conn, " ".join(fts.content_terms(query)))
    assert sql.keyword_leg(conn, query, 50, None, counted) == sql.keyword_leg(conn, query, 50, None)
    assert sql.query_bound(conn, query, counted) == sql.query_bound(conn, query)


def test_counts_of_other_phrases_are_not_used(conn: sqlite3.Connection) -> None:
    other = sql.count_phrases(conn, "kitchen door")
    assert _counts_run(conn, lambda: sql.query_bound(conn, "fetch the red parcel", other)) == 1
    assert sql.query_bound(conn, "fetch the red parcel", other) == sql.query_bound(conn, "fetch the red parcel")
