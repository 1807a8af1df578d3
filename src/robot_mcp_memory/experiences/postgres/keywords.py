"""Keyword recall on PostgreSQL: a memory indexed as ``memories_fts`` indexes it, a query scored as
FTS5's ``bm25(memories_fts, 1.0, 0.4)`` scores it.

Invariants:

- **The tokens are FTS5's.** An entry is (content, context text) exactly as the SQLite adapter
  writes it (`segment.index_text` of the content; `indexing.context_text` of the context and the
  user's tags), tokenized by FTS5 itself with memories_fts's ``tokenize=`` option
  (`search.sqlite.tokens`), each token's positions per column stored in ``memory_postings`` and
  the entry's length in ``memories.doclen``, in the memory's own write transaction.
- **The scores are FTS5's.** A query's phrases (FTS5 phrases, quoted, a lone trailing ``*`` a
  prefix; `segment.match_phrases`) are tokenized the same way; a memory holds a phrase where its
  tokens stand at consecutive positions of one column, and `search.bm25` adds up the phrases'
  terms over every entry of the index (every memory, whatever its status, collection or robot:
  FTS5's idf and average length count them all) — so relevance is the double ``-bm25()`` gives
  on SQLite for the same memories (tests/experiences/postgres/test_parity.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The SQLite adapter's index rules, which these scores must reproduce: memories_fts's tokenizer,
# its bm25 column weights, and the context's searchable text.
from robot_mcp_memory.experiences.indexing import BM25_WEIGHTS, MEMORIES_TOKENIZE, context_text
from robot_mcp_memory.search import bm25, segment
from robot_mcp_memory.search.postgres.postings import PostingCache
from robot_mcp_memory.search.sqlite.tokens import Fts5Tokens
from robot_mcp_memory.storage.postgres import Connection

WEIGHTS: tuple[float, ...] = tuple(float(w) for w in BM25_WEIGHTS.split(","))
_COLUMNS = 2  # content, context text
_TOKENS = Fts5Tokens(MEMORIES_TOKENIZE, _COLUMNS)
_PHRASE = re.compile(r'"((?:[^"]|"")*)"(\s*\*)?')


@dataclass(frozen=True)
class Phrase:
    """One query phrase: its tokens, the last one a prefix when `prefix`."""

    tokens: tuple[str, ...]
    prefix: bool = False


def entry(content: str, context: dict[str, object], user_tags: Sequence[str]) -> tuple[str, str]:
    """The index entry of a memory: (content text, context text), as memories_fts holds it."""
    return segment.index_text(content), context_text(context, user_tags)


def postings_of(texts: tuple[str, str]) -> tuple[dict[tuple[str, int], list[int]], int]:
    """The postings of an index entry — each (term, column)'s positions — and its length in
    tokens: what `write_entry` stores, and what a health check compares the stored ones with."""
    [found] = _TOKENS.instances([list(texts)])
    positions: dict[tuple[str, int], list[int]] = {}
    for col, offset, token in found:
        positions.setdefault((token, col), []).append(offset)
    return positions, len(found)


def write_entry(conn: Connection, mid: int, texts: tuple[str, str]) -> None:
    """Replace memory `mid`'s postings and length with those of `texts`, in the caller's transaction."""
    positions, length = postings_of(texts)
    conn.execute("DELETE FROM memory_postings WHERE memory_id = %s", (mid,))
    if positions:
        keys = list(positions)
        conn.execute(
            "INSERT INTO memory_postings(term, memory_id, col, positions) "
            "SELECT t, %s, c, p::integer[] FROM unnest(%s::text[], %s::smallint[], %s::text[]) AS u(t, c, p)",
            (
                mid,
                [t for t, _ in keys],
                [c for _, c in keys],
                ["{" + ",".join(map(str, positions[k])) + "}" for k in keys],
            ),
        )
    conn.execute("UPDATE memories SET doclen = %s WHERE id = %s", (length, mid))


def phrases(match: Sequence[str]) -> list[Phrase]:
    """The query's phrases as tokens (an FTS5 phrase that makes no token matches nothing: dropped)."""
    out: list[Phrase] = []
    for p in match:
        m = _PHRASE.fullmatch(p.strip())
        if m is None:
            continue
        tokens = tuple(_TOKENS.tokens(m.group(1).replace('""', '"')))
        if tokens:
            out.append(Phrase(tokens, m.group(2) is not None))
    return out


def _like_prefix(token: str) -> str:
    return token.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def relevance(conn: Connection, match: Sequence[str], cache: PostingCache | None = None) -> dict[int, float]:
    """Each memory holding one of the phrases of `match` (OR-ed) and its relevance,
    ``-bm25(memories_fts, 1.0, 0.4)`` of the SQLite index holding the same memories.

    From `cache` (this replica's `postings` cache) when it can answer for `conn`'s snapshot and
    no phrase is a prefix — the same doubles. Otherwise in SQL: a phrase of one token (most
    are: `segment.match_phrases` quotes each term) needs only how often its token stands in
    each column — the positions' count, no positions read; a longer phrase, or a prefix, reads
    the positions of its tokens and finds its instances."""
    wanted = phrases(match)
    if not wanted:
        return {}
    if cache is not None and not any(p.prefix for p in wanted):
        scored = cache.score(conn, [p.tokens for p in wanted])
        if scored is not None:
            return dict(zip(map(int, scored.keys[:]), scored.scores.tolist(), strict=True))
    single = sorted({p.tokens[0] for p in wanted if len(p.tokens) == 1 and not p.prefix})
    others = [p for p in wanted if len(p.tokens) > 1 or p.prefix]
    lengths: dict[int, int] = {}
    counts: dict[str, dict[int, list[int]]] = {}
    if single:
        for term, mid, col, n, doclen in conn.execute(
            "SELECT p.term, p.memory_id, p.col, cardinality(p.positions), m.doclen FROM memory_postings p "
            "JOIN memories m ON m.id = p.memory_id WHERE p.term = ANY(%s::text[])",
            (single,),
        ):
            counts.setdefault(term, {}).setdefault(int(mid), [0] * _COLUMNS)[col] = int(n)
            lengths[int(mid)] = int(doclen)
    postings: dict[tuple[int, str], list[tuple[int, list[int]]]] = {}
    terms_like: dict[str, set[str]] = {}
    if others:
        exact = sorted({t for p in others for t in (p.tokens[:-1] if p.prefix else p.tokens)})
        prefixes = sorted({_like_prefix(p.tokens[-1]) for p in others if p.prefix})
        for term, mid, col, pos, doclen in conn.execute(
            "SELECT p.term, p.memory_id, p.col, p.positions, m.doclen FROM memory_postings p "
            "JOIN memories m ON m.id = p.memory_id WHERE p.term = ANY(%s::text[]) OR p.term LIKE ANY(%s::text[])",
            (exact, prefixes),
        ):
            postings.setdefault((int(mid), term), []).append((int(col), list(pos)))
            lengths[int(mid)] = int(doclen)
        for p in others:
            if p.prefix:
                terms_like[p.tokens[-1]] = {t for _, t in postings if t.startswith(p.tokens[-1])}
    if not lengths:
        return {}
    stats = conn.execute("SELECT count(*), coalesce(sum(doclen), 0) FROM memories").fetchone()
    n_rows, n_tokens = (int(stats[0]), int(stats[1])) if stats else (0, 0)
    docs = sorted(lengths)
    where = {d: i for i, d in enumerate(docs)}
    doclen = np.array([float(lengths[d]) for d in docs], np.float64)
    holding: dict[str, list[int]] = {}  # a longer phrase's candidates: the memories holding its first token
    for mid, term in postings:
        holding.setdefault(term, []).append(mid)
    terms: list[bm25.Term] = []
    for phrase in wanted:
        ids: list[int] = []
        freqs: list[float] = []
        if len(phrase.tokens) == 1 and not phrase.prefix:
            for mid, n in sorted(counts.get(phrase.tokens[0], {}).items()):
                ids.append(where[mid])
                freqs.append(bm25.weighted_frequency(tuple(n), WEIGHTS))
        else:
            first = phrase.tokens[0]
            names = terms_like.get(first, set()) if phrase.prefix and len(phrase.tokens) == 1 else {first}
            for mid in sorted({m for name in names for m in holding.get(name, [])}):
                found = _instances(phrase, postings, mid, terms_like)
                if any(found):
                    ids.append(where[mid])
                    freqs.append(bm25.weighted_frequency(found, WEIGHTS))
        terms.append(bm25.Term(np.array(ids, np.int64), np.array(freqs, np.float64)))
    found_ids, scores = bm25.scores(terms, doclen, n_rows, n_tokens)
    return {docs[int(i)]: float(s) for i, s in zip(found_ids, scores, strict=True)}


def _instances(
    phrase: Phrase,
    postings: dict[tuple[int, str], list[tuple[int, list[int]]]],
    mid: int,
    terms_like: dict[str, set[str]],
) -> tuple[int, ...]:
    """How many times `phrase` occurs in each column of memory `mid`: its tokens at consecutive
    positions of one column (the last one any term it begins, for a prefix phrase), as FTS5
    counts a phrase's instances."""

    def at(i: int) -> dict[int, set[int]]:
        token = phrase.tokens[i]
        names = terms_like.get(token, set()) if phrase.prefix and i == len(phrase.tokens) - 1 else {token}
        held: dict[int, set[int]] = {}
        for name in names:
            for col, pos in postings.get((mid, name), []):
                held.setdefault(col, set()).update(pos)
        return held

    each = [at(i) for i in range(len(phrase.tokens))]
    counts = [0] * _COLUMNS
    for col, starts in each[0].items():
        rest = [e.get(col, set()) for e in each[1:]]
        counts[col] = sum(1 for s in starts if all(s + i + 1 in held for i, held in enumerate(rest)))
    return tuple(counts)


__all__ = ["WEIGHTS", "Phrase", "entry", "phrases", "relevance", "write_entry"]
