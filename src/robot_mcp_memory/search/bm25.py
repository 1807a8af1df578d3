"""FTS5's bm25, computed from posting lists held in memory, to the last bit.

FTS5 scores a match by walking its instances and reading its length from a shadow table, once
per matching row: a recall whose query holds a common word spends most of its time there,
although only a handful of the memories scored can make the list. Here each word's documents and
weighted frequencies are numpy arrays, and a query's scores for every matching document are a
few array passes per phrase (docs/search.md has the figures).

The arithmetic is FTS5's own (``fts5Bm25Function`` in sqlite's ``fts5_aux.c``), operation for
operation, so a score is the very double ``-bm25()`` returns and a list ranked from it ties and
orders exactly as the SQL one (tests/experiences/test_keyword_cache.py):

- a phrase's weighted frequency f in a document is the column weight added once per instance, in
  instance order (all of the first column's, then the second's);
- D is the document's length in tokens over all columns, avgdl = tokens / rows of the whole index;
- idf = log((N - n + 0.5) / (n + 0.5)) for a phrase in n of N documents, 1e-6 where that is <= 0;
- a document's score is 0.0 + the phrases' terms ``idf × (f × (k1 + 1)) / (f + k1 × (1 - b + b × D
  / avgdl))``, added in the order the phrases appear in the query (a repeated phrase counts twice).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

K1 = 1.2
B = 0.75

Ids = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


@lru_cache(maxsize=4096)
def weighted_frequency(counts: tuple[int, ...], weights: tuple[float, ...]) -> float:
    """f for a document holding a phrase `counts[i]` times in column i: each instance adds its
    column's weight, in column order, as FTS5 adds them."""
    f = 0.0
    for n, w in zip(counts, weights, strict=True):
        for _ in range(n):
            f += w
    return f


def idf(docs: int, rows: int) -> float:
    """The inverse document frequency FTS5 gives a phrase held by `docs` of `rows` documents."""
    value = math.log((rows - docs + 0.5) / (docs + 0.5))
    return value if value > 0.0 else 1e-6


@dataclass(frozen=True)
class Term:
    """One phrase of a query: the documents holding it and its weighted frequency in each."""

    ids: Ids
    f: Floats


def scores(terms: Sequence[Term], doclen: Floats, rows: int, tokens: int) -> tuple[Ids, Floats]:
    """(documents, scores): every document holding one of `terms` and its bm25 score (positive:
    ``-bm25()``), `terms` in query order. `doclen[d]` is document d's length in tokens; `rows`
    and `tokens` the index's row and token counts (FTS5's averages record)."""
    if not terms or rows <= 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    avgdl = float(tokens) / float(rows)
    held = [t for t in terms if len(t.ids)]
    if not held:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    # Every term's values in one pass over all the postings (numpy's cost is per operation, not
    # per element, at these sizes), each element by the same operations as one term at a time.
    ids = np.concatenate([t.ids for t in held])
    f = np.concatenate([t.f for t in held])
    lengths = [len(t.ids) for t in held]
    weights = np.repeat(np.array([idf(n, rows) for n in lengths], np.float64), lengths)
    d = doclen[ids]
    # `1 - b + b * D / avgdl` in C is ((1 - b) + ((b * D) / avgdl)): the same operations here.
    values = weights * ((f * (K1 + 1.0)) / (f + K1 * ((1 - B) + (B * d) / avgdl)))
    size = int(ids.max()) + 1
    acc = np.zeros(size, np.float64)
    start = 0
    for n in lengths:  # added term by term, in query order, as FTS5 adds them
        acc[ids[start : start + n]] += values[start : start + n]
        start += n
    # The matches: the documents of any term (every value added is > 0: idf >= 1e-6, f > 0),
    # found in a boolean array — numpy scans one for its true entries faster than `acc` for its
    # non-zero ones.
    held_by = np.zeros(size, np.bool_)
    held_by[ids] = True
    found = np.flatnonzero(held_by)
    return found.astype(np.int64, copy=False), acc[found]
