"""Keyword recall's shortcuts rank exactly like the plain query.

Two shortcuts (ranking_repo._ranking_sql, ranking_repo._ranked_numbers): only matches that can reach the
`n`-th best score among the most relevant ones are joined to their rows, and the commonest
phrases are first left out of choosing matches when a checked bound shows they cannot change the
list. Both are compared here with the plain query (every match scored and joined) over a corpus
full of common words, ties, ages, sources, robots and filters."""

from __future__ import annotations

import time
from typing import Any

import pytest
from bench.experience_corpus import QUERIES, corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.sqlite import ranking_repo
from robot_mcp_memory.experiences.sqlite.filter_sql import compile_filter
from robot_mcp_memory.experiences.sqlite.ranking_repo import Scope
from robot_mcp_memory.search import segment
from robot_mcp_memory.tenancy.principal import STDIO
from tests.experiences.conftest import ranking_corpus

EXTRA_QUERIES = (
    "grip force",  # two words in every other memory
    "grip force approach angle speed",
    "the grasp",
    "grasp red mug zebra",  # a word no memory holds
    "zebra",
    "mug",
    "grasp grasp grasp",
    "grip force 12.5 N",  # dotted numbers: a phrase and a prefix phrase each
    "approach at 0.35 m/s and 40 degrees",
    "0.5",
)
FILTERS: tuple[dict[str, Any] | None, ...] = (None, {"task.success": True}, {"params.grip_force": {"$gte": 30}})


def _plain(conn: Any, scope: Scope, phrases: list[str], n: int) -> list[tuple[Any, ...]]:
    sql, params = ranking_repo._ranking_sql(scope, " OR ".join(phrases), "score", n, floored=False)
    return list(conn.execute(sql, params).fetchall())


def _count_scales(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The `scale` of every ranking query built from now on (0.5: common phrases were skipped)."""
    scales: list[float] = []
    ranking_sql = ranking_repo._ranking_sql

    def counted(*args: Any, **kwargs: Any) -> tuple[str, list[Any]]:
        scales.append(kwargs.get("scale", 1.0))
        return ranking_sql(*args, **kwargs)

    monkeypatch.setattr(ranking_repo, "_ranking_sql", counted)
    return scales


def _score(row: tuple[Any, ...]) -> float:
    rel, w, confd = row[1], row[2], row[3]
    return float(rel * w * (0.5 + 0.5 * confd))


def _same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    """The plain query's rows in its order — up to scores that agree to 9 significant digits:
    skipping common phrases counts each phrase twice and halves the relevance back, which can
    move its last bit and so swap two scores that are otherwise equal."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if g[0] == w[0]:
            assert g[1] == pytest.approx(w[1], rel=1e-9)  # relevance, halved back after the doubling
            assert g[2:5] == w[2:5]
        else:
            assert _score(g) == pytest.approx(_score(w), rel=1e-9), (g, w)


async def test_floor_and_skipping_rank_exactly_like_the_plain_query(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await ranking_corpus(memory)

    scaled = _count_scales(monkeypatch)
    monkeypatch.setattr(ranking_repo, "SHORTCUTS_FROM", 0)  # this store is small: take them anyway
    robots = memory.index.read_blocking(
        lambda c: sorted(r for (r,) in c.execute("SELECT DISTINCT robot FROM memories"))
    )
    assert len(robots) == 2
    assert "rap-9" in robots
    now = time.time()
    compared = skipped = missed = 0
    for visible in (None, frozenset({robots[0], "shared"}), frozenset({"rap-9"})):
        for coll in ("default", "kitchen-lab"):
            for spec in FILTERS:
                scope = Scope(visible, coll, 0.3, now, condition=compile_filter(spec, "m.context"))
                for q in (*QUERIES, *EXTRA_QUERIES):
                    phrases = segment.match_phrases(q)
                    for n in (1, 5, 50):
                        before = len(scaled)
                        got = memory.index.read_blocking(
                            lambda c: ranking_repo._ranked_numbers(c, scope, phrases, "score", n, True)  # noqa: B023
                        )
                        ran = scaled[before:]
                        skipped += 0.5 in ran and ran[-1] == 0.5
                        missed += 0.5 in ran and ran[-1] == 1.0
                        want = memory.index.read_blocking(lambda c: _plain(c, scope, phrases, n))  # noqa: B023
                        _same(got, want)
                        floored = memory.index.read_blocking(
                            lambda c: c.execute(
                                *ranking_repo._ranking_sql(scope, " OR ".join(phrases), "score", n, floored=True)  # noqa: B023
                            ).fetchall()
                        )
                        _same(floored, want)
                        compared += 1
    assert compared == 3 * 2 * 3 * (len(QUERIES) + len(EXTRA_QUERIES)) * 3
    # The plan follows the filters' reach: broad ones (about 7 memories in 10 succeeded) take the
    # floor and the skipping, a narrow one (docking, about 1 in 10) the plain query.
    for spec, broad in (({"task.success": True}, True), ({"task.name": "dock"}, False), (None, True)):
        scope = Scope(None, "default", 0.3, now, condition=compile_filter(spec, "m.context"))
        share = memory.index.read_blocking(lambda c: ranking_repo._pass_share(c, scope))  # noqa: B023
        assert (share >= ranking_repo.BROAD_SHARE) is broad, (spec, share)
    # Both paths ran: lists found by the rarer phrases alone, and misses that let every phrase choose.
    assert skipped > 100, skipped
    assert missed > 50, missed


async def test_cjk_and_prefix_phrases_rank_exactly_like_the_plain_query(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segmented Chinese, a lone character (a prefix phrase) and kana bigrams through the same
    shortcuts, with a word in most memories so that skipping applies."""
    monkeypatch.setattr(ranking_repo, "SHORTCUTS_FROM", 0)
    objects = ("杯子", "瓶子", "盒子", "钥匙", "水壶")
    places = ("厨房", "实验室", "仓库")
    items = [
        (f"机器人在{places[i % 3]}抓取红色的{objects[i % 5]}，夹持力 {i % 17} 牛", {"task": {"success": i % 3 != 0}})
        for i in range(240)
    ]
    items += [(f"ロボットが{objects[i % 5]}をつかむ {i}", {}) for i in range(40)]
    await memory.experiences.learn_many(STDIO, items)
    now = time.time()
    scope = Scope(None, "default", 0.0, now)
    scaled = _count_scales(monkeypatch)
    for q in ("抓取红色的杯子", "机器人 厨房 钥匙", "杯", "つかむ 水壶", "实验室 红色"):
        phrases = segment.match_phrases(q)
        for n in (1, 5, 20):

            def both(c: Any, p: list[str] = phrases, k: int = n) -> tuple[list[Any], list[Any]]:
                return ranking_repo._ranked_numbers(c, scope, p, "score", k, True), _plain(c, scope, p, k)

            got, want = memory.index.read_blocking(both)
            assert want, q
            _same(got, want)
    assert 0.5 in scaled  # the skipping ran on these scripts too


async def test_any_query_text_ranks_exactly_like_the_plain_query(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile and odd query text (quotes, FTS5 operators, CJK, emoji, 32 terms) through the
    shortcuts: never an error, always the plain query's answer."""
    monkeypatch.setattr(ranking_repo, "SHORTCUTS_FROM", 0)
    items = list(corpus(800, seed=11))
    await memory.experiences.learn_many(STDIO, [(it.insight, it.context) for it in items if it.collection == "default"])
    now = time.time()
    scope = Scope(None, "default", 0.3, now)
    words = st.sampled_from(
        [
            "grasp",
            "the",
            "red",
            "mug",
            "grip",
            "force",
            '"',
            "*",
            "NEAR",
            "AND",
            "OR",
            "-",
            "(",
            "杯子",
            "抓",
            "つかむ",
            "🤖",
            "12.5",
            "0.3",
            "1.2.10",
            "12.50N",
        ]
    )

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(words, min_size=1, max_size=40).map(" ".join), st.sampled_from([1, 5, 20]))
    def check(query: str, n: int) -> None:
        phrases = segment.match_phrases(query)
        if not phrases:
            return

        def both(c: Any) -> tuple[list[Any], list[Any]]:
            return ranking_repo._ranked_numbers(c, scope, phrases, "score", n, True), _plain(c, scope, phrases, n)

        got, want = memory.index.read_blocking(both)
        _same(got, want)

    check()
