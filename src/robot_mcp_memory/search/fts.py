"""Turn any natural-language text into a safe FTS5 ``MATCH`` expression.

User text never reaches ``MATCH`` unquoted: every term is wrapped in double quotes (so ``AND``,
``OR``, ``NEAR``, ``*``, ``-``, ``:``, ``(`` are plain words or dropped), and terms are OR-ed so a
long instruction still matches documents that share only some of its words. bm25 does the rest.

Tokens are Unicode word runs of the query in NFC (as `segment.index_text` stores text), so
Cyrillic, accented Latin typed in decomposed form, kana and Hangul survive. Adjacent word pairs
are also offered joined ("mail room" → "mailroom") because compound spellings are common in place
names, and a kanji-only word is also offered as the bigrams a mixed kanji/kana title holds
(`segment.han_run_phrases`: "研究所" → "研究 究所"). A dotted number ("1.2.10", "12.5") is one
term, the phrase of its pieces, as recall searches it (`segment.DOTTED`, `segment.number_variants`):
firmware "1.2.10" no longer matches "1.10.2".

The keyword list of hybrid search drops function words (`content_terms`) and, when it can prove
the top of the list unchanged, lets only the rarer phrases choose which documents FTS5 scores
(`skippable`, `restricted_expression`): bm25 is computed for every match, and a common word
matches much of the store while adding little to any score.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterable, Sequence

from robot_mcp_memory.search.segment import DOTTED, STOPWORDS, han_run_phrases, has_cjk, number_variants, query_text

#: Word characters and the combining diacritics NFC leaves (Yoruba "ẹ́"), which FTS5 keeps inside
#: a word too; a word starts with a letter or digit ("_" around a word is dropped). A dotted
#: number is one term (`segment.DOTTED`).
_WORD = re.compile(r"[^\W_][\w\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]*")
_TERM = re.compile(f"{DOTTED.pattern}|{_WORD.pattern}")
MAX_TERMS = 32
#: FTS5's bm25 constant k1. A phrase adds idf × f × (k1 + 1) / (f + k1 × (1 - b + b × D / avgdl))
#: to a document's score (f its weighted frequency there, D the document's length), which stays
#: below idf × (k1 + 1); idf = log((N - n + 0.5) / (n + 0.5)) for a phrase in n of N documents,
#: clamped to 1e-6 where that is <= 0.
BM25_K1 = 1.2


#: Texts whose terms `terms` remembers: one find tokenises its query several times over (the
#: mode check, the keyword leg, its phrase counts, the bound), and a fleet repeats its queries.
TERMS_CACHE = 512


def terms(text: str) -> list[str]:
    """Distinct word tokens of `text` (compared case-insensitively), in order: the first
    `MAX_TERMS` content words and the first `MAX_TERMS` function words among them (a long
    instruction's function words no longer use up the cap before its last content words, as
    recall's `segment.match_phrases` never let them).

    Tokens keep their case: FTS5 folds case itself, with the same tables for the query as for the
    indexed text. Lower-casing here with Python's newer Unicode tables would miss letters that
    sqlite's unicode61 (Unicode 6.1) does not fold, such as Georgian Mtavruli or Greek Yot.

    A pure function of `text`, remembered for the last `TERMS_CACHE` texts; each call returns a
    list of its own."""
    return list(_terms(text))


@functools.lru_cache(maxsize=TERMS_CACHE)
def _terms(text: str) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    content = function = 0
    # CJK runs become words as the index stores them (`segment.index_text`): "把包裹从收发室取来"
    # would otherwise be one token, matching only the whole title.
    for m in _TERM.finditer(query_text(text)):
        tok = m.group(0).strip("_")
        key = tok.casefold()
        if not tok or key in seen:
            continue
        if key in STOPWORDS:
            if function == MAX_TERMS:
                continue
            function += 1
        else:
            if content == MAX_TERMS:
                continue
            content += 1
        seen[key] = tok
        if content == function == MAX_TERMS:
            break
    return tuple(seen.values())


def content_terms(text: str) -> list[str]:
    """`terms(text)` without function words (`segment.STOPWORDS`, compared case-insensitively,
    so "I" goes too), unless nothing else is left: then all of them."""
    words = terms(text)
    return [t for t in words if t.casefold() not in STOPWORDS] or words


def phrases(text: str, *, join_pairs: bool = True) -> list[str]:
    """What `match_expression` ORs, unquoted: the terms of `text`, then (with `join_pairs`)
    each adjacent pair of ASCII words joined, then its dotted numbers written with or without
    the space before their unit (`segment.number_variants`: "12.5 N" → "12.5n"), then the bigram
    phrases of its Han-only runs (`segment.han_run_phrases`, at most `MAX_TERMS`: a kanji-only
    word finds a Japanese title)."""
    words = terms(text)
    extra: list[str] = []
    if join_pairs:
        for a, b in itertools.pairwise(words):
            if a.isalpha() and b.isalpha() and a.isascii() and b.isascii():
                extra.append(a + b)
    mine = {w.casefold() for w in words}
    extra.extend(v for t, v in number_variants(text) if t in mine and v not in mine)
    if has_cjk(text):
        extra.extend([p for p in han_run_phrases(text) if p not in words][:MAX_TERMS])
    return list(dict.fromkeys(words + extra))


def any_of(found: Sequence[str]) -> str | None:
    """An FTS5 query OR-ing every phrase, each quoted; None for none."""
    return " OR ".join(_quote(t) for t in found) or None


def match_expression(text: str, *, join_pairs: bool = True) -> str | None:
    """An FTS5 query OR-ing every quoted term of `text`, or None when nothing is searchable."""
    return any_of(phrases(text, join_pairs=join_pairs))


def most_added(docs: int, total: int) -> float:
    """More than a phrase held by `docs` of `total` documents can add to any bm25 score."""
    idf = math.log((total - docs + 0.5) / (docs + 0.5)) if total else 0.0
    return (idf if idf > 0 else 1e-6) * (BM25_K1 + 1)


#: 1 % of slack on every bound: `total` counts rows, FTS5's N counts index entries (equal unless broken).
BOUND_SLACK = 1.01


def skippable(words: Sequence[str], docs: Sequence[int], total: int) -> tuple[list[str], float]:
    """(rest, bound): the commonest of `words` that may be left out of choosing matches, and
    more than they can add to any score together (`docs[i]` of the `total` documents hold
    `words[i]`). They are taken commonest first while together they can add less than the
    rarest word found can alone: a guess that the best documents hold another word and score
    above `bound`, which the caller checks. Empty when fewer than two words are found."""
    found = [(n, w) for w, n in zip(words, docs, strict=True) if n > 0]
    if len(found) < 2:
        return [], 0.0
    pivot = max(most_added(n, total) for n, _ in found)
    rest: list[str] = []
    bound = 0.0
    for n, w in sorted(found, key=lambda p: -p[0])[:-1]:
        if bound + most_added(n, total) >= pivot:
            break
        rest.append(w)
        bound += most_added(n, total)
    return rest, bound * BOUND_SLACK


def bound_of(docs: Iterable[int], total: int) -> float:
    """More than phrases held by `docs[i]` of the `total` documents can add to any score
    together (with `BOUND_SLACK`): `skippable`'s bound, for a caller that narrows its `rest`."""
    return sum(most_added(n, total) for n in docs) * BOUND_SLACK


def restricted_expression(essential: Sequence[str], rest: Sequence[str]) -> str:
    """``(E) AND (E OR R OR R)``: matches what holds an `essential` phrase, scored by every
    phrase, each counted twice. FTS5 computes bm25 only for matches, so the `rest` no longer
    make it score documents that hold nothing else; they stay in the expression so that the
    documents it does score keep their exact scores (bm25 sums a term per phrase, and here
    every phrase appears twice: exactly twice the score of the plain OR of all of them)."""
    return restricted_phrases([_quote(t) for t in essential], [_quote(t) for t in rest])


def restricted_phrases(essential: Sequence[str], rest: Sequence[str]) -> str:
    """`restricted_expression` over phrases already written for FTS5 (quoted, maybe a prefix)."""
    return f"({' OR '.join(essential)}) AND ({' OR '.join([*essential, *rest, *rest])})"


def _quote(term: str) -> str:
    """`term` as an FTS5 phrase; a lone CJK character as a prefix query (it matches the words and
    bigrams it starts, as recall's `segment.match_phrases` does: "包" finds 包裹)."""
    quoted = '"' + term.replace('"', '""') + '"'
    return quoted + " *" if len(term) == 1 and has_cjk(term) else quoted
