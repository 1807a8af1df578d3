"""Relevance in [0, 1] that means the same in keyword and hybrid search. Pure functions.

FTS5's ``-bm25`` is unbounded and scaled by the corpus: a phrase held by half the documents or
more weighs 1e-6, so in a store of three documents an exact match scored ~4e-06, and RRF's
fused rank scores say nothing about how well anything matched (1.0 for whatever came first,
~0.48 for an unrelated document second in one list). Neither can serve as a cut-off.

- **Keyword**: ``-bm25`` divided by the query's bound, the most any document could score for
  the phrases FTS5 scored it by — each phrase adds ``idf × f × (k1 + 1) / (f + k1 × …)``, which
  stays below ``idf × (k1 + 1)`` (`fts.BM25_K1`), with FTS5's own idf (clamped to 1e-6 where
  it is <= 0) — times the share of the query's content words that some document holds (a word
  no document holds is a part of the query nothing matches; without it, "mop the hall floor"
  against a store that only knows "floor" would score "Sweep the kitchen floor" as a perfect
  match). Both factors are constant within one query, so the keyword order is bm25's own. An
  exact match scores ~0.75–0.9 (bm25 saturates: a word in the title counts 4, the task
  pattern and tags 2, the body 1), a document holding one of four words ~0.2.
- **Vector**: cosine mapped linearly from `MIN_COSINE` (0: below it a candidate is noise and
  not proposed) to 1.
- **Hybrid**: the two averaged with the fusion weights (0 for a candidate a list does not
  hold; `find_processes` scales each weight by its list's evidence for the query first,
  `processes.ranking.evidence_weights`). An exact match is high in both, so it stays high; a
  document neither finds is low in both modes; a paraphrase that shares no word with the
  document (a Chinese instruction for an English title) rests on its cosine, weighed against
  a keyword list that holds little of the query. Measured on eval/ (docs/search.md), ranking
  by this relevance × reliability put more targets first than RRF with both neutral and
  random counts.

A document's `score` is its relevance × reliability, as the spec says.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from robot_mcp_memory.search.fts import BM25_K1
from robot_mcp_memory.search.fusion import MIN_COSINE
from robot_mcp_memory.search.segment import has_cjk

#: What `find_processes` says, with an empty list, when nothing reached `min_score` (or nothing
#: matched at all): an explicit "nothing relevant" rather than filler.
NOTHING_RELEVANT = "no process matched well enough"


def idf(docs: int, total: int) -> float:
    """FTS5's idf of a phrase held by `docs` of `total` documents (``fts5Bm25Function``)."""
    value = math.log((total - docs + 0.5) / (docs + 0.5)) if total else 0.0
    return value if value > 0 else 1e-6


@dataclass(frozen=True)
class KeywordBound:
    """What calibrates one query's ``-bm25`` values: `most`, above every score any document
    can get for the phrases scored, and `coverage`, the share of the query's content words
    some document holds."""

    most: float
    coverage: float

    def relevance(self, raw: float) -> float:
        """``-bm25`` (higher is better) as a relevance in [0, 1]."""
        if self.most <= 0 or raw <= 0:
            return 0.0
        return min(raw / self.most, 1.0) * self.coverage


#: The bound of a query that matches nothing.
NO_MATCH = KeywordBound(0.0, 0.0)


def keyword_bound(held: Iterable[tuple[str, int]], total: int, words: Iterable[str]) -> KeywordBound:
    """The bound for a query scored by the phrases `held` — (phrase, how many of the `total`
    documents hold it), phrases no document holds left out (they add nothing) — whose content
    words are `words`. A word counts as held when a held phrase is it, contains it (a joined
    pair: "mail room" → "mailroom"; a number with its unit) or is part of it (the bigrams of a
    Han word)."""
    held = [(p.casefold(), n) for p, n in held if n > 0]
    most = sum(idf(n, total) for _, n in held) * (BM25_K1 + 1)
    keys = [w.casefold() for w in words]
    if not held or not keys:
        return KeywordBound(most, 1.0 if held else 0.0)
    phrases = [p for p, _ in held]
    covered = sum(1 for w in keys if any(w in p or (p in w and has_cjk(p)) for p in phrases))
    return KeywordBound(most, covered / len(keys))


def vector(cosine: float) -> float:
    """A cosine as a relevance in [0, 1]: 0 at `MIN_COSINE` and below, 1 at 1."""
    return min(max((cosine - MIN_COSINE) / (1.0 - MIN_COSINE), 0.0), 1.0)


def hybrid(keyword: float, vector_: float, weights: tuple[float, float] = (1.0, 1.0)) -> float:
    """A hybrid candidate's relevance from its calibrated keyword and vector relevances (0 for a
    list it does not appear in), averaged with the (keyword, vector) `weights`."""
    wk, wv = (max(w, 0.0) for w in weights)
    if wk + wv <= 0:
        return 0.0
    return (wk * keyword + wv * vector_) / (wk + wv)


__all__ = ["NOTHING_RELEVANT", "NO_MATCH", "KeywordBound", "hybrid", "idf", "keyword_bound", "vector"]
