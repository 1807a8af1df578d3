"""Ranking memories in SQL: every list recall, hybrid recall and proactive recall read.

A `Scope` is everything that decides *whether* a memory may be returned; `rank` orders those that
pass — by score (relevance × source weight × (0.5 + 0.5 × decayed confidence)), by relevance, by
distance or by the spatial blend — in one ``SELECT`` with every filter in its ``WHERE``, so a filter
is never a post-filter over the top few text hits. Only ids and numbers travel through the sort;
the rows of the few kept are read after (`storage.rows_of`). `weighed` and `weighed_ids` are the
same lists as numbers only, for hybrid fusion; `ids_in_scope` and `ids_passing` let the vector
list rank within the filters.

Contract:

- every plan a text query may take — the plain query, the floored one, phrase skipping, the
  keyword cache's given rows — returns the same memories in the same order (the skipping path's
  relevance may differ in its last bit: docs/search.md); only its cost differs
  (tests/experiences/test_recall_floor.py, tests/experiences/test_keyword_cache.py);
- the module's constants and `_pass_share` choose a plan and never change an answer; the
  figures behind their values are in docs/search.md, "Why these constants".
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from robot_mcp_memory import jsonvalue
from robot_mcp_memory.experiences.filters import json_path
from robot_mcp_memory.experiences.model import DECAY_FLOOR, HALF_LIFE_S, MAX_SOURCE_WEIGHT, Spatial, dist2_of
from robot_mcp_memory.experiences.ports import Order, Ranked, Weighed
from robot_mcp_memory.experiences.sqlite.filter_sql import Condition
from robot_mcp_memory.experiences.sqlite.keyword_repo import KeywordCache
from robot_mcp_memory.experiences.sqlite.storage import BM25_WEIGHTS, rows_of
from robot_mcp_memory.search import bm25, fts


@dataclass(frozen=True)
class Scope:
    """Everything that decides *whether* a memory may be returned (never how it ranks)."""

    visible: frozenset[str] | None
    collection: str
    min_confidence: float
    now: float
    session_id: str | None = None
    exclude_session: str | None = None
    condition: Condition = field(default_factory=Condition)
    spatial: Spatial | None = None


def _dist2(spatial: Spatial | None) -> tuple[str, list[Any]]:
    """Squared Euclidean distance from the coordinate list at `spatial.path` to its target, in
    SQL; NULL when a memory lacks a numeric coordinate."""
    if spatial is None:
        return "NULL", []
    base = json_path(spatial.path)
    squares, params = [], []
    for i, x in enumerate(spatial.target):
        p = f"{base}[{i}]"
        squares.append(
            "(CASE WHEN json_type(m.context, ?) IN ('integer', 'real') THEN pow(json_extract(m.context, ?) - ?, 2) END)"
        )
        params.extend([p, p, x])
    return f"({' + '.join(squares)})", params


#: Keyword recall joins to their rows only the matches that can reach the top: the `n`-th best
#: score among the ``FLOOR_POOL_FACTOR × n`` most relevant matches (at least `FLOOR_POOL_MIN`) is
#: a floor (see `_ranking_sql`).
FLOOR_POOL_FACTOR = 8
FLOOR_POOL_MIN = 64


def _ranking_sql(
    scope: Scope,
    match: str | None,
    order: Order,
    limit: int,
    covering: bool = True,
    ids_only: bool = False,
    floored: bool | None = None,
    scale: float = 1.0,
    given: Sequence[tuple[int, float]] | None = None,
) -> tuple[str, list[Any]]:
    """The ranking query: ``(id, rel, w, confd, dist2, blend)`` of the memories passing every
    filter of `scope`, best first. Only ids and numbers travel through the sort; rows are fetched
    after. ``blend`` (spatial_sort) ranks by relevance blended with proximity in one pass: the
    best score over every match comes from a window function, so the top n is exact.

    A text query ranked by score (the default order) computes bm25 once per match over FTS5
    rowids, and joins to the memories only the matches that can still reach the top (`floored`):
    score = relevance × w × (0.5 + 0.5 × confd) <= relevance × `MAX_SOURCE_WEIGHT`, so once `limit`
    memories among the most relevant matches pass every filter with scores >= S, a match whose
    relevance × MAX_SOURCE_WEIGHT is below S cannot be among the best `limit`. Without such a floor
    (fewer pass among the pool) every match is joined, as the plain query does; both rank alike
    (tests/experiences/test_recall_floor.py).

    Which is cheaper depends on the filters (`floored=None` chooses): the plain query joins every
    match to its row and computes bm25 only for those that pass every filter; the floored one
    computes bm25 for every match and joins only those that can reach the floor. With only the
    visibility, collection and status filters nearly every match passes, and the floor saves
    the joins; under a `context_filter` or a session that few matches pass, the plain query's
    bm25 over only the passing matches is the cheaper (docs/search.md, "Which plan").

    `given`: the matches and their relevance, computed already (`keyword_repo.KeywordCache`),
    in place of FTS5's — the floored query over them."""
    confd = "m.confidence * max(?, pow(0.5, max(0.0, ? - m.updated_at) / ?))"
    confd_p: list[Any] = [DECAY_FLOOR, scope.now, HALF_LIFE_S]
    # Distances are computed in SQL only when they order or filter; otherwise `rank` computes them
    # for the rows it keeps.
    in_sql = scope.spatial is not None and (order in ("distance", "blend") or scope.spatial.max_distance is not None)
    dist_sql, dist_p = _dist2(scope.spatial if in_sql else None)
    where: list[str] = []
    where_p: list[Any] = []
    # Without the context (no filter, no distance), ranking reads only idx_memories_rank: name it.
    hint = "" if scope.condition.sql != "1" or in_sql or not covering else " INDEXED BY idx_memories_rank"
    if floored is None:
        floored = scope.condition.sql == "1" and scope.session_id is None
    floored = floored and (match is not None or given is not None) and order == "score" and not ids_only and limit >= 1
    hits, rel_p = "", []
    hits_p: list[Any] = []
    if given is not None and floored:
        hits = (
            f"WITH hits(hid, rel) AS MATERIALIZED (VALUES {','.join(['(?,?)'] * len(given))}), "  # noqa: S608
            "pool AS (SELECT hid, rel FROM hits ORDER BY rel DESC LIMIT ?), "
        )
        hits_p = [*itertools.chain.from_iterable(given), max(FLOOR_POOL_MIN, FLOOR_POOL_FACTOR * limit)]
        rel, source = "h.rel", f"{{hits}} h CROSS JOIN memories m{hint} ON m.id = h.hid"
    elif floored:
        # CROSS JOIN pins the loop order: each match, then its row (and only if it passes the floor).
        hits = (
            f"WITH hits AS MATERIALIZED (SELECT rowid AS hid, -bm25(memories_fts, {BM25_WEIGHTS}) * ? AS rel "  # noqa: S608
            "FROM memories_fts WHERE memories_fts MATCH ?), "
            "pool AS (SELECT hid, rel FROM hits ORDER BY rel DESC LIMIT ?), "
        )
        hits_p = [scale, match, max(FLOOR_POOL_MIN, FLOOR_POOL_FACTOR * limit)]
        rel, source = "h.rel", f"{{hits}} h CROSS JOIN memories m{hint} ON m.id = h.hid"
    elif match is not None:
        rel, rel_p = f"-bm25(memories_fts, {BM25_WEIGHTS}) * ?", [scale]
        source = f"memories_fts JOIN memories m{hint} ON m.id = memories_fts.rowid"
        where.append("memories_fts MATCH ?")
        where_p.append(match)
    else:
        rel, source = "1.0", f"memories m{hint}"
    narrowing, narrowing_p = _narrowing(scope)
    where += ["m.collection = ?", "m.status = 'active'", *narrowing]
    where_p += [scope.collection, *narrowing_p]
    outer = ["confd >= ?"]
    outer_p: list[Any] = [scope.min_confidence]
    if scope.spatial is not None and scope.spatial.max_distance is not None:
        outer.append("dist2 <= ?")
        outer_p.append(scope.spatial.max_distance**2)
    score = "rel * w * (0.5 + 0.5 * confd)"
    blend, blend_p = "NULL", []
    if order == "blend" and scope.spatial is not None:
        blend = (
            f"(1.0 - ?) * {score} / max(max({score}) OVER (), 1e-12) + ? * coalesce(1.0 / (1.0 + sqrt(dist2) / ?), 0.0)"
        )
        blend_p = [scope.spatial.weight, scope.spatial.weight, scope.spatial.scale]
    by = {
        "score": f"{score} DESC, updated_at DESC, id DESC",
        "relevance": "rel DESC, id DESC",
        "distance": f"dist2 IS NULL, dist2 ASC, {score} DESC, id DESC",
        "blend": "blend DESC, id DESC",
    }[order]
    w = f"min(m.source_weight, {MAX_SOURCE_WEIGHT!r})"

    def rows(src: str, extra: str = "") -> str:
        return (
            f"SELECT m.id AS id, m.updated_at AS updated_at, {rel} AS rel, {w} AS w, {confd} AS confd, "  # noqa: S608
            f"{dist_sql} AS dist2 FROM {src} WHERE {extra}{' AND '.join(where)}"
        )

    row_p = [*rel_p, *confd_p, *dist_p, *where_p]
    # `ids_only`: the ids passing every filter, unordered — no sort and no numbers to fetch
    # (hybrid recall ranks them by cosine itself).
    head, tail = ("SELECT id", "") if ids_only else ("SELECT id, rel, w, confd, dist2, blend", f" ORDER BY {by}")
    if not floored:
        sql = (
            f"{head} FROM (SELECT id, updated_at, rel, w, confd, dist2, "  # noqa: S608
            f"{blend} AS blend FROM ({rows(source)}) WHERE {' AND '.join(outer)}){tail} LIMIT ?"
        )
        return sql, [*blend_p, *row_p, *outer_p, limit]  # in textual order
    floor = (
        f"floor AS (SELECT {score} AS s FROM ({rows(source.format(hits='pool'))}) "  # noqa: S608
        f"WHERE {' AND '.join(outer)} ORDER BY s DESC LIMIT 1 OFFSET ?) "
    )
    # A match passes when it can reach the floor, or when there is no floor (coalesce), or when
    # its relevance is not positive (then the bound does not hold; bm25 keeps it positive).
    top = f"h.rel * {MAX_SOURCE_WEIGHT!r}"
    reach = f"({top} >= coalesce((SELECT s FROM floor), {top}) OR h.rel <= 0) AND "  # noqa: S608
    sql = (
        f"{hits}{floor}{head} FROM (SELECT id, updated_at, rel, w, confd, dist2, "  # noqa: S608
        f"{blend} AS blend FROM ({rows(source.format(hits='hits'), reach)}) WHERE {' AND '.join(outer)}){tail} LIMIT ?"
    )
    return sql, [*hits_p, *row_p, *outer_p, limit - 1, *blend_p, *row_p, *outer_p, limit]


def rank(
    conn: sqlite3.Connection,
    scope: Scope,
    match: Sequence[str] | None,
    order: Order,
    limit: int,
    include_data: bool = False,
    covering: bool = True,
    keywords: KeywordCache | None = None,
) -> list[Ranked]:
    """One ranked list of memories that pass every filter of `scope`, best first.

    `match` holds the query's FTS5 phrases, each quoted (`segment.match_phrases`; a memory
    matches when it holds any), or is None for a filter-only list (every memory in scope, by
    decayed confidence and source weight, newest first among equals)."""
    ranked = _ranked_numbers(conn, scope, match, order, limit, covering, keywords)
    rows = rows_of(conn, [r[0] for r in ranked], include_data)
    sp = scope.spatial
    return [
        Ranked(
            rows[mid],
            float(rel),
            rel * w * (0.5 + 0.5 * cd),
            cd,
            d2 if sp is None or d2 is not None else dist2_of(rows[mid].context, sp),
            bl,
        )
        for mid, rel, w, cd, d2, bl in ranked
        if mid in rows
    ]


def _narrowing(scope: Scope) -> tuple[list[str], list[Any]]:
    """`scope`'s clauses beyond collection and status (robots, session, context filter), with
    their parameters in order."""
    clauses: list[str] = []
    params: list[Any] = []
    if scope.visible is not None:
        clauses.append(f"m.robot IN ({','.join('?' * len(scope.visible))})" if scope.visible else "0")
        params.extend(sorted(scope.visible))
    if scope.session_id is not None:
        clauses.append("m.session_id = ?")
        params.append(scope.session_id)
    if scope.exclude_session is not None:
        clauses.append("m.session_id IS NOT ?")
        params.append(scope.exclude_session)
    if scope.condition.sql != "1":
        clauses.append(f"({scope.condition.sql})")
        params.extend(scope.condition.params)
    return clauses, params


def _ranked_numbers(
    conn: sqlite3.Connection,
    scope: Scope,
    match: Sequence[str] | None,
    order: Order,
    limit: int,
    covering: bool,
    keywords: KeywordCache | None = None,
) -> list[tuple[Any, ...]]:
    """``(id, rel, w, confd, dist2, blend)`` rows of the ranking, best first.

    With the keyword cache, a text query ranked by score goes through it (`_ranked_from_cache`)
    when the filters pass enough of the memories (`_pass_share`).

    A text query ranked by score first leaves its commonest phrases out of choosing matches when
    they can add less to a score together than its rarest phrase alone (`fts.skippable`): FTS5
    computes bm25 for every match, and a common word matches a third of the memories while
    adding little to any score. The phrases left out still count in the scores
    (`fts.restricted_expression`'s doubling: scores are halved back). When the `limit`-th best
    score found is above what a memory holding only those phrases could reach (their bound ×
    `MAX_SOURCE_WEIGHT`), the list is exact; otherwise the rarest of them chooses matches again,
    until none is left out. Tried only for short lists (`SKIP_UP_TO`) under broad filters
    (`_pass_share`) in stores of `SHORTCUTS_FROM` memories or more, where it pays. The
    largest id stands for the number of memories FTS5's idf counts (every indexed memory is a row
    of `memories`, so it can only be more), which only makes the bound more careful.
    Phrases no memory holds are dropped: they match and add nothing, but bm25 would loop over
    them. Same rows, same order as the plain query (tests/experiences/test_recall_floor.py) — but
    the skipping's relevances are twice-counted sums halved, in another order than the plain
    query adds them, so they can differ from its in the last bit (docs/search.md)."""
    if match is not None and not match:
        return []
    scored = match is not None and order == "score" and limit >= 1
    share: float | None = None  # `_pass_share`, asked at most once
    total: int | None = None  # `_largest_id`, read at most once
    if keywords is not None and scored:
        assert match is not None
        share = _pass_share(conn, scope)
        fits = share >= BROAD_SHARE
        if not fits and share >= CACHE_SHARE:
            total = _largest_id(conn)
            fits = _first_pool(limit, share) <= NARROW_FIRST_SHARE * total
        cached = _ranked_from_cache(conn, scope, match, limit, covering, keywords, share) if fits else None
        if cached is not None:
            return cached
    if total is None:
        total = _largest_id(conn) if scored else 0
    broad = total >= SHORTCUTS_FROM and (_pass_share(conn, scope) if share is None else share) >= BROAD_SHARE
    if broad and match is not None and len(match) > 1 and limit <= SKIP_UP_TO:
        docs = _phrase_counts(conn, match)
        held = [(p, d) for p, d in zip(match, docs, strict=True) if d > 0]
        if not held:
            return []
        match = [p for p, _ in held]
        held_by = dict(held)
        rest, _ = fts.skippable(match, [d for _, d in held], total)
        while rest:  # commonest first: on a miss, the rarest of them chooses matches again
            bound = fts.bound_of((held_by[p] for p in rest), total)
            expr = fts.restricted_phrases([p for p in match if p not in rest], rest)
            got = conn.execute(*_ranking_sql(scope, expr, order, limit, covering, floored=True, scale=0.5)).fetchall()
            if len(got) < limit:  # too few pass the filters there: every phrase chooses
                break
            _, rel, w, confd, *_ = got[-1]
            if rel * w * (0.5 + 0.5 * confd) > bound * MAX_SOURCE_WEIGHT:
                return got
            rest = rest[:-1]
    expression = " OR ".join(match) if match is not None else None
    return conn.execute(*_ranking_sql(scope, expression, order, limit, covering, floored=broad)).fetchall()


def _ranked_from_cache(
    conn: sqlite3.Connection,
    scope: Scope,
    match: Sequence[str],
    limit: int,
    covering: bool,
    keywords: KeywordCache,
    share: float,
) -> list[tuple[Any, ...]] | None:
    """`_ranked_numbers`'s rows with bm25 from the keyword cache, or None when it cannot answer.

    The cache gives the matches that can pass the collection and robots, each with an upper
    bound of its score (`KeywordCache.candidates`: relevance × source weight × (0.5 + 0.5 ×
    confidence), before time decay). Those with the highest bounds go to the floored query as
    given rows (`_ranking_sql`'s `given`), which applies every filter and weight exactly as over
    FTS5's matches. The list is exact once its `limit`-th score is above the highest bound left
    out; otherwise every match whose bound reaches that score goes (one more query, then exact),
    or, when fewer than `limit` passed the filters, four times as many — under a narrow filter,
    as many as should hold ``2 × limit`` that pass at the rate these passed, if that is more.
    Never more than `MAX_GIVEN` (then SQL ranks).

    `share`: the share of memories the filters pass (`_pass_share`). Under a narrow filter the
    first query is given proportionally more matches, so that about ``2 × limit`` of them are
    likely to pass (`NARROW_SCALE`): a query that comes back short costs a round trip and a bigger
    one after it, where a few more given rows in the first cost little. And under a narrow filter no query
    is given more than a quarter of the matches (`GIVEN_SHARE`): where the best matches pass it
    far less often than the sampled memories (docking, under a query about grasping), the rounds
    would end up reading as many contexts as the plain query, at twice its cost a row — SQL's
    plain query ranks instead."""
    found = keywords.candidates(conn, match, scope.collection, scope.visible)
    if found is None:
        return None
    ids, rels, tops = found
    if not len(ids):
        return []
    narrow = share < BROAD_SHARE
    k = _first_pool(limit, share)
    cap = min(MAX_GIVEN, max(GIVEN_FLOOR, int(GIVEN_SHARE * len(ids)))) if narrow else MAX_GIVEN
    head, left = _highest(tops, k)
    while True:
        if len(head) > cap:
            return None
        given = list(zip(ids[head].tolist(), rels[head].tolist(), strict=True))
        got = conn.execute(*_ranking_sql(scope, None, "score", limit, covering, floored=True, given=given)).fetchall()
        if left is None:
            return got
        if len(got) >= limit:
            _, rel, w, confd, *_ = got[limit - 1]
            floor = rel * w * (0.5 + 0.5 * confd)
            if floor > left:
                return got
            # Every match that could reach this `limit`-th score goes next: what is left out then
            # stays below it, and the next list's `limit`-th score can only be higher.
            head, left = np.flatnonzero(tops >= floor), None
        else:  # too few pass: four times as many; under a narrow filter, enough for 2 × limit at their rate
            k *= 4
            if narrow:
                rate = (len(got) or 0.5) / len(head)
                k = max(k, math.ceil(NARROW_SCALE * limit / rate))
            head, left = _highest(tops, k)


def _largest_id(conn: sqlite3.Connection) -> int:
    """The largest memory id: a stand-in for how many memories there are (never fewer)."""
    (total,) = conn.execute("SELECT coalesce(max(id), 0) FROM memories").fetchone()
    return int(total)


def _first_pool(limit: int, share: float) -> int:
    """How many matches `_ranked_from_cache` gives its first query under a filter passing `share`."""
    return max(BOUNDED_POOL_MIN, math.ceil(BOUNDED_POOL_FACTOR * limit * max(1.0, NARROW_SCALE * BROAD_SHARE / share)))


def _highest(values: bm25.Floats, k: int) -> tuple[npt.NDArray[np.intp], float | None]:
    """The positions of the `k` largest `values` (in no particular order), and the largest value
    left out (None when none is)."""
    if k >= len(values):
        return np.arange(len(values)), None
    part = np.argpartition(-values, k)
    return part[:k], float(values[part[k:]].max())


#: How many matches, by their score's bound, `_ranked_from_cache` gives the ranking query first:
#: ``BOUNDED_POOL_FACTOR × n``, at least `BOUNDED_POOL_MIN`: enough that the first query is nearly
#: always exact (docs/search.md, "Why these constants").
BOUNDED_POOL_FACTOR = 4
BOUNDED_POOL_MIN = 16
#: The most matches `_ranked_from_cache` gives the ranking query (two parameters each).
MAX_GIVEN = 4096
#: Under a narrow filter (`share` < `BROAD_SHARE`) no more than this share of the matches, nor
#: `GIVEN_FLOOR` if that is more, go to one query: a given row costs more than a match of the
#: plain query (its statement is compiled afresh, its rows sorted for the floor), so past this
#: share the plain query is the cheaper. Under a broad filter the fallback is FTS5's floored
#: query, which costs more: there only `MAX_GIVEN`.
GIVEN_SHARE = 0.25
GIVEN_FLOOR = 256
#: Below this many memories (the largest id) the plain query is cheapest: the shortcuts' own
#: queries cost more than they save.
SHORTCUTS_FROM = 5_000
#: Phrase skipping is tried for lists up to this long: the longer the list, the lower its last
#: score and the likelier the bound check fails, so that its retries cost more than it saves
#: (hybrid's keyword pool is past it).
SKIP_UP_TO = 20
#: A filter passing at least this share of the most recent memories in scope counts as broad:
#: FTS5's floored query and the phrase skipping pay (`_ranked_numbers`).
BROAD_SHARE = 0.25
#: The keyword cache ranks under filters passing at least this share (4 of the 128 sampled);
#: below it the plain query, which reads every match's context once, is cheaper than the cache's
#: rounds of given rows, each of which reads theirs (the plans side by side: docs/search.md).
CACHE_SHARE = 4 / 128
#: `_ranked_from_cache`'s first pool is scaled by ``max(1, NARROW_SCALE × BROAD_SHARE / share)``
#: for a filter passing `share`: under one that passes fewer than half, about ``2 × limit`` of the
#: pool pass.
NARROW_SCALE = 2.0
#: Under a narrow filter the cache is asked only when its first pool (`_first_pool`) is at most
#: this share of the memories (the largest id): a pool larger than that nearly always outgrows
#: the cap, and scoring every match first then costs more than the plain query alone. A larger
#: store has room for the same pools under this share, and there the cache gains.
NARROW_FIRST_SHARE = 1 / 16
#: How many of the most recent memories in scope `_pass_share` tries the filters on.
BROAD_SAMPLE = 128


def _pass_share(conn: sqlite3.Connection, scope: Scope) -> float:
    """The share of matches likely to pass `scope`'s robots, session and `context_filter`,
    which chooses the plan: the keyword cache's given rows from `CACHE_SHARE` up, FTS5's floored
    query and the phrase skipping from `BROAD_SHARE` up (see `_ranking_sql`); under a narrower
    filter the plain query is cheaper, since it computes bm25 only for the matches that pass.
    Unscoped and unfiltered, 1.0; otherwise the share of the `BROAD_SAMPLE` most recent memories
    of the collection that pass (one bounded query; 0.0 in an empty collection). Only
    the plan depends on this, never the answer."""
    if scope.visible is None and scope.condition.sql == "1" and scope.session_id is None:
        return 1.0
    narrowing, passing_p = _narrowing(scope)
    passing = ["1", *narrowing]
    sample, passed = conn.execute(
        f"SELECT count(*), coalesce(sum({' AND '.join(passing)}), 0) FROM (SELECT m.robot AS robot, "  # noqa: S608
        "m.context AS context, m.session_id AS session_id FROM memories m "
        "WHERE m.collection = ? AND m.status = 'active' ORDER BY m.id DESC LIMIT ?) m",
        [*passing_p, scope.collection, BROAD_SAMPLE],
    ).fetchone()
    return passed / sample if sample else 0.0


def _phrase_counts(conn: sqlite3.Connection, phrases: Sequence[str]) -> list[int]:
    """How many memories hold each phrase: its list of memories walked once, without scoring."""
    each = "(SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?)"
    return [int(d) for d in conn.execute(f"SELECT {', '.join([each] * len(phrases))}", list(phrases)).fetchone()]


def ids_in_scope(conn: sqlite3.Connection, scope: Scope, limit: int = 1_000_000, covering: bool = True) -> list[int]:
    """Every memory id passing `scope` (for a vector index to rank within, never beyond)."""
    sql, params = _ranking_sql(scope, None, "score", limit, covering, ids_only=True)
    return [int(r[0]) for r in conn.execute(sql, params)]


def ids_passing(conn: sqlite3.Connection, scope: Scope, ids: Collection[int], covering: bool = True) -> set[int]:
    """Which of `ids` pass every filter of `scope`."""
    if not ids:
        return set()
    sql, params = _ranking_sql(_among(scope, ids), None, "score", len(ids), covering, ids_only=True)
    return {int(r[0]) for r in conn.execute(sql, params)}


def _among(scope: Scope, ids: Collection[int]) -> Scope:
    """`scope` narrowed to `ids`, handed to SQL as one JSON parameter: no limit on how many (a
    parameter each met SQLite's variable limit), and no slower than a parameter each."""
    narrowed = Condition(
        f"({scope.condition.sql}) AND m.id IN (SELECT value FROM json_each(?))",  # noqa: S608
        [*scope.condition.params, jsonvalue.dumps(list(ids))],
    )
    return replace(scope, condition=narrowed)


def weighed(
    conn: sqlite3.Connection,
    scope: Scope,
    match: Sequence[str],
    limit: int,
    covering: bool = True,
    keywords: KeywordCache | None = None,
) -> list[Weighed]:
    """`rank`'s list by score (no spatial order), as numbers only: no row is read."""
    return [_weighed(r) for r in _ranked_numbers(conn, scope, match, "score", limit, covering, keywords)]


def weighed_ids(conn: sqlite3.Connection, scope: Scope, ids: Collection[int], covering: bool = True) -> list[Weighed]:
    """The numbers of those of `ids` that pass `scope` (filters re-applied), relevance 1.0."""
    if not ids:
        return []
    return [_weighed(r) for r in _ranked_numbers(conn, _among(scope, ids), None, "score", len(ids), covering)]


def _weighed(r: Sequence[Any]) -> Weighed:
    mid, rel, w, confd = r[0], float(r[1]), float(r[2]), float(r[3])
    return Weighed(int(mid), rel, w * (0.5 + 0.5 * confd), confd)


def by_ids(conn: sqlite3.Connection, scope: Scope, ids: Collection[int], include_data: bool = False) -> list[Ranked]:
    """The memories among `ids` that pass `scope` (filters re-applied, so nothing leaks)."""
    if not ids:
        return []
    return rank(conn, _among(scope, ids), None, "score", len(ids), include_data)
