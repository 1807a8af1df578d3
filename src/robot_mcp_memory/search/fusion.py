"""Weighted reciprocal-rank fusion. Pure functions.

Each input is a ranked list of ids (best first). An id at 1-based rank ``r`` in list ``i``
earns ``w_i / (k + r)``; the fused score is the sum over the lists it appears in. Ranks, not
raw scores, are fused, so BM25's unbounded values and cosine's [-1, 1] need no calibration.

`rrf` also reports the largest score any id could earn (first in every list), so callers can
scale scores into (0, 1] — ``1.0`` means "ranked first by every method" — without changing
the order.

Ranks hide how far ahead a first place is. `standout` and `holds_every_term` tell when the
keyword side is sure of its best matches (far above the next by relevance, and holding every
term of the query), and `promoted` raises such ids above every fused score; experience recall
uses them (`experiences/recall.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from robot_mcp_memory.search import segment

DEFAULT_K = 60
#: A vector candidate below this cosine shares no meaning with the query, only noise: it is not
#: proposed to fusion (keyword search returns only matches; hybrid search should not pad every
#: answer with noise — "zzqx gibberish" returned three processes at ~0.5).
MIN_COSINE = 0.2
#: A number with a unit ("12.5N", "3mm", "5kg"): a value, not an identifier.
_VALUE = re.compile(r"\d+(?:[.,]\d+)*[^\W\d_]{0,3}")


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


def standout(relevances: Iterable[tuple[str, float]], gap: float, up_to: int) -> list[str]:
    """The ids of the best keyword matches when they stand out: the first `i` (at most `up_to`)
    by relevance such that the next one's relevance times `gap` is at most the `i`-th's — every
    match at or above the cut, and none below it. One match alone stands out. Empty when the
    relevances fall gradually (no cut within `up_to`), or the best is not positive.

    Ranks hide this: a memory holding a rare term of the query (an error code, a serial) scores
    far above the memories that share only its common words, yet ranks first by one place."""
    order = sorted(relevances, key=lambda x: (-x[1], x[0]))
    if not order or order[0][1] <= 0:
        return []
    for i in range(min(up_to, len(order))):
        if i + 1 == len(order) or order[i + 1][1] * gap <= order[i][1]:
            return [ref for ref, _ in order[: i + 1]]
    return []


def holds_every_term(query: str, text: str) -> bool:
    """Whether `text` holds every searched term of `query` as a token of its own (as the index
    splits and folds them; function words aside, unless the query is nothing else). No stemming:
    "fail" is not held by "failed", so a match this vouches for is a literal one."""
    terms = segment.tokens(query)
    wanted = {t for t in terms if t not in segment.STOPWORDS} or set(terms)
    return bool(wanted) and wanted <= set(segment.tokens(text))


def identifiers(query: str) -> list[str]:
    """The words of `query` that name something: letters and digits in one word, as error codes,
    part numbers, serials and robot ids are written ("E-4471", "PN-20931-B", "SN-7QK2118"),
    but not a number with its unit ("12.5N")."""
    out = []
    for word in query.split():
        word = word.strip(".,;:!?()[]{}'\"")
        if any(c.isdigit() for c in word) and any(c.isalpha() for c in word) and not _VALUE.fullmatch(word):
            out.append(word)
    return list(dict.fromkeys(out))


def holds_identifiers(names: Sequence[str], text: str) -> bool:
    """Whether `text` holds each of `names` (`identifiers`) whole: its tokens, as the index
    splits them, one after the other ("E-4471" is "e 4471", not an "e" here and a "4471" there)."""
    have = segment.tokens(text)
    for name in names:
        want = segment.tokens(name)
        if not want or not any(have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1)):
            return False
    return bool(names)


def promoted(scores: dict[str, float], first: Iterable[str], top: float) -> dict[str, float]:
    """`scores` with every id of `first` it holds raised by `top` (at least any score's value),
    so they rank above every other id and keep their order among themselves."""
    out = dict(scores)
    for ref in set(first):
        if ref in out:
            out[ref] += top
    return out


__all__ = [
    "DEFAULT_K",
    "best_possible",
    "holds_every_term",
    "holds_identifiers",
    "identifiers",
    "promoted",
    "ranked",
    "rrf",
    "standout",
]
