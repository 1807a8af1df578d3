"""Weighted reciprocal-rank fusion. Pure functions.

Each input is a ranked list of ids (best first). An id at 1-based rank ``r`` in list ``i``
earns ``w_i / (k + r)``; the fused score is the sum over the lists it appears in. Ranks, not
raw scores, are fused, so BM25's unbounded values and cosine's [-1, 1] need no calibration.

`rrf` also reports the largest score any id could earn (first in every list), so callers can
scale scores into (0, 1] — ``1.0`` means "ranked first by every method" — without changing
the order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

DEFAULT_K = 60
#: A vector candidate below this cosine shares no meaning with the query, only noise: it is not
#: proposed to fusion (keyword search returns only matches; hybrid search should not pad every
#: answer with noise — "zzqx gibberish" returned three processes at ~0.5).
MIN_COSINE = 0.2


def rrf(
    lists: Sequence[Sequence[str]],
    weights: Sequence[float] | None = None,
    k: int = DEFAULT_K,
    scales: Sequence[Mapping[str, float] | None] | None = None,
) -> dict[str, float]:
    """Fused score per id. Duplicates within one list count at their best rank only.

    `scales[i]`, when given, multiplies each id's share from list ``i`` (absent ids: 1.0) — a
    value in [0, 1] saying how strong that list's evidence for the id is beyond its rank."""
    if weights is None:
        weights = [1.0] * len(lists)
    if len(weights) != len(lists):
        raise ValueError(f"{len(lists)} lists but {len(weights)} weights")
    if scales is not None and len(scales) != len(lists):
        raise ValueError(f"{len(lists)} lists but {len(scales)} scales")
    if k < 1:
        raise ValueError("k must be at least 1")
    scores: dict[str, float] = {}
    for i, (ids, weight) in enumerate(zip(lists, weights, strict=True)):
        if weight <= 0:
            continue
        scale = scales[i] if scales is not None else None
        seen: set[str] = set()
        for rank, ref in enumerate(ids, start=1):
            if ref in seen:
                continue
            seen.add(ref)
            share = weight / (k + rank)
            scores[ref] = scores.get(ref, 0.0) + (share * scale.get(ref, 1.0) if scale is not None else share)
    return scores


def best_possible(weights: Sequence[float], k: int = DEFAULT_K) -> float:
    """The score of an id ranked first in every list with a positive weight."""
    return sum(w for w in weights if w > 0) / (k + 1)


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """Ids by descending score; ties by id, so the order is deterministic."""
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


__all__ = ["DEFAULT_K", "best_possible", "ranked", "rrf"]
