"""Turn any natural-language text into a safe FTS5 ``MATCH`` expression.

User text never reaches ``MATCH`` unquoted: every term is wrapped in double quotes (so ``AND``,
``OR``, ``NEAR``, ``*``, ``-``, ``:``, ``(`` are plain words or dropped), and terms are OR-ed so a
long instruction still matches documents that share only some of its words. bm25 does the rest.

Tokens are Unicode word runs, so Cyrillic, accented Latin, kana and Hangul survive. Adjacent
word pairs are also offered joined ("mail room" → "mailroom") because compound spellings are
common in place names.
"""

from __future__ import annotations

import itertools
import re

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32


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


def match_expression(text: str, *, join_pairs: bool = True) -> str | None:
    """An FTS5 query OR-ing every quoted term of `text`, or None when nothing is searchable."""
    words = terms(text)
    if not words:
        return None
    extra: list[str] = []
    if join_pairs:
        for a, b in itertools.pairwise(words):
            if a.isalpha() and b.isalpha() and a.isascii() and b.isascii():
                extra.append(a + b)
    out = dict.fromkeys(words + extra)
    return " OR ".join(_quote(t) for t in out)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'
