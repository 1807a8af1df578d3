"""Find planning, backend-neutral: how `find_processes` ranks, in keyword and in hybrid mode.

It reads through one `ports.SearchSnapshot` (a backend's primitives on one read transaction:
phrase counts, keyword top-n, vector top-n and among, reliability, agreement texts, documents)
and a parsed `search.query.Query`; a backend supplies the lists, never the plan. The bm25 column
weights and the read bounds both adapters apply are here too.

Invariants:

- Score = relevance × reliability (spec), relevance calibrated to [0, 1] (`search.relevance`):
  keyword relevance is ``-bm25`` over the query's content-word phrases divided by the query's
  bound (`query_bound`), one factor for the whole query, so it never reorders the keyword list.
- Agreement never promotes: a candidate whose title, task pattern or tags contradict a slot the
  query names, or name no value of it (`agreement.factor`), has its relevance demoted, in
  keyword mode (`agreeing_search`, over a bounded pool) and in hybrid (`Candidates.agreement`).
- One count per find: the phrases' document counts are read once (`count_phrases`) and handed
  to every part that needs them.
- Hybrid ranks only candidates both lists propose (`CANDIDATES` each) among the visible robots;
  only the `k` winners are loaded as documents.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import NO_PHRASES, Hit, PhraseCounts, Phrases, SearchSnapshot
from robot_mcp_memory.search import agreement, fts, fusion, relevance
from robot_mcp_memory.search.postings import Scored
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.relevance import KeywordBound
from robot_mcp_memory.search.segment import scripts
from robot_mcp_memory.search.vectors import Vector

#: bm25 column weights for (id, title, task_pattern, tags, body).
BM25_WEIGHTS = (0.0, 4.0, 2.0, 2.0, 1.0)
#: How many candidates each list (keyword, vector) contributes to fusion.
CANDIDATES = 50
#: How many of the keyword list's best matches the keyword-only agreement re-ranking looks at, at
#: most (or 4k when more): past it a query whose every match contradicts it (a colour and a room
#: number no one document holds) would load ever more documents for nothing.
AGREEMENT_POOL = 20
#: How many outcome records of one document a read returns at most (the newest): the REST history.
HISTORY_LIMIT = 1000
#: How many of each process's newest outcome records `outcome_events` reads (trends compare halves).
EVENTS_PER_PROCESS = 200
#: The least a rendered log line costs besides its note ("- <20-character time> success: " and
#: its newline): records within `docmodel.MAX_BODY` at this cost include every line that can fit.
LINE_COST = 33


# ---------------------------------------------------------------------------- phrase counts
# ---------------------------------------------------------------------------- a posting cache's top
#: (successes, failures) of each of the ids asked for that exists, as the caller's tenant is shown
#: them (a backend's counters read, one batch of ids at a time).
Counters = Callable[[Sequence[str]], Mapping[str, tuple[int, int]]]


def best_by_reliability(
    scored: Scored, k: int, visible: Collection[str] | None, counters: Counters
) -> list[tuple[str, float]]:
    """(id, relevance) of the `k` best visible matches of a posting cache's answer by relevance ×
    reliability, then id: the very list a plain join over every match ranks
    (`SearchSnapshot.keyword_top` before the documents are read).

    Reliability is below 1, so no score exceeds its relevance: the most relevant matches not read
    yet are read, `counters` a batch at a time (each batch four times the last), until the `k`-th
    best score is above every relevance left. The score is computed as the SQL computes it
    (``relevance * (s + 1.0) / (s + f + 2.0)``, left to right), so ties break alike. A match
    `counters` leaves out (gone) is skipped."""
    if k < 1:
        return []
    at = scored.positions(visible)
    relevance = scored.scores[at]
    unread = np.ones(len(at), np.bool_)
    best: list[tuple[float, str, float]] = []
    batch = max(4 * k, 64)
    while unread.any():
        left = np.flatnonzero(unread)
        if len(left) > batch:
            left = left[np.argpartition(-relevance[left], batch - 1)[:batch]]
        unread[left] = False
        ids = [scored.keys[i] for i in at[left].tolist()]
        counts = counters(ids)
        for pid, rel in zip(ids, relevance[left].tolist(), strict=True):
            got = counts.get(pid)
            if got is not None:
                s, f = got
                best.append((rel * (s + 1.0) / (s + f + 2.0), pid, rel))
        best.sort(key=lambda b: (-b[0], b[1]))
        del best[k:]
        if len(best) == k and unread.any() and best[-1][0] > float(relevance[unread].max()):
            break
        batch *= 4
    return [(pid, rel) for _, pid, rel in best]


def count_phrases(snap: SearchSnapshot, phrases: Phrases) -> PhraseCounts:
    """`phrases` with how many documents hold each (no read for none)."""
    return snap.phrase_counts(phrases) if phrases else NO_PHRASES


def counts_for(snap: SearchSnapshot, phrases: Phrases, counted: PhraseCounts | None) -> PhraseCounts:
    """The counts of `phrases`: `counted` when it counted these very phrases, else read."""
    if counted is not None and counted.phrases == phrases:
        return counted
    return count_phrases(snap, phrases)


# ---------------------------------------------------------------------------- keyword mode
def agreement_text(doc: ProcessDoc) -> str:
    """What a document is checked against the query's slots by: what it is for (title, task
    pattern, tags, as the embedded text), not its steps, whose incidental "turn left at the
    corridor" says nothing of what the process does."""
    return agreement_text_of(doc.title, doc.task_pattern, doc.tags)


def agreement_text_of(title: str, task_pattern: str, tags: Iterable[str]) -> str:
    """`agreement_text` from a document's columns (an adapter that does not load it whole), a
    line each: a label closing the title ("… dock A") is no article of the pattern after it."""
    return "\n".join((title, task_pattern, *tags))


def query_bound(snap: SearchSnapshot, query: Query, counted: PhraseCounts | None = None) -> KeywordBound:
    """What calibrates the keyword relevance of `query` (`relevance.keyword_bound`): the phrases
    its content words are searched by, with how many documents hold each (`counted`, when the
    caller has counted them)."""
    if not query.phrases:
        return relevance.NO_MATCH
    c = counts_for(snap, query.phrases, counted)
    return relevance.keyword_bound(zip(c.phrases, c.docs, strict=True), c.total, query.content)


def keyword_search(
    snap: SearchSnapshot, query: Query, k: int, visible: Collection[str] | None, tenant: str | None = None
) -> list[Hit]:
    """What `find` answers keyword-only: the keyword top over the query's content words
    (function words dropped unless nothing else is left, as the hybrid keyword list drops them:
    in a small store "the" weighed as much as "mop" and brought in every document), with
    relevance calibrated to [0, 1] (`query_bound`) and score = relevance × reliability. The
    calibration is one factor for the whole query, so the order is `agreeing_search`'s."""
    counted = count_phrases(snap, query.phrases)  # what the bound and every search below need
    bound = query_bound(snap, query, counted)
    out = []
    for h in agreeing_search(snap, query, k, visible, tenant, counted):
        rel = bound.relevance(h.relevance)
        out.append(Hit(h.doc, rel * h.doc.reliability, rel, h.fleet))
    return out


def agreeing_search(
    snap: SearchSnapshot,
    query: Query,
    k: int,
    visible: Collection[str] | None,
    tenant: str | None = None,
    counted: PhraseCounts | None = None,
) -> list[Hit]:
    """`SearchSnapshot.keyword_top` with query-term agreement: the `k` best by relevance ×
    agreement × reliability, where a document contradicting the query's colour, direction,
    count…, or silent on one, (`agreement.factor`) has its relevance demoted.

    The factor is at most 1, so a document outside the top `n` (scores at most the `n`-th, s)
    cannot beat a fetched one scoring above s after its factor: when the `k`-th best adjusted
    score is above s (or fewer than `n` matched), the list is exact — at once when none of the
    top `k` is demoted. Otherwise `n` grows once, to ``max(4k, AGREEMENT_POOL)``,
    and the best of those are returned, exact or not (as hybrid ranks only its 50 keyword
    candidates): past that pool a document could only pass if it named the query's values
    and the many ahead of it contradicted the query or were silent on one of its slots, each
    then scoring at most `agreement.SILENCE` of what it had. A query naming no slot is the
    keyword top itself."""
    wanted = query.slots
    if not wanted or k < 1:
        return snap.keyword_top(query.phrases, counted, k, visible, tenant)
    n, most = k, max(4 * k, AGREEMENT_POOL)
    while True:
        hits = snap.keyword_top(query.phrases, counted, n, visible, tenant)
        factors = [agreement.factor(wanted, agreement.text_slots(agreement_text(h.doc))) for h in hits]
        if all(f == 1.0 for f in factors[:k]):
            return hits[:k]  # nothing ahead is demoted, so nothing behind can pass it
        agreed = sorted(
            (Hit(h.doc, h.score * f, h.relevance * f, h.fleet) for h, f in zip(hits, factors, strict=True)),
            key=lambda h: (-h.score, h.doc.id),
        )
        if len(hits) < n or agreed[k - 1].score > hits[-1].score or n >= most:
            return agreed[:k]
        n = most


# ---------------------------------------------------------------------------- hybrid mode
ReliabilityAt = Literal["within", "after"]
FusionOrder = Literal["score", "rrf"]


@dataclass(frozen=True)
class Fusion:
    """How hybrid results are ranked (defaults measured by bench/eval_search.py, docs/search.md).

    `order` says what decides the order: ``score`` (the default), the calibrated relevance
    (`search.relevance`: keyword and vector relevance in [0, 1] averaged with `weights`, each
    scaled by its list's evidence for the query when `evidence`) ×
    reliability, the spec's rule on a relevance that means the same in keyword mode; or ``rrf``,
    weighted reciprocal-rank fusion of the two lists, kept for comparison.

    Under ``rrf``, `reliability` says where the Laplace reliability enters: ``within`` each list
    (keyword by ``-bm25 × reliability``, vector by ``cosine × reliability``, then RRF), or
    ``after`` the fusion (RRF × reliability). RRF scores of neighbouring ranks differ by ~1.6 %
    at k=60, so ``after`` lets any reliability gap outrank relevance; ``within`` keeps the spec's
    "relevance × reliability" inside each method, where relevance still has its spread."""

    weights: tuple[float, float] = (1.0, 1.0)  # keyword, vector
    k: int = fusion.DEFAULT_K
    candidates: int = CANDIDATES
    reliability: ReliabilityAt = "within"
    order: FusionOrder = "score"
    #: Whether a candidate contradicting the query's slots (`agreement`) is demoted, within
    #: each list and after the fusion.
    agreement: bool = True
    #: Whether a keyword candidate's share of the fusion is scaled by how much of the query it
    #: holds (relevance / `Candidates.keyword_bound`): one shared common word ("play" of "play
    #: basketball") is a rank in the keyword list but little evidence.
    coverage: bool = True
    #: Whether a vector candidate's share is scaled by its cosine over the best one's. Measured,
    #: not the default: with keyword:vector 2:1 it ranked better on eval/ (docs/search.md), but
    #: reliability then only reorders candidates of nearly equal relevance.
    closeness: bool = False
    #: Whether, in the calibrated order, each list's weight is scaled by the evidence it carries
    #: for this query (`evidence_weights`): a Chinese query against English documents proposes,
    #: by keyword, only documents sharing a common character, and that list then weighs little.
    evidence: bool = True
    #: A candidate written in no script the query's words are in (an English document for a
    #: Chinese query, `Candidates.blind`) is ranked by its vector relevance alone while the
    #: keyword leg's best match holds less than this share of the query (its `evidence`): the
    #: keyword leg cannot see that candidate, so its keyword 0 is no evidence against it, unless
    #: a document holds most of the query. 0: never (the threshold: docs/search.md).
    cross_script: float = 0.7
    #: Whether, in the calibrated order, a keyword candidate's relevance is scaled by how close
    #: the vector leg puts it beside its nearest candidate (`corroborated`): a match on one
    #: shared word ("play" of "play basketball" in "Play music on the speaker") that the
    #: vectors place far below their first is less evidence than the words it holds say.
    corroborate: bool = True


@dataclass(frozen=True)
class Candidates:
    """What each method proposes for one query, before ranking: (id, relevance) lists, each
    best first and already limited to the visible robots, and the reliability of each visible
    candidate (a candidate missing from it is not ranked); `bound` calibrates the keyword
    relevances, `cosine` holds the cosine of keyword candidates the vector list lacks (below
    `fusion.MIN_COSINE`, or beyond its length)."""

    keyword: list[tuple[str, float]]
    vector: list[tuple[str, float]]
    reliability: dict[str, float]
    bound: KeywordBound = relevance.NO_MATCH
    cosine: dict[str, float] = field(default_factory=dict)
    #: The `agreement.factor` of each candidate it is below 1 for (absent: 1.0).
    agreement: dict[str, float] = field(default_factory=dict)
    #: More than any keyword relevance can be (`keyword_leg`); 0.0: unknown.
    keyword_bound: float = 0.0
    #: The candidates written in no script the query's content words are in (`scripts`): the
    #: keyword leg cannot match them, whatever they say.
    blind: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Ranked:
    """One ranked candidate, before its document is loaded (`Hit` without the document)."""

    ref: str
    score: float
    relevance: float


def keyword_leg(
    snap: SearchSnapshot,
    query: Query,
    n: int,
    visible: Collection[str] | None,
    counted: PhraseCounts | None = None,
) -> tuple[list[tuple[str, float]], float]:
    """(the `n` best visible keyword matches by relevance alone, the query's bound): the bound
    is more than any document's relevance can be (`fts.most_added` summed over the query's
    phrases, those no document holds included), so relevance / bound in [0, 1) says how much of
    the query a match holds. `counted`: as in `query_bound`."""
    if not query.phrases or n < 1:
        return [], 0.0
    c = counts_for(snap, query.phrases, counted)
    bound = sum(fts.most_added(d, c.total) for d in c.docs)
    return snap.keyword_relevant(query.phrases, c, n, visible), bound


def select_agreement(
    snap: SearchSnapshot, query: Query, ids: Collection[str], texts: Mapping[str, str] | None = None
) -> dict[str, float]:
    """The `agreement.factor` of each of `ids` whose title, task pattern or tags contradict a
    slot `query` names, or name no value of it (`agreement_text`; `texts`: already read); the others are left out. No
    read when the query names no slot."""
    wanted = query.slots
    if not wanted or not ids:
        return {}
    out: dict[str, float] = {}
    for pid, text in (snap.agreement_texts(ids) if texts is None else texts).items():
        f = agreement.factor(wanted, agreement.text_slots(text))
        if f < 1.0:
            out[pid] = f
    return out


def query_scripts(query: Query) -> frozenset[str]:
    """The one script the query's content words are in (`segment.scripts`), or none when they
    are in both or in none: only a one-script query has documents its keyword leg cannot see."""
    wanted = scripts(" ".join(query.content))
    return wanted if len(wanted) == 1 else frozenset()


def select_blind(
    snap: SearchSnapshot, query: Query, ids: Collection[str], texts: Mapping[str, str] | None = None
) -> frozenset[str]:
    """Those of `ids` whose agreement text (title, task pattern, tags; `texts`: already read)
    shares no script with the query's content words (`query_scripts`): an English document
    for a Chinese query. No read when the query has no one script."""
    wanted = query_scripts(query)
    if not wanted or not ids:
        return frozenset()
    read = snap.agreement_texts(ids) if texts is None else texts
    return frozenset(pid for pid, text in read.items() if not scripts(text) & wanted)


def hybrid_candidates(
    snap: SearchSnapshot,
    query: Query,
    qvec: Vector,
    model_id: str,
    visible: Collection[str] | None,
    n: int = CANDIDATES,
    tenant: str | None = None,
) -> Candidates | None:
    """Keyword top-`n` and cosine top-`n` (the robot filter applied before ranking, in both),
    in one read snapshot. None when no vector of this model exists yet."""
    nearest = snap.vector_top(qvec, model_id, n, visible)
    if nearest is None:
        return None
    counted = count_phrases(snap, query.phrases)  # for the list and the bound alike
    keyword, bound = keyword_leg(snap, query, n, visible, counted)
    vector = [(ref, cos) for ref, cos in nearest if cos >= fusion.MIN_COSINE]
    reliability = snap.reliability({r for r, _ in keyword} | {r for r, _ in vector}, visible, tenant)
    proposed = {r for r, _ in vector}
    lacking = [r for r, _ in keyword if r not in proposed]
    cosine = snap.vector_among(qvec, model_id, lacking) if lacking else {}
    # One read of the candidates' texts for agreement and the script guard alike.
    texts = snap.agreement_texts(reliability) if reliability and (query.slots or query_scripts(query)) else None
    return Candidates(
        keyword,
        vector,
        reliability,
        query_bound(snap, query, counted),
        cosine,
        select_agreement(snap, query, reliability, texts),
        bound,
        select_blind(snap, query, reliability, texts),
    )


def rank_hybrid(c: Candidates, fuse: Fusion, k: int) -> list[Ranked]:
    """The `k` best candidates as `fuse.order` says: by calibrated relevance × reliability
    (`rank_calibrated`), or by weighted RRF of the two lists with reliability applied as
    `fuse.reliability` says, relevance then being the fused score scaled so 1.0 means "first in
    both lists". Higher is better."""
    if fuse.order == "score":
        weights = evidence_weights(c, fuse.weights) if fuse.evidence else fuse.weights
        blind = c.blind if evidence(c)[0] < fuse.cross_script else frozenset()
        return rank_calibrated(c, weights, k, c.agreement if fuse.agreement else {}, blind, fuse.corroborate)
    rel = c.reliability
    agree = c.agreement if fuse.agreement else {}

    def order(pairs: list[tuple[str, float]]) -> list[str]:
        pairs = [(r, v) for r, v in pairs if r in rel]
        if fuse.reliability == "within":
            pairs.sort(key=lambda p: (-max(p[1], 0.0) * agree.get(p[0], 1.0) * rel[p[0]], p[0]))
        return [r for r, _ in pairs]

    coverage = None
    if fuse.coverage and c.keyword_bound > 0:
        coverage = {r: min(max(v, 0.0) / c.keyword_bound, 1.0) for r, v in c.keyword}
    closeness = None
    if fuse.closeness and c.vector:
        top_cos = max(max(v, 0.0) for _, v in c.vector)
        closeness = {r: max(v, 0.0) / top_cos for r, v in c.vector} if top_cos > 0 else None
    fused = fusion.rrf([order(c.keyword), order(c.vector)], fuse.weights, fuse.k, [coverage, closeness])
    top = fusion.best_possible(fuse.weights, fuse.k) or 1.0
    after = fuse.reliability == "after"

    def score(ref: str) -> float:
        s = fused[ref] / top * agree.get(ref, 1.0)
        return s * rel[ref] if after else s

    # Only the k best of ~100 candidates become objects.
    best = heapq.nsmallest(k, fused, key=lambda ref: (-score(ref), -rel[ref], ref))
    return [Ranked(ref, score(ref), fused[ref] / top * agree.get(ref, 1.0)) for ref in best]


def evidence(c: Candidates) -> tuple[float, float]:
    """How much each list (keyword, vector) says about this query, in [0, 1]: the calibrated
    relevance of the best candidate it proposes. Keyword: how much of the query its best match
    holds (a shared common word or character is a small part of it); vector: how close its
    nearest document is. 0 for a list that proposes nothing."""
    keyword = max((c.bound.relevance(raw) for _, raw in c.keyword), default=0.0)
    vector = max((relevance.vector(cos) for _, cos in c.vector), default=0.0)
    return keyword, vector


def evidence_weights(c: Candidates, weights: tuple[float, float]) -> tuple[float, float]:
    """The (keyword, vector) `weights` each scaled by its list's `evidence` for this query.

    One pair for the whole query, so every candidate's hybrid relevance is still the same
    weighted average of two relevances in [0, 1] (in [0, 1] itself, an exact match high in
    both staying high), and an unchanged ratio of evidence leaves the weights' ratio as set:
    a list that proposes nothing drops out, and the other's relevance is the hybrid one."""
    ek, ev = evidence(c)
    return weights[0] * ek, weights[1] * ev


#: A keyword relevance is never scaled below this share by `corroborated`: a match the
#: vectors do not see (a code, a name the model has no meaning for) still ranks.
CORROBORATION_FLOOR = 0.2


def corroborated(keyword: Mapping[str, float], cosine: Mapping[str, float]) -> dict[str, float]:
    """Each keyword relevance × the candidate's vector relevance over the best vector
    relevance among the candidates, within [`CORROBORATION_FLOOR`, 1]: 1 for the vectors'
    first (an exact match is both legs' first), less for a match they place far below it. A
    candidate without a cosine (no vector yet: edited, its backfill pending) or with one that
    is no number keeps its keyword relevance: the vectors say nothing of it."""
    best = max((relevance.vector(cos) for cos in cosine.values() if math.isfinite(cos)), default=0.0)
    if best <= 0:
        return dict(keyword)

    def share(ref: str) -> float:
        cos = cosine.get(ref)
        if cos is None or not math.isfinite(cos):
            return 1.0
        return max(CORROBORATION_FLOOR, min(1.0, relevance.vector(cos) / best))

    return {ref: k * share(ref) for ref, k in keyword.items()}


def calibrated(
    c: Candidates, weights: tuple[float, float], blind: Collection[str] = frozenset(), corroborate: bool = False
) -> dict[str, float]:
    """Each visible candidate's hybrid relevance in [0, 1] (`relevance.hybrid`); one of
    `blind` (`Candidates.blind`) by its vector relevance alone, when the vector weight is set;
    with `corroborate`, the keyword relevances `corroborated` by the vectors first."""
    keyword = {ref: c.bound.relevance(raw) for ref, raw in c.keyword}
    cosine = {**c.cosine, **dict(c.vector)}
    if corroborate:
        keyword = corroborated(keyword, cosine)
    vector_only = (0.0, weights[1])
    return {
        ref: relevance.hybrid(
            keyword.get(ref, 0.0),
            relevance.vector(cosine.get(ref, 0.0)),
            vector_only if ref in blind and weights[1] > 0 else weights,
        )
        for ref in keyword.keys() | cosine.keys()
        if ref in c.reliability
    }


def rank_calibrated(
    c: Candidates,
    weights: tuple[float, float],
    k: int,
    agree: Mapping[str, float] | None = None,
    blind: Collection[str] = frozenset(),
    corroborate: bool = False,
) -> list[Ranked]:
    """The `k` best by calibrated relevance × agreement × reliability, then relevance, then id:
    a candidate contradicting a slot the query names (`agree`, `Candidates.agreement`) has its
    relevance demoted. A candidate of relevance 0 (a keyword list's cosine below the floor, with
    a zero keyword weight) is not a match. `corroborate`: as in `calibrated`."""
    rel = calibrated(c, weights, blind, corroborate)
    if agree:
        rel = {ref: r * agree.get(ref, 1.0) for ref, r in rel.items()}
    best = heapq.nsmallest(
        k,
        (ref for ref, r in rel.items() if r > 0),
        key=lambda ref: (-rel[ref] * c.reliability[ref], -rel[ref], ref),
    )
    return [Ranked(ref, rel[ref] * c.reliability[ref], rel[ref]) for ref in best]


def hybrid_search(
    snap: SearchSnapshot,
    query: Query,
    qvec: Vector,
    model_id: str,
    visible: Collection[str] | None,
    fuse: Fusion,
    k: int,
    tenant: str | None = None,
) -> list[Hit] | None:
    """The `k` best hybrid hits, ranked and loaded in one read snapshot (None: no vectors of
    this model yet). Only the `k` winners are loaded as documents."""
    cands = hybrid_candidates(snap, query, qvec, model_id, visible, fuse.candidates, tenant)
    if cands is None:
        return None
    ranked = rank_hybrid(cands, fuse, k)
    viewed = snap.documents([r.ref for r in ranked], tenant)
    return [Hit(doc, r.score, r.relevance, fleet) for r, (doc, fleet) in zip(ranked, viewed, strict=True)]


__all__ = [
    "AGREEMENT_POOL",
    "BM25_WEIGHTS",
    "CANDIDATES",
    "CORROBORATION_FLOOR",
    "EVENTS_PER_PROCESS",
    "HISTORY_LIMIT",
    "LINE_COST",
    "Candidates",
    "Fusion",
    "Ranked",
    "agreeing_search",
    "agreement_text",
    "calibrated",
    "corroborated",
    "evidence",
    "evidence_weights",
    "hybrid_candidates",
    "hybrid_search",
    "keyword_search",
    "query_bound",
    "query_scripts",
    "rank_calibrated",
    "rank_hybrid",
    "select_agreement",
    "select_blind",
]
