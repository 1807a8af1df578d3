"""`search.search` joins only the matches above a relevance floor (or, for robots that own few
documents, runs a plain join); either way it must rank exactly as a plain join over every match
does (score = -bm25 × (s+1)/(s+f+2), descending, then id)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_mcp_memory.processes import ranking
from robot_mcp_memory.processes.ports import Hit
from robot_mcp_memory.processes.sqlite import search as sql
from robot_mcp_memory.search import fts
from tests.processes.tie_corpus import NUMBERS, QUERIES, WORDS, tie_heavy_db


def plain_join(
    conn: sqlite3.Connection, query: str, k: int, visible: Collection[str] | None
) -> list[tuple[str, float, float]]:
    """The ranking query `search` ran before the floor, every match joined to its row:
    (id, relevance, score) best first."""
    expr = fts.match_expression(query)
    if expr is None:
        return []
    where, params = sql.visible_clause(visible, "p.robot")
    w = ",".join(str(x) for x in ranking.BM25_WEIGHTS)
    score = f"-bm25(processes_fts, {w}) * (p.success_count + 1.0) / (p.success_count + p.failure_count + 2.0)"
    rows = conn.execute(
        f"SELECT p.id, -bm25(processes_fts, {w}) AS relevance, {score} AS score "  # noqa: S608 - fixed names
        "FROM processes_fts JOIN processes p ON p.id = processes_fts.id "
        f"WHERE processes_fts MATCH ? AND {where} ORDER BY score DESC, p.id LIMIT ?",
        [expr, *params, k],
    )
    return [(r[0], float(r[1]), float(r[2])) for r in rows]


def assert_ranks_like_the_plain_join(
    conn: sqlite3.Connection, query: str, k: int, visible: Collection[str] | None
) -> None:
    """`search` returns the plain join's rows in its order — up to scores that agree to 12
    significant digits: where common words were skipped each phrase was counted twice and the
    score halved back (`fts.restricted_expression`), which can move the last bit of a score and
    so the order of two that are otherwise equal (or which of them is the k-th)."""
    got = sql.search(conn, tuple(fts.phrases(query)), k, visible)
    want = plain_join(conn, query, k, visible)
    exact = {pid: score for pid, _, score in plain_join(conn, query, k + 50, visible)}
    assert len(got) == len(want), query
    for hit, (_, _, score) in zip(got, want, strict=True):
        assert hit.doc.id in exact, query  # a real match, within reach of the top k
        assert exact[hit.doc.id] == pytest.approx(score, rel=1e-12), query  # the score of its place
        assert hit.relevance * hit.doc.reliability == pytest.approx(score, rel=1e-12), query


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    """~700 documents over a tiny vocabulary: many identical texts and counts, so scores tie."""
    c = tie_heavy_db(7, counts=True, edit=lambda d: {"success_count": d.success_count + 1})
    yield c
    c.close()


@pytest.mark.parametrize("k", [1, 3, 10, 50])
@pytest.mark.parametrize("visible", [None, {"rap-1"}, {"rap-1", "shared"}, {"rare"}, {"rare", "g1"}, {"nobody"}, set()])
def test_search_ranks_exactly_like_a_join_over_every_match(
    conn: sqlite3.Connection, k: int, visible: set[str] | None
) -> None:
    for query in QUERIES:
        assert_ranks_like_the_plain_join(conn, query, k, visible)


def test_common_words_were_skipped_and_rechecked_on_this_corpus(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison above covers every path: lists the rarer words found alone, lists found
    once the rarest skipped word chose matches too (`search._by_rarer_phrases`), and misses."""
    runs: list[list[float]] = []
    inner = sql._search

    def counted(
        c: sqlite3.Connection,
        expr: str,
        k: int,
        visible: Collection[str] | None,
        scale: float = 1.0,
        tenant: str | None = None,
    ) -> list[Hit]:
        runs[-1].append(scale)
        return inner(c, expr, k, visible, scale, tenant)

    monkeypatch.setattr(sql, "_search", counted)
    for k in (1, 3, 10):
        for query in QUERIES:
            for visible in (None, {"rap-1"}, {"rare", "g1"}):
                runs.append([])
                sql.search(conn, tuple(fts.phrases(query)), k, visible)
    assert [0.5] in runs  # the rarer words alone
    assert [0.5, 0.5] in runs  # on a second try, with the rarest word skipped before
    assert any(r[-1] == 1.0 and 0.5 in r for r in runs)  # every word, after a miss


def test_search_scores_are_relevance_times_reliability(conn: sqlite3.Connection) -> None:
    hits = sql.search(conn, tuple(fts.phrases("fetch the red parcel")), 10, None)
    assert len(hits) == 10
    assert all(h.score == h.relevance * h.doc.reliability for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.sampled_from([*WORDS, *NUMBERS, "zebra", '"', "*", "OR", "NEAR", "(", "门", "🤖"]), min_size=1, max_size=12
    ).map(" ".join),
    st.sampled_from([1, 3, 10]),
    st.sampled_from([None, {"rap-1"}, {"rare", "g1"}]),
)
def test_any_query_ranks_exactly_like_a_join_over_every_match(
    conn: sqlite3.Connection, query: str, k: int, visible: set[str] | None
) -> None:
    assert_ranks_like_the_plain_join(conn, query, k, visible)
