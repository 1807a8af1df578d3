"""Turn any natural-language text into a safe FTS5 ``MATCH`` expression.

User text never reaches ``MATCH`` unquoted: every term is wrapped in double quotes (so ``AND``,
``OR``, ``NEAR``, ``*``, ``-``, ``:``, ``(`` are plain words or dropped), and terms are OR-ed so a
long instruction still matches documents that share only some of its words. bm25 does the rest.

Tokens are Unicode word runs, so Cyrillic, accented Latin, kana and Hangul survive. Adjacent
word pairs are also offered joined ("mail room" → "mailroom") because compound spellings are
common in place names.

The keyword list of hybrid search drops function words (`content_terms`) and lets only its rarer
phrases choose the matches (`split_common`, `restricted_expression`): a phrase in half the
documents or more weighs nothing in bm25 beyond a tie-break, yet makes FTS5 score every document
that holds it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from robot_mcp_memory.search.segment import STOPWORDS

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32
#: FTS5's bm25 weighs a phrase in n of N documents by idf = log((N - n + 0.5) / (n + 0.5)),
#: clamped to 1e-6 where that is <= 0: from half the documents on, a phrase only breaks ties.
COMMON_SHARE = 0.5


def terms(text: str) -> list[str]:
    """Distinct word tokens of `text` (compared case-insensitively), in order, at most `MAX_TERMS`.

    Tokens keep their case: FTS5 folds case itself, with the same tables for the query as for the
    indexed text. Lower-casing here with Python's newer Unicode tables would miss letters that
    sqlite's unicode61 (Unicode 6.1) does not fold, such as Georgian Mtavruli or Greek Yot."""
    seen: dict[str, str] = {}
    for m in _WORD.finditer(text):
        tok = m.group(0).strip("_")
        if tok:
            seen.setdefault(tok.casefold(), tok)
    return list(seen.values())[:MAX_TERMS]


def content_terms(text: str) -> list[str]:
    """`terms(text)` without function words (`segment.STOPWORDS`, compared case-insensitively,
    so "I" goes too), unless nothing else is left: then all of them."""
    words = terms(text)
    return [t for t in words if t.casefold() not in STOPWORDS] or words


def phrases(text: str, *, join_pairs: bool = True) -> list[str]:
    """What `match_expression` ORs, unquoted: the terms of `text`, then (with `join_pairs`)
    each adjacent pair of ASCII words joined."""
    words = terms(text)
    extra: list[str] = []
    if join_pairs:
        for a, b in itertools.pairwise(words):
            if a.isalpha() and b.isalpha() and a.isascii() and b.isascii():
                extra.append(a + b)
    return list(dict.fromkeys(words + extra))


def any_of(found: Sequence[str]) -> str | None:
    """An FTS5 query OR-ing every phrase, each quoted; None for none."""
    return " OR ".join(_quote(t) for t in found) or None


def match_expression(text: str, *, join_pairs: bool = True) -> str | None:
    """An FTS5 query OR-ing every quoted term of `text`, or None when nothing is searchable."""
    return any_of(phrases(text, join_pairs=join_pairs))


def split_common(found: Sequence[str], docs: Sequence[int], total: int, enough: int) -> tuple[list[str], list[str]]:
    """(rare, common): `found` split by whether a phrase is in at least `COMMON_SHARE` of the
    `total` documents (`docs[i]` documents hold `found[i]`).

    Nothing is split off (common is empty) unless one rare phrase alone is in `enough` documents.
    Then the documents holding a rare phrase fill a top-`enough` list by themselves, as they did
    before: one holding only common phrases scores ~1e-6, below each of them. Otherwise (few
    rare matches, or a query made only of common words) every phrase keeps choosing matches."""
    limit = COMMON_SHARE * total
    rare = [t for t, n in zip(found, docs, strict=True) if n < limit]
    common = [t for t, n in zip(found, docs, strict=True) if n >= limit]
    if not common or max((n for n in docs if n < limit), default=0) < enough:
        return list(found), []
    return rare, common


def restricted_expression(rare: Sequence[str], common: Sequence[str]) -> str:
    """Match what holds a `rare` phrase, rank by every phrase: ``(R) AND (R OR C)``.

    FTS5 computes bm25 only for matches, so a common phrase no longer makes it score the many
    documents that hold nothing else. The common phrases stay in the expression because their
    ~1e-6 weight breaks ties (two documents alike but for the common word in one's title: it
    decides hit@1 in eval/processes.yaml). The rare phrases appear twice, so bm25 counts them
    twice: every relevance doubles, up to that tie-break, and neither an order by relevance nor
    one by relevance × reliability changes."""
    return f"({any_of(rare)}) AND ({any_of([*rare, *common])})"


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'
