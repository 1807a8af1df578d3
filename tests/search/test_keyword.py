"""`store.keyword_candidates`: the keyword list of hybrid search.

It ranks on FTS5 rowids, joins only the matches above a floor to their ids and rows, and lets a
query's common words choose no matches when that provably changes nothing; it must return
exactly what a plain join over every match of every word returns (the query it replaced): the
`n` best visible matches by ``-bm25``, then id."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator

import pytest

from robot_mcp_memory.processes import ranking
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.sqlite import search as keyword_sql
from robot_mcp_memory.processes.sqlite import store as sql
from robot_mcp_memory.search import fts
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.storage.sqlite import index_db as db
from tests.processes.tie_corpus import QUERIES, tie_heavy_db


def plain_join(
    conn: sqlite3.Connection, query: str, n: int, visible: Collection[str] | None
) -> list[tuple[str, float]]:
    """Every match of every content word joined to its row, then ranked: what
    `keyword_candidates` ran before."""
    expr = fts.match_expression(" ".join(fts.content_terms(query)))
    assert expr is not None
    where, params = keyword_sql.visible_clause(visible, "p.robot")
    w = ",".join(str(x) for x in ranking.BM25_WEIGHTS)
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
    c = tie_heavy_db(11, counts=False, edit=lambda d: {"title": d.title + " again"})
    yield c
    c.close()


@pytest.mark.parametrize("n", [1, 3, 50, 200])
@pytest.mark.parametrize("visible", [None, {"rap-1"}, {"rap-1", "shared"}, {"rare"}, {"nobody"}, set()])
def test_keyword_candidates_rank_exactly_like_a_join_over_every_match(
    conn: sqlite3.Connection, n: int, visible: set[str] | None
) -> None:
    for query in QUERIES:
        got = keyword_sql.keyword_candidates(conn, Query.parse(query).phrases, n, visible)
        assert same(got, plain_join(conn, query, n, visible)), query
        if visible is None and query != "zebra":
            assert len(got) == min(n, len(plain_join(conn, query, 10_000, None)))


def same(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> bool:
    """Same ids in the same order, same relevances (to rounding: a restricted expression scores
    each phrase twice and halves the sum)."""
    return [i for i, _ in got] == [i for i, _ in want] and all(
        g == pytest.approx(w, rel=1e-12) for (_, g), (_, w) in zip(got, want, strict=True)
    )


def ranking_queries(conn: sqlite3.Connection, query: str, n: int) -> list[str]:
    """The ranking statements `keyword_candidates` runs for `query`, parameters expanded."""
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        keyword_sql.keyword_candidates(conn, Query.parse(query).phrases, n, None)
    finally:
        conn.set_trace_callback(None)
    return [s for s in seen if "bm25(" in s]


def test_a_query_with_nothing_searchable_has_no_candidates(conn: sqlite3.Connection) -> None:
    assert keyword_sql.keyword_candidates(conn, Query.parse("?! --").phrases, 50, None) == []
    assert (
        keyword_sql.keyword_candidates(conn, Query.parse("zebra yak").phrases, 50, None) == []
    )  # words no document holds
    assert fts.match_expression("?! --") is None


def _store(docs: list[tuple[str, str, str]]) -> sqlite3.Connection:
    c = sqlite3.connect(":memory:", isolation_level=None)
    for step in db.MIGRATIONS:
        step(c)
    for pid, title, body in docs:
        sql.upsert(c, ProcessDoc(id=pid, title=title, body=body, created="x", updated="x"))
    return c


def _corpus() -> list[tuple[str, str, str]]:
    """Every document mentions the reception (a common word); 'cup' and 'tray' are rare."""
    docs = [(f"tray-{i:03d}", f"Fetch the tray {i}", "Ask reception first.") for i in range(90)]
    docs += [(f"cup-{i:03d}", f"Fetch the cup {i}", "Ask reception first.") for i in range(60)]
    # As long as each "cup" document, so only the common word can tell them apart.
    docs.append(("cup-at-reception", "Fetch cup reception 7", "Ask reception first."))
    return docs


def test_a_common_word_stops_choosing_matches_once_rare_ones_fill_the_list() -> None:
    c = _store(_corpus())
    ran = ranking_queries(c, "the cup at the reception", 50)
    assert len(ran) == 1
    assert """'("cup") AND (""" in ran[0]  # only "cup" documents were scored
    got = keyword_sql.keyword_candidates(c, Query.parse("the cup at the reception").phrases, 50, None)
    assert len(got) == 50
    assert all(pid.startswith("cup-") for pid, _ in got)  # no tray document holding only "reception"
    # The common word still counts: it breaks the tie among the otherwise equal "cup" documents.
    assert got[0][0] == "cup-at-reception"
    assert same(got, plain_join(c, "the cup at the reception", 50, None))


def test_the_cut_keeps_a_rare_words_document_first() -> None:
    c = _store(_corpus())
    got = keyword_sql.keyword_candidates(c, Query.parse("reception cup 7").phrases, 50, None)
    assert {got[0][0], got[1][0]} == {"cup-007", "cup-at-reception"}
    assert same(got, plain_join(c, "reception cup 7", 50, None))


def test_a_query_made_only_of_common_words_still_finds_documents() -> None:
    c = _store(_corpus())
    assert len(keyword_sql.keyword_candidates(c, Query.parse("reception ask").phrases, 50, None)) == 50


def test_a_common_word_chooses_matches_again_when_the_rare_ones_are_too_few() -> None:
    c = _store(_corpus())
    # "cup" alone holds 61 documents: not enough for a top 100, so "reception" fills it up. The
    # counts say so before any scoring: only the plain query runs.
    ran = ranking_queries(c, "cup reception", 100)
    assert len(ran) == 1
    assert """MATCH '"cup" OR "reception"'""" in ran[0]
    got = keyword_sql.keyword_candidates(c, Query.parse("cup reception").phrases, 100, None)
    assert len(got) == 100
    assert sum(pid.startswith("tray-") for pid, _ in got) == 39
    assert same(got, plain_join(c, "cup reception", 100, None))


def test_the_rarest_skipped_word_chooses_matches_before_every_word_does() -> None:
    """A version in 3 documents cannot fill a top 5 (the counts say so: it is not tried alone),
    so the place word (in 60 of 400) chooses matches too, and "firmware", in every document,
    still does not: the query scores 63 documents instead of 400. Before, a miss went straight
    to every word."""
    docs = [(f"flash-{i:03d}", f"Flash the firmware {i}", "Check the version first.") for i in range(337)]
    docs += [(f"kitchen-{i:03d}", f"Flash the firmware in the kitchen {i}", "") for i in range(60)]
    docs += [(f"v293-{i}", f"Flash the firmware to 2.9.3 {i}", "") for i in range(3)]
    c = _store(docs)
    query = "firmware 2.9.3 kitchen"
    ran = ranking_queries(c, query, 5)
    assert len(ran) == 1
    assert """'("2.9.3" OR "kitchen") AND (""" in ran[0]
    got = keyword_sql.keyword_candidates(c, Query.parse(query).phrases, 5, None)
    assert [pid for pid, _ in got[:3]] == ["v293-0", "v293-1", "v293-2"]
    assert same(got, plain_join(c, query, 5, None))
