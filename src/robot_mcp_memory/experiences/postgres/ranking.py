"""Recall's ranked lists on PostgreSQL: which memories pass a `Scope` is decided in SQL (every
filter in the ``WHERE``, before anything is ranked); how they rank is SQLite's formula, computed
here on the numbers SQL returns.

Invariants:

- **Filters act before ranking.** Collection, status, robots, session and the context filter
  (`filter_sql`) choose the rows in SQL; the decayed-confidence floor and ``max_distance`` are
  applied to every row chosen before any is ranked, so a list never holds a memory outside its
  scope and filtering never shortens a list that more memories could fill.
- **The order is SQLite's.** score = relevance × min(source weight, `MAX_SOURCE_WEIGHT`) × (0.5 +
  0.5 × decayed confidence), the decay ``confidence × max(DECAY_FLOOR, 0.5 ** (age / HALF_LIFE_S))``;
  ties broken as `sqlite/ranking_repo` breaks them (score, then newer, then larger id; distance
  lists nearest first, missing coordinates last; the spatial blend by the best score of the list).
  The same IEEE operations in the same order give the same doubles.
- Keyword relevance is `keywords.relevance` (FTS5's bm25), a filter-only list's 1.0.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from robot_mcp_memory.experiences.model import DECAY_FLOOR, HALF_LIFE_S, MAX_SOURCE_WEIGHT, Spatial, dist2_of
from robot_mcp_memory.experiences.ports import Order, Ranked, Scope, Weighed
from robot_mcp_memory.experiences.postgres import keywords, records
from robot_mcp_memory.experiences.postgres.filter_sql import Condition, condition
from robot_mcp_memory.experiences.postgres.numbers import MemoryNumbers, Numbers
from robot_mcp_memory.search.postgres.postings import PostingCache, id_array
from robot_mcp_memory.storage.postgres import Connection

#: The JSON column a context filter reads.
CONTEXT_DOC = "m.context_doc"


class _Row(NamedTuple):
    # A tuple, not a dataclass: a recall makes one per memory its words match (thousands).
    id: int
    rel: float
    w: float
    confd: float
    dist2: float | None
    updated_at: float
    blend: float | None = None

    @property
    def score(self) -> float:
        return self.rel * self.w * (0.5 + 0.5 * self.confd)


def compiled(scope: Scope) -> Condition:
    """`scope`'s filter tree as SQL over ``m.context_doc``."""
    return condition(scope.context_filter, CONTEXT_DOC)


def _where(scope: Scope, cond: Condition, ids: Collection[int] | None) -> tuple[str, list[Any]]:
    clauses = ["m.collection = %s", "m.status = 'active'"]
    params: list[Any] = [scope.collection]
    if scope.visible is not None:
        clauses.append("m.robot = ANY(%s::text[])")
        params.append(sorted(scope.visible))
    if scope.session_id is not None:
        clauses.append("m.session_id = %s")
        params.append(scope.session_id)
    if scope.exclude_session is not None:
        clauses.append("m.session_id IS DISTINCT FROM %s")
        params.append(scope.exclude_session)
    if ids is not None:
        clauses.append("m.id = ANY(%s::bigint[])")
        params.append(id_array(sorted(ids)))
    if cond.sql != "TRUE":
        clauses.append(f"({cond.sql})")
        params.extend(cond.params)
    return " AND ".join(clauses), params


def _decayed(confidence: float, updated_at: float, now: float) -> float:
    return confidence * max(DECAY_FLOOR, math.pow(0.5, max(0.0, now - updated_at) / HALF_LIFE_S))


def _passing(
    conn: Connection, scope: Scope, cond: Condition, ids: Collection[int] | None, rels: dict[int, float] | None
) -> list[_Row]:
    """Every memory passing `scope` (among `ids` when given), with its ranking numbers."""
    spatial = scope.spatial
    where, params = _where(scope, cond, ids)
    context = ", m.context" if spatial is not None else ""
    rows: list[_Row] = []
    for r in conn.execute(
        f"SELECT m.id, m.confidence, m.updated_at, m.source_weight{context} FROM memories m WHERE {where}",  # noqa: S608
        params,
    ).fetchall():
        mid = int(r[0])
        rel = 1.0 if rels is None else rels[mid]
        confd = _decayed(r[1], r[2], scope.now)
        if confd < scope.min_confidence:
            continue
        d2 = _dist2(r[4], spatial) if spatial is not None else None
        if (
            spatial is not None
            and spatial.max_distance is not None
            and not (d2 is not None and d2 <= spatial.max_distance**2)
        ):
            continue
        rows.append(_Row(mid, rel, min(r[3], MAX_SOURCE_WEIGHT), confd, d2, r[2]))
    return rows


def _dist2(context_text: str, spatial: Spatial) -> float | None:
    return dist2_of(json.loads(context_text), spatial)


def _ordered(rows: list[_Row], order: Order, spatial: Spatial | None, limit: int) -> list[_Row]:
    """The first `limit` of `rows` in `order` (`heapq.nsmallest`: ``sorted(...)[:limit]``, ties
    and all, without sorting every match)."""
    if order == "relevance":
        return heapq.nsmallest(limit, rows, key=lambda r: (-r.rel, -r.id))
    if order == "distance":
        return heapq.nsmallest(limit, rows, key=lambda r: (r.dist2 is None, r.dist2 or 0.0, -r.score, -r.id))
    if order == "blend":
        if spatial is None:
            return heapq.nsmallest(limit, rows, key=lambda r: -r.id)
        best = max(max((r.score for r in rows), default=0.0), 1e-12)
        blended = []
        for r in rows:
            near = 0.0 if r.dist2 is None else 1.0 / (1.0 + math.sqrt(r.dist2) / spatial.scale)
            # SQLite's expression has the score written out in it: ((1 − weight) × rel × w × half) / best.
            blend = (1.0 - spatial.weight) * r.rel * r.w * (0.5 + 0.5 * r.confd) / best + spatial.weight * near
            blended.append(_Row(r.id, r.rel, r.w, r.confd, r.dist2, r.updated_at, blend))
        return heapq.nsmallest(limit, blended, key=lambda r: (-(r.blend or 0.0), -r.id))
    return heapq.nsmallest(limit, rows, key=lambda r: (-r.score, -r.updated_at, -r.id))


@dataclass(frozen=True)
class Caches:
    """A replica's mirrors a read snapshot may rank from (either may be absent)."""

    postings: PostingCache | None = None
    numbers: MemoryNumbers | None = None


NO_CACHES = Caches()


def _from_numbers(
    index: Numbers, scope: Scope, ids: Sequence[int], rels: dict[int, float], order: Order, limit: int
) -> list[_Row]:
    """`_ordered(_passing(...))` for an unfiltered, non-spatial scope, read from the mirror: the
    same rows, numbers and order (`numbers`' invariants)."""
    cand = np.array(ids, np.int64)
    slots = index.slots(ids)
    keep = slots >= 0
    cand, slots = cand[keep], slots[keep]
    ok = index.alive[slots] & index.active[slots]
    coll = index.code(scope.collection)
    ok &= index.collection[slots] == (-2 if coll is None else coll)
    if scope.visible is not None:
        codes = [c for c in (index.code(r) for r in scope.visible) if c is not None]
        ok &= np.isin(index.robot[slots], np.array(codes, np.int32))
    if scope.session_id is not None:
        sid = index.code(scope.session_id)
        ok &= index.session[slots] == (-2 if sid is None else sid)
    if scope.exclude_session is not None:
        ex = index.code(scope.exclude_session)
        if ex is not None:
            ok &= index.session[slots] != ex
    cand, slots = cand[ok], slots[ok]
    conf, upd = index.confidence[slots].tolist(), index.updated_at[slots].tolist()
    now = scope.now
    confd = np.array([_decayed(c, u, now) for c, u in zip(conf, upd, strict=True)], np.float64)
    ok = confd >= scope.min_confidence
    cand, slots, confd = cand[ok], slots[ok], confd[ok]
    rel = np.array([rels[int(i)] for i in cand.tolist()], np.float64)
    w = np.minimum(index.source_weight[slots], MAX_SOURCE_WEIGHT)
    upd_a = index.updated_at[slots]
    if order == "relevance":
        at = np.lexsort((-cand, -rel))[:limit]
    else:  # "score": rel × w × (0.5 + 0.5 × confd), as `_Row.score` multiplies it
        score = rel * w * (0.5 + 0.5 * confd)
        at = np.lexsort((-cand, -upd_a, -score))[:limit]
    return [_Row(int(cand[i]), float(rel[i]), float(w[i]), float(confd[i]), None, float(upd_a[i])) for i in at.tolist()]


def _numbers(
    conn: Connection,
    scope: Scope,
    cond: Condition,
    match: Sequence[str] | None,
    order: Order,
    limit: int,
    ids: Collection[int] | None = None,
    caches: Caches = NO_CACHES,
) -> list[_Row]:
    if limit < 1:
        return []
    rels: dict[int, float] | None = None
    if match is not None:
        rels = keywords.relevance(conn, match, caches.postings)
        if not rels:
            return []
        ids = rels.keys() if ids is None else [i for i in ids if i in rels]
    if ids is not None and not ids:
        return []
    if (
        caches.numbers is not None
        and rels is not None
        and ids is not None
        and scope.spatial is None
        and cond.sql == "TRUE"
        and order in ("score", "relevance")
    ):
        with caches.numbers.current(conn) as index:
            if index is not None:
                return _from_numbers(index, scope, list(ids), rels, order, limit)
    return _ordered(_passing(conn, scope, cond, ids, rels), order, scope.spatial, limit)


def rank(
    conn: Connection,
    scope: Scope,
    cond: Condition,
    match: Sequence[str] | None,
    order: Order,
    limit: int,
    include_data: bool = False,
    ids: Collection[int] | None = None,
    caches: Caches = NO_CACHES,
) -> list[Ranked]:
    """One ranked list of the memories passing `scope`, best first (`sqlite/ranking_repo.rank`);
    relevance and numbers from `caches` when they can answer for `conn`'s snapshot."""
    ranked = _numbers(conn, scope, cond, match, order, limit, ids, caches)
    rows = records.rows_of(conn, [r.id for r in ranked], include_data)
    return [Ranked(rows[r.id], r.rel, r.score, r.confd, r.dist2, r.blend) for r in ranked if r.id in rows]


def _weighed(r: _Row) -> Weighed:
    return Weighed(r.id, r.rel, r.w * (0.5 + 0.5 * r.confd), r.confd)


def weighed(
    conn: Connection,
    scope: Scope,
    cond: Condition,
    match: Sequence[str],
    limit: int,
    caches: Caches = NO_CACHES,
) -> list[Weighed]:
    """`rank`'s list by score, as numbers only."""
    return [_weighed(r) for r in _numbers(conn, scope, cond, match, "score", limit, None, caches)]


def weighed_ids(conn: Connection, scope: Scope, cond: Condition, ids: Collection[int]) -> list[Weighed]:
    """The numbers of those of `ids` that pass `scope`, relevance 1.0, by score."""
    if not ids:
        return []
    return [_weighed(r) for r in _numbers(conn, scope, cond, None, "score", len(ids), ids)]


def by_ids(
    conn: Connection, scope: Scope, cond: Condition, ids: Collection[int], include_data: bool = False
) -> list[Ranked]:
    """The memories among `ids` that pass `scope` (filters re-applied, so nothing leaks)."""
    if not ids:
        return []
    return rank(conn, scope, cond, None, "score", len(ids), include_data, ids)


def ids_passing(conn: Connection, scope: Scope, cond: Condition, ids: Collection[int]) -> set[int]:
    if not ids:
        return set()
    return {r.id for r in _passing(conn, scope, cond, ids, None)}


def ids_in_scope(conn: Connection, scope: Scope, cond: Condition) -> list[int]:
    """Every memory id passing `scope`, in id order."""
    return sorted(r.id for r in _passing(conn, scope, cond, None, None))


__all__ = [
    "CONTEXT_DOC",
    "NO_CACHES",
    "Caches",
    "by_ids",
    "compiled",
    "ids_in_scope",
    "ids_passing",
    "rank",
    "weighed",
    "weighed_ids",
]
