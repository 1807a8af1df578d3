"""Recall planning, backend-neutral: keyword or filter-only lists, and hybrid recall — candidate
pools, the probes of the vector index within the filters, weighted reciprocal-rank fusion, the
cosine floor, the spatial blend and normalisation. It reads through the ports only
(`MemoryRepository.snapshot`, `RecallIndex`, `MemoryVectors`); a backend supplies the ranked
lists and the checks, never the plan.

Invariants:

- Filters act before ranking: the vector list ranks only ids the index says pass the scope, read
  in the same snapshot as the keyword list it is fused with (or re-checked there, when the keyword
  list came from an earlier one).
- Exact: a probe of the nearest stops only when at least `pool` of them pass, or when it held
  every vector it could; past that, every id in scope is ranked.
- What either side is sure of comes first: a candidate whose vector is the query's own
  (`EXACT_COSINE`: the exact text of a memory), then the keyword matches that stand out by
  relevance (`fusion.standout`, `KEYWORD_GAP`) and hold every term of the query
  (`fusion.holds_every_term`: a unique token), or that hold every identifier the query names
  (`fusion.identifiers`: an error code, a part number, a serial — keyword-only recall too), rank
  above every other candidate, in fusion's order within each tier; the rest keep fusion's
  order. Only candidates already within the filters are raised, and the experience weight still
  orders each list.
- In the fusion, each keyword match's share is scaled by its relevance over the list's best
  (how much of the query it holds beside the best match): by ranks alone, the vector list's
  first — the same colour and object, another verb — passed the keyword list's first, which
  held every word of the question.
- A memory that contradicts a slot the query names (`search.agreement`: another colour, side,
  shape, outcome …) has its score multiplied by `agreement.DEMOTION` per slot, and one naming
  no value of it by `agreement.SILENCE`, before the tiers are raised (with `spatial_sort`, its
  blended score), in both modes; it never promotes.
  Hybrid checks every candidate; keyword recall its first `n`, and the `HYBRID_POOL` best
  once one of them is demoted (exact while `n` of those agree, else the best of the pool).
  A memory's slots are read from its first `AGREEMENT_CHARS` characters.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from robot_mcp_memory.experiences.model import Experience, Spatial, distance_of
from robot_mcp_memory.experiences.ports import (
    Embedded,
    Mask,
    MemoryRepository,
    MemoryVectors,
    Order,
    Ranked,
    Scope,
    Snapshot,
    Weighed,
)
from robot_mcp_memory.search import agreement, fusion, segment

Mode = Literal["keyword", "hybrid", "filter"]
#: The query's vector, off the event loop unless the query cache holds it (or None when the
#: embedder gives none): `ExperienceService._embed_query`.
Embed = Callable[[str], Awaitable[Embedded | None]]
#: Hybrid recall: candidates per list before reciprocal-rank fusion.
HYBRID_POOL = 30
#: Hybrid recall first takes these many × the pool of nearest memories of the visible robots, in
#: turn, and keeps those passing the filters; only when fewer than the pool pass even the widest
#: does it make the filter's mask (reading every memory in scope once: the slow step, linear in
#: the memories in scope) and rank among the memories it allows — exact either way.
#: A filter passed by one memory in ten is mostly answered by the second probe.
PROBE_FACTORS = (4, 32)
#: Among the memories a filter's mask allows, the first round takes this many × the pool of
#: nearest (then eight times as many each round): nearly all of them pass every filter (the mask
#: knows the collection, the context filter, robots and who is active; not confidence).
MASK_ROUND_FACTOR = 2
#: No round among what a mask allows takes more than this many: past it (the mask allows far more
#: than pass — a high min_confidence), every id in scope is read, as without a mask.
MASK_ROUNDS_UP_TO = 4096
MIN_COSINE = fusion.MIN_COSINE
#: A vector candidate this close to the query's vector is the query's own text (a cosine of
#: 1 up to float rounding), or a writing of it that differs only in case or punctuation.
EXACT_COSINE = 0.995
#: Keyword matches whose relevance (bm25) is at least this many times the next match's stand
#: out: they hold a term of the query the others lack, and a rare one (an id, a code).
KEYWORD_GAP = 1.25
#: At most this many keyword matches stand out together (two memories naming one error code);
#: a longer head is a common word's, not a confident match.
STANDOUT_UP_TO = 3


@dataclass(frozen=True)
class Hit:
    memory: Experience
    score: float  # normalised: the best hit is 1.0
    confidence: float  # decayed at read time
    distance: float | None = None


@dataclass(frozen=True)
class Recalled:
    hits: list[Hit]
    mode: Mode


async def search(
    memories: MemoryRepository,
    vectors: MemoryVectors | None,
    embed: Embed,
    scope: Scope,
    query: str,
    n: int,
    include_data: bool,
) -> Recalled:
    """Recall's plan: hybrid when a query, an embedder and stored vectors allow it; else keyword
    (a query) or filter-only (none)."""
    match = segment.match_phrases(query) if query.strip() else None
    if query.strip() and not match:
        return Recalled([], "keyword")  # punctuation only: nothing to search for
    if match is not None and vectors is not None:
        found = await hybrid(memories, vectors, embed, scope, query, match, n, include_data)
        if found is not None:
            return found
    hits = await ranked(memories, scope, match, n, include_data, query)
    return Recalled(hits, "keyword" if match is not None else "filter")


async def ranked(
    memories: MemoryRepository,
    scope: Scope,
    match: Sequence[str] | None,
    n: int,
    include_data: bool,
    query: str = "",
) -> list[Hit]:
    """Keyword or filter-only ranking, entirely in the index (with spatial_sort, by the blend of
    relevance and proximity, computed over every match in one pass). A query naming identifiers
    (`fusion.identifiers`) takes the pool's best and puts the memories holding them first."""
    sp = scope.spatial
    order: Order = "score" if sp is None else "blend"
    names = fusion.identifiers(query) if match else []
    wanted = agreement.text_slots(query) if match else {}
    limit = max(n, HYBRID_POOL) if names else n
    rows = await memories.snapshot(lambda s: s.rank(scope, match, order, limit, include_data))
    demoted = _demotions(wanted, {r.memory.id: r.memory.content for r in rows})
    if demoted and limit < HYBRID_POOL and len(rows) == limit:
        # a demoted one may fall below matches past the n read: rank the pool instead
        limit = HYBRID_POOL
        rows = await memories.snapshot(lambda s: s.rank(scope, match, order, limit, include_data))
        demoted = _demotions(wanted, {r.memory.id: r.memory.content for r in rows})
    scored = [(r, (r.score if r.blend is None else r.blend) * demoted.get(r.memory.id, 1.0)) for r in rows]
    if demoted:
        scored.sort(key=lambda rx: -rx[1])  # stable: ties keep the index's order
    if names:
        top = max((x for _, x in scored), default=0.0) or 1.0
        scored = [(r, x + top if fusion.holds_identifiers(names, r.memory.content) else x) for r, x in scored]
        scored.sort(key=lambda rx: -rx[1])  # stable: ties keep the index's order
    return normalised(scored[:n], sp)


async def hybrid(
    memories: MemoryRepository,
    v: MemoryVectors,
    embed: Embed,
    scope: Scope,
    query: str,
    match: Sequence[str],
    n: int,
    include_data: bool,
) -> Recalled | None:
    """Keyword and vector lists, both within the filters (the vector list ranks only the ids
    that passed every filter, in the same snapshot), each ordered by relevance × the experience
    weight (source × (0.5 + 0.5 × decayed confidence)) as keyword recall orders its matches,
    fused by weighted RRF (the keyword share scaled by relevance over the best), agreement
    demoting what contradicts the query's slots or is silent on them; then the spatial blend
    and normalisation. None when no query vector or no stored vector exists: the caller runs
    keyword recall and says so."""
    if not v.would_embed():
        return None
    pool = max(HYBRID_POOL, 3 * n)
    sp = scope.spatial
    early: list[Weighed] | None = None
    if sp is None and not memories.blocking:
        # The query's embedding (a worker thread) and the keyword list (a reader) need nothing
        # of each other: run them together. The list comes from an earlier snapshot than the
        # vector list, so `read` re-applies every filter to its memories in its own.
        keyword_list = memories.snapshot(lambda s: s.weighed(scope, match, pool))
        qvec, early = await asyncio.gather(embed(query), keyword_list)
    else:
        qvec = await embed(query)
    if qvec is None:
        return None

    def nearest(s: Snapshot) -> list[tuple[int, float]] | None:
        """The `pool` nearest memories passing every filter. Exact: when at least `pool` of
        the `wide` nearest pass, no passing memory ranked below them can be nearer; when
        `wide` holds every vector of those robots, nothing was left out.

        The nearest of every robot's come first, as long as the filter has no mask; when too
        few of them pass, the filter's mask is made — by reading every context once — and from
        then on the nearest are taken among the memories it allows (`within`)."""
        mask = s.mask(scope, "no") if scope.maskable else None
        if mask is not None:
            return within(s, mask)
        probe = v.nearest_any(s, qvec, PROBE_FACTORS[-1] * pool, scope.visible)  # one product, every probe
        if probe is None:
            return None
        passing: set[int] = set()
        checked = 0
        for factor in PROBE_FACTORS:
            head = probe[: factor * pool]
            passing |= s.ids_passing(scope, [m for m, _ in head[checked:]])
            checked = len(head)
            kept = [(m, cos) for m, cos in head if m in passing]
            if len(kept) >= pool or len(head) < factor * pool:
                return kept[:pool]
        mask = s.mask(scope, "now") if scope.maskable else None
        if mask is None:  # in a session, or ids that suit no mask: every id in scope
            return v.nearest(s, qvec, pool, s.ids_in_scope(scope))
        return within(s, mask)

    def within(s: Snapshot, mask: Mask) -> list[tuple[int, float]] | None:
        """The `pool` nearest passing every filter, among the memories `mask` allows (of the
        visible robots): each round the nearest `wide` of them, checked in the index, until
        `pool` pass or none is left — exact, as every memory passing the filters is among those
        the mask allows."""
        wide, checked = MASK_ROUND_FACTOR * pool, 0
        passing: set[int] = set()
        allowed = mask.allowing(scope.visible)  # the robots as the table has them, not the vectors' filing
        while True:
            head = v.nearest_any(s, qvec, wide, None, allowed)
            if head is None:
                return None
            passing |= s.ids_passing(scope, [m for m, _ in head[checked:]])
            checked = len(head)
            kept = [(m, cos) for m, cos in head if m in passing]
            if len(kept) >= pool or len(head) < wide:
                return kept[:pool]
            wide *= 8
            if wide > MASK_ROUNDS_UP_TO:  # what the mask allows mostly fails the rest (a confidence)
                return v.nearest(s, qvec, pool, s.ids_in_scope(scope))

    top = fusion.best_possible(v.weights, v.k) or 1.0
    names = fusion.identifiers(query)
    wanted = agreement.text_slots(query)

    def sure(
        keyword: Sequence[tuple[int, float]],
        vec: Sequence[tuple[int, float]],
        fused: dict[str, float],
        texts: Callable[[list[int]], Mapping[int, str]],
    ) -> dict[str, float]:
        """`fused` with the candidates either side is sure of raised above the rest: the
        keyword matches (id, relevance) that stand out and hold every term of the query (`texts`
        reads the few that stand out), or every identifier it names (`texts` reads them all, then),
        and above those the query's own text by cosine."""
        held: list[str] = []
        head = [int(r) for r in fusion.standout(((str(m), rel) for m, rel in keyword), KEYWORD_GAP, STANDOUT_UP_TO)]
        if head:
            text = texts(head)
            held = [str(m) for m in head if m in text and fusion.holds_every_term(query, text[m])]
            fused = fusion.promoted(fused, held, top)
        if names:  # and the keyword matches naming every identifier of the query, in the same tier
            text = texts([m for m, _ in keyword])
            named = [str(m) for m, t in text.items() if str(m) not in held and fusion.holds_identifiers(names, t)]
            fused = fusion.promoted(fused, named, top)
        return fusion.promoted(fused, [str(m) for m, cos in vec if cos >= EXACT_COSINE], 2 * top)

    def fuse(
        keyword: Sequence[tuple[int, float]], vec: Sequence[tuple[int, float]], weight: Mapping[int, float]
    ) -> dict[str, float]:
        vec_order = sorted(
            ((m, max(cos, 0.0) * weight[m]) for m, cos in vec if cos >= MIN_COSINE and m in weight),
            key=lambda x: (-x[1], -x[0]),
        )
        best = max((rel for _, rel in keyword), default=0.0)
        cover = {str(m): max(rel, 0.0) / best for m, rel in keyword} if best > 0 else None
        return fusion.rrf([[str(m) for m, _ in keyword], [str(m) for m, _ in vec_order]], v.weights, v.k, [cover, None])

    def read(s: Snapshot) -> list[tuple[Ranked, float]] | None:
        vec = nearest(s)
        if vec is None:
            return None
        if sp is None:  # fused on numbers; only the `n` kept have their rows read
            if early is None:
                keyword = s.weighed(scope, match, pool)
                known = {w.id: w for w in keyword}
                extra = [m for m, cos in vec if m not in known and cos >= MIN_COSINE]
                known.update((w.id, w) for w in s.weighed_ids(scope, extra))
            else:  # from the earlier snapshot: every candidate is checked again in this one
                ids = {w.id for w in early} | {m for m, cos in vec if cos >= MIN_COSINE}
                known = {w.id: w for w in s.weighed_ids(scope, ids)}
                keyword = [replace(known[w.id], relevance=w.relevance) for w in early if w.id in known]
                known.update((w.id, w) for w in keyword)
            fused = fuse([(w.id, w.relevance) for w in keyword], vec, {m: w.weight for m, w in known.items()})
            rows: dict[int, Experience] = {}  # read once: those that stood out are mostly returned

            def contents(ids: list[int]) -> dict[int, str]:
                rows.update(s.rows_of([m for m in ids if m not in rows], include_data))
                return {m: rows[m].content for m in ids if m in rows}

            demoted = _demotions(wanted, contents([int(ref) for ref in fused]) if wanted else {})
            fused = {ref: value * demoted.get(int(ref), 1.0) for ref, value in fused.items()}
            fused = sure([(w.id, w.relevance) for w in keyword], vec, fused, contents)
            best = sorted(((int(ref), value / top) for ref, value in fused.items()), key=lambda x: (-x[1], -x[0]))
            rows.update(s.rows_of([m for m, _ in best[:n] if m not in rows], include_data))
            return [(known[m].ranked(rows[m]), s_) for m, s_ in best[:n] if m in rows]
        # spatial_sort blends in each candidate's distance, read from its context
        ranked_ = s.rank(scope, match, "score", pool, include_data)
        rows_by = {r.memory.id: r for r in ranked_}
        # and the `n` keyword matches best by the blend itself (keyword recall's spatial order,
        # exact over every match): a near one ranked low by score alone was never a candidate,
        # so weight 1 ("by distance alone") missed the nearest matches
        for r in s.rank(scope, match, "blend", n, include_data, accelerated=False):
            rows_by.setdefault(r.memory.id, r)
        extra = [m for m, cos in vec if m not in rows_by and cos >= MIN_COSINE]
        rows_by.update((r.memory.id, r) for r in s.by_ids(scope, extra, include_data))
        fused = fuse([(r.memory.id, r.relevance) for r in ranked_], vec, {m: _weight(r) for m, r in rows_by.items()})
        keyword_pairs = [(r.memory.id, r.relevance) for r in ranked_]
        fused = sure(keyword_pairs, vec, fused, lambda ids: {m: rows_by[m].memory.content for m in ids})
        # every candidate's, demoted after the blend, as keyword recall demotes its blended score
        demoted = _demotions(wanted, {m: r.memory.content for m, r in rows_by.items()})
        fused.update((str(m), 0.0) for m in rows_by if str(m) not in fused)  # blended in by proximity
        scored = [(rows_by[int(ref)], value / top) for ref, value in fused.items()]
        if scored:
            most = max(x for _, x in scored) or 1.0
            scored = [(r, _blend(sp, x / most, r.dist2)) for r, x in scored]
        scored = [(r, x * demoted.get(r.memory.id, 1.0)) for r, x in scored]
        scored.sort(key=lambda x: (-x[1], -x[0].memory.id))
        return scored[:n]

    scored = await memories.snapshot(read)
    if scored is None:
        return None
    return Recalled(normalised(scored, sp), "hybrid")


#: A memory's slots are read from its first this many characters: what it says it is about
#: comes first, and a long memory costs its reading (jieba) only once, up to here.
AGREEMENT_CHARS = 500


def memory_slots(content: str) -> agreement.Slots:
    """The slot values a memory names (`agreement.text_slots` of its first `AGREEMENT_CHARS`)."""
    return agreement.text_slots(content[:AGREEMENT_CHARS])


def _demotions(wanted: agreement.Slots, texts: Mapping[int, str]) -> dict[int, float]:
    """The `agreement.factor` of each memory of `texts` (id → content) that contradicts a slot
    of `wanted` or names no value of it; the others are left out. Hybrid passes every
    candidate: a tier raised afterwards, or the proximity blend, may lift any of them."""
    if not wanted:
        return {}
    factors = {m: agreement.factor(wanted, memory_slots(text)) for m, text in texts.items()}
    return {m: f for m, f in factors.items() if f < 1.0}


def _weight(r: Ranked) -> float:
    """A ranked memory's experience weight: source × (0.5 + 0.5 × decayed confidence)."""
    return r.score / r.relevance if r.relevance else 0.0


def _blend(sp: Spatial, relevance: float, dist2: float | None) -> float:
    return (1.0 - sp.weight) * relevance + sp.weight * sp.proximity(dist2)


def _distance(r: Ranked, sp: Spatial) -> float | None:
    """What recall reports: the square root of the ranking's squared distance, or — where that
    square overflowed to infinity — the distance itself, read from the context (`distance_of`)."""
    d2 = r.dist2
    if d2 is not None and math.isfinite(d2):
        return math.sqrt(max(0.0, d2))
    return distance_of(r.memory.context, sp)


def normalised(scored: Sequence[tuple[Ranked, float]], sp: Spatial | None) -> list[Hit]:
    best = max((s for _, s in scored), default=0.0)
    return [
        Hit(
            r.memory,
            round(s / best, 6) if best > 0 else 0.0,
            r.confidence,
            None if sp is None or r.dist2 is None else _distance(r, sp),
        )
        for r, s in scored
    ]


__all__ = [
    "AGREEMENT_CHARS",
    "EXACT_COSINE",
    "HYBRID_POOL",
    "KEYWORD_GAP",
    "MASK_ROUNDS_UP_TO",
    "MASK_ROUND_FACTOR",
    "MIN_COSINE",
    "PROBE_FACTORS",
    "STANDOUT_UP_TO",
    "Embed",
    "Hit",
    "Mode",
    "Recalled",
    "hybrid",
    "memory_slots",
    "ranked",
    "search",
]
