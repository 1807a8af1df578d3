"""Word segmentation for full-text search in every script, at index *and* query time.

FTS5's ``unicode61`` tokenizer splits on spaces and punctuation. That serves Latin, Cyrillic,
Greek, accented Latin (with ``remove_diacritics 2``) and any other spaced script, but a run of
Chinese, Japanese or Korean characters without spaces would become one giant token that no query
matches. So before text reaches FTS5 each such run is rewritten into space-separated tokens:

- a run of Han characters only (Chinese) → jieba words (``cut_for_search`` when indexing, which
  also yields the shorter words inside long ones; ``lcut`` when querying);
- a run containing kana or Hangul (Japanese, Korean) → character bigrams (plus unigrams when
  indexing, so a one-character query still matches).

The same function rewrites stored text and queries, so they always agree. `match_expression`
turns any natural-language text into a safe ``MATCH`` expression: every term quoted, terms OR-ed
(user text never reaches ``MATCH`` unquoted). `words` gives the token set used for lexical
similarity (Jaccard) — the same tokens a query would search for.
"""

from __future__ import annotations

import logging
import re
import threading

MAX_TERMS = 32

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_CJK_RUN = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]+")
_HAN_ONLY = re.compile(f"[{_HAN}]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits; "_" splits, as in FTS5

#: Function words dropped from queries when other terms remain (they match nearly everything and
#: only cost time; bm25 gives them no weight). Negations are *not* here: they carry meaning.
_STOPWORD_TEXT = """
    a an the of to in on at for and or is are was were be been being by with it its this that these those
    as from into than then so if i me my we us our you your he him his she her they them their there here
    how why what when where which who whom whose did do does done doing has have had having can could
    should would will shall may might about also just very some any each such only other same too own
    again further once out up off"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_jieba_lock = threading.Lock()
_jieba_ready = False


def _jieba() -> object:
    """jieba, initialised once (its dictionary takes ~1 s to load the first time)."""
    global _jieba_ready
    import jieba

    if not _jieba_ready:
        with _jieba_lock:
            if not _jieba_ready:
                jieba.setLogLevel(logging.WARNING)  # it logs "Building prefix dict…" at DEBUG otherwise
                jieba.initialize()
                _jieba_ready = True
    return jieba


def warm() -> None:
    """Load jieba's dictionary now (~1 s, ~80 MB) instead of on the first Chinese text."""
    _jieba()


def _han_words(run: str, *, for_index: bool) -> list[str]:
    jieba = _jieba()
    pieces = jieba.cut_for_search(run) if for_index else jieba.lcut(run)  # type: ignore[attr-defined]
    return [p for p in pieces if p.strip()]


def _ngrams(run: str, *, for_index: bool) -> list[str]:
    if len(run) == 1:
        return [run]
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    if for_index:
        grams.extend(run)  # unigrams too, so a one-character query finds the run
    return grams


def cjk_tokens(run: str, *, for_index: bool = False) -> list[str]:
    """The tokens of one run of CJK characters (see the module docstring)."""
    if _HAN_ONLY.fullmatch(run):
        return _han_words(run, for_index=for_index)
    return _ngrams(run, for_index=for_index)


def index_text(text: str) -> str:
    """`text` as it should be stored in an FTS5 column: CJK runs rewritten into tokens."""
    if not _CJK_RUN.search(text):
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(cjk_tokens(m.group(0), for_index=True)) + " ", text)


def query_text(text: str) -> str:
    """`text` with its CJK runs split into the words a query looks for (`index_text`'s query side)."""
    if not _CJK_RUN.search(text):
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(cjk_tokens(m.group(0))) + " ", text)


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def _lower(text: str) -> str:
    """Lower case as the index folds it: Python lowers Turkish ``İ`` to ``i`` plus a combining
    dot, which is no letter, so ``İstanbul`` became ``i`` and ``stanbul``; the index (unicode61,
    diacritics removed) holds ``istanbul``."""
    return text.lower().replace("i\u0307", "i")


def tokens(text: str) -> list[str]:
    """Every query token of `text`, in order, lower-cased (repeats kept)."""
    if not _CJK_RUN.search(text):
        return _WORD.findall(_lower(text))
    out: list[str] = []
    pos = 0
    for m in _CJK_RUN.finditer(text):
        out.extend(_WORD.findall(_lower(text[pos : m.start()])))
        out.extend(cjk_tokens(m.group(0)))
        pos = m.end()
    out.extend(_WORD.findall(_lower(text[pos:])))
    return out


def words(text: str) -> list[str]:
    """Distinct tokens of `text` in order: lower-cased words, jieba words, kana/Hangul bigrams."""
    return list(dict.fromkeys(tokens(text)))


def quote(term: str) -> str:
    """One FTS5 string literal: user text can never become an operator."""
    return '"' + term.replace('"', '""') + '"'


def match_phrases(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """The FTS5 phrases `match_expression` ORs: each term of `text` quoted, function words left
    out (unless nothing else is left). A lone CJK character becomes a prefix query (it matches
    the words and bigrams it starts)."""
    terms = words(text)
    kept = [t for t in terms if t not in STOPWORDS] or terms
    return [quote(t) + (" *" if len(t) == 1 and _CJK_RUN.match(t) else "") for t in kept[:max_terms]]


def match_expression(text: str, *, max_terms: int = MAX_TERMS) -> str | None:
    """An FTS5 query OR-ing every quoted term of `text`, or None when nothing is searchable."""
    return " OR ".join(match_phrases(text, max_terms=max_terms)) or None


__all__ = [
    "MAX_TERMS",
    "STOPWORDS",
    "cjk_tokens",
    "has_cjk",
    "index_text",
    "match_expression",
    "match_phrases",
    "quote",
    "tokens",
    "warm",
    "words",
]
