"""Word segmentation for full-text search in every script, at index *and* query time.

FTS5's ``unicode61`` tokenizer splits on spaces and punctuation. That serves Latin, Cyrillic,
Greek, accented Latin (with ``remove_diacritics 2``) and any other spaced script, but a run of
Chinese, Japanese or Korean characters without spaces would become one giant token that no query
matches. So before text reaches FTS5 each such run is rewritten into space-separated tokens:

- a run of Han characters only (Chinese) → jieba words (``cut_for_search`` when indexing, which
  also yields the shorter words inside long ones; ``lcut`` when querying);
- a run containing kana or Hangul (Japanese, Korean) → character bigrams (plus unigrams when
  indexing, so a one-character query still matches).

The same function rewrites stored text and queries, so they always agree. Both sides are first
put in Unicode NFC: text typed or pasted in decomposed form (``e`` + U+0301, Hangul as
conjoining jamo, ``か`` + U+3099) would otherwise break words at its combining marks and turn
Hangul syllables into jamo bigrams that no composed query shares.

One case the two sides cannot agree on by themselves: a Japanese run mixing kanji and kana is
stored as bigrams, but a query of kanji only ("研究所") is Han-only, so jieba keeps it as one
word that the bigrams never hold. `han_run_phrases` adds, for such query runs, the phrase of
their bigrams ("研究 究所": consecutive tokens, exactly what the mixed run holds). Chinese text,
stored as jieba words, holds those tokens in a row only where it holds the word itself
(``cut_for_search`` gives "灭火 火器 灭火器"), so a Chinese query matches the same texts as
before: a phrase, not the bigrams as separate terms, which would let in every text sharing one.

`match_expression` turns any natural-language text into a safe ``MATCH`` expression: every term
quoted, terms OR-ed (user text never reaches ``MATCH`` unquoted). `words` gives the token set used
for lexical similarity (Jaccard).

A dotted number in a query ("12.5", "1.2.10", "192.168.0.1", "v1.2") is one term, not its pieces:
the index splits it at the dots like any punctuation but keeps the pieces next to each other, so
the quoted term is the FTS5 phrase "12 5", which finds that number as written. OR-ing the pieces
("12" OR "5") made "19.5 N at 0.12 m/s" score as much as "12.5 N", and firmware "1.10.2" match
"1.2.10". A unit is the one other writing searched too (`number_variants`: "12.5 N" also finds
"12.5N", and the other way round); "12.50" is another number as written, as "1.10" is another
version than "1.1". No prefix phrase (`"12.5" *` would find "12.50"): FTS5 merges the lists of
every token a prefix starts, and for a one-digit decimal ("4*": 4, 40 … 49) that tripled recall's
time at 10,000 memories.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata

MAX_TERMS = 32

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_CJK_RUN = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]+")
_HAN_ONLY = re.compile(f"[{_HAN}]+")
#: Combining diacritics NFC cannot fold into a letter (Yoruba "ẹ́" stays "ẹ" + U+0301). They are
#: part of the word, as in FTS5's unicode61 (remove_diacritics drops them from the token); a word
#: still starts with a letter or digit.
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_WORD = re.compile(f"[^\\W_]+(?:[{_MARKS}]+[^\\W_]*)*")  # letters and digits; "_" splits, as in FTS5
#: Characters every tokenizer here splits at, in Python's tables and in sqlite's (Unicode 6.1):
#: ASCII other than letters and digits, and white space.
_SPLITS = r"\s\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f"
#: A dotted number: ASCII letters and digits with a digit on both sides of every dot ("12.5",
#: "1.2.10", "v1.2", "12.5n"), standing between characters that split words in sqlite's tables as
#: in Python's. Its pieces are then the very tokens FTS5 reads there, so the quoted number is the
#: phrase of the index's tokens; anything else (a letter of another script next to it) leaves
#: the pieces as separate terms.
DOTTED = re.compile(f"(?<![^{_SPLITS}])[0-9A-Za-z]*[0-9](?:\\.[0-9][0-9A-Za-z]*)+(?![^{_SPLITS}])")
#: `_WORD` on ASCII text, as a byte table: each letter lower-cased, each digit kept, every other
#: byte a space — so the words are what ``split()`` then finds, the maximal runs of ``[a-z0-9]``
#: (a quarter of the time of that pattern's ``findall``; a learn tokenizes its text three times).
_ASCII_WORD_BYTES = bytes(b if chr(b).isascii() and chr(b).isalnum() else 0x20 for b in bytes(range(256)).lower())
_TERM = re.compile(f"{DOTTED.pattern}|{_WORD.pattern}")
#: A unit: one to three ASCII letters ("n", "mm", "deg", "kpa"), against a dotted number
#: ("12.5n": `_GLUED`) or after it and white space ("12.5 n": `_SPACED`).
_GLUED = re.compile(r"([0-9A-Za-z]*[0-9](?:\.[0-9]+)+)([A-Za-z]{1,3})")
_SPACED = re.compile(f"\\s+([A-Za-z]{{1,3}})(?![^{_SPLITS}])")
_NUMBER = re.compile(r"[0-9A-Za-z]*[0-9](?:\.[0-9]+)+")

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
    """jieba, initialised once: loading its dictionary is slow, so it happens once a process."""
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
    """Load jieba's dictionary now, so the first Chinese text does not wait for it."""
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


def nfc(text: str) -> str:
    """`text` in Unicode NFC, the form every token is compared in (see the module docstring)."""
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def is_nfc(text: object) -> bool:
    """Whether `text` is already in NFC (anything but a string, such as a NULL column, counts as
    NFC): an index entry made before both sides were normalised differs from today's only for
    text that is not, so a rebuild needs only the rows where this is false."""
    return not isinstance(text, str) or unicodedata.is_normalized("NFC", text)


def index_text(text: str) -> str:
    """`text` as it should be stored in an FTS5 column: in NFC, CJK runs rewritten into tokens."""
    if text.isascii():  # NFC, and no CJK (the check is a flag of the string: no scan)
        return text
    text = nfc(text)
    if not _CJK_RUN.search(text):
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(cjk_tokens(m.group(0), for_index=True)) + " ", text)


def query_text(text: str) -> str:
    """`text` in NFC with its CJK runs split into the words a query looks for (`index_text`'s
    query side)."""
    if text.isascii():
        return text
    text = nfc(text)
    if not _CJK_RUN.search(text):
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(cjk_tokens(m.group(0))) + " ", text)


def has_cjk(text: str) -> bool:
    return not text.isascii() and _CJK_RUN.search(text) is not None


@functools.lru_cache(maxsize=8192)
def scripts(text: str) -> frozenset[str]:
    """The scripts keyword search can match `text` by: ``cjk`` (Han, kana and hangul runs,
    searched as their own tokens) and ``latin`` (any other letter or digit). A pure function of
    the text, remembered for the last 8,192 (a find checks each candidate's)."""
    out = set()
    if has_cjk(text):
        out.add("cjk")
        text = _CJK_RUN.sub(" ", text)
    if any(ch.isalnum() for ch in text):
        out.add("latin")
    return frozenset(out)


def _bigram_phrase(word: str) -> str:
    return " ".join(word[i : i + 2] for i in range(len(word) - 1))


def han_run_phrases(text: str) -> list[str]:
    """Extra query phrases for the Han-only runs of `text` as a mixed kanji/kana run stores
    them: for each run of two or more Han characters, its bigrams as one phrase ("研究所" →
    "研究 究所"), and the same for each jieba word of three or more characters inside it.

    A phrase (consecutive tokens), not the bigrams as separate terms: the bigrams are in a row
    only where the run itself is, so these phrases find Japanese text without letting in every
    Chinese text that shares a bigram (see the module docstring). A two-character run yields
    itself: a term already, unless jieba split it in two (then it is the bigram the mixed run
    holds)."""
    out: list[str] = []
    for m in _CJK_RUN.finditer(nfc(text)):
        run = m.group(0)
        if len(run) < 2 or not _HAN_ONLY.fullmatch(run):
            continue
        out.append(_bigram_phrase(run))
        out.extend(_bigram_phrase(w) for w in _han_words(run, for_index=False) if len(w) >= 3 and w != run)
    return list(dict.fromkeys(out))


def _lower(text: str) -> str:
    """Lower case as the index folds it: Python lowers Turkish ``İ`` to ``i`` plus a combining
    dot, which is no letter, so ``İstanbul`` became ``i`` and ``stanbul``; the index (unicode61,
    diacritics removed) holds ``istanbul``."""
    return text.lower().replace("i\u0307", "i")


def _split(text: str, word: re.Pattern[str]) -> list[str]:
    if word is _WORD and text.isascii():  # no CJK, already NFC, and `_WORD` is `[a-z0-9]+` there
        return text.encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii").split()
    text = nfc(text)
    if not _CJK_RUN.search(text):
        return word.findall(_lower(text))
    out: list[str] = []
    pos = 0
    for m in _CJK_RUN.finditer(text):
        out.extend(word.findall(_lower(text[pos : m.start()])))
        out.extend(cjk_tokens(m.group(0)))
        pos = m.end()
    out.extend(word.findall(_lower(text[pos:])))
    return out


def tokens(text: str) -> list[str]:
    """Every token of `text` (in NFC), in order, lower-cased (repeats kept): as the index splits
    it, "12.5" into "12" and "5"."""
    return _split(text, _WORD)


def words(text: str) -> list[str]:
    """Distinct tokens of `text` in order: lower-cased words, jieba words, kana/Hangul bigrams."""
    return list(dict.fromkeys(tokens(text)))


def query_terms(text: str) -> list[str]:
    """Distinct terms a query of `text` searches for, in order: `words`, except that a dotted
    number stays whole ("12.5", "1.2.10"; `DOTTED`), to be matched as the phrase of its pieces."""
    return list(dict.fromkeys(_split(text, _TERM)))


def number_variants(text: str) -> list[tuple[str, str]]:
    """(term, other writing) for each dotted number of `text` with a unit: written against it,
    the number alone ("12.5n" → "12.5"); after a space, the two together ("12.5" → "12.5n"; not
    for a function word: "12.5 at"). One exact phrase more each, so "12.5 N" and "12.5N" find
    each other; a prefix phrase would be the costly way (module docstring)."""
    out: list[tuple[str, str]] = []
    if "." not in text:
        return out
    lowered = _lower(query_text(text))
    # Over the terms, each dotted number looked at once: a pattern for "number, then unit" tried
    # at every piece of "1.1.1…" took quadratic time.
    for m in _TERM.finditer(lowered):
        term = m.group(0)
        if "." not in term:
            continue
        if glued := _GLUED.fullmatch(term):
            out.append((term, glued.group(1)))
        elif (unit := _SPACED.match(lowered, m.end())) and _NUMBER.fullmatch(term) and unit[1] not in STOPWORDS:
            out.append((term, term + unit[1]))
    return out


def quote(term: str) -> str:
    """One FTS5 string literal: user text can never become an operator."""
    return '"' + term.replace('"', '""') + '"'


def match_phrases(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """The FTS5 phrases `match_expression` ORs: each of the first `max_terms` terms of `text`
    (`query_terms`: a dotted number is one) quoted, function words left out (unless nothing else
    is left), then its numbers' other writings (`number_variants`) and the bigram phrases of its
    Han-only runs (`han_run_phrases`), at most `max_terms` of those. A lone CJK character becomes
    a prefix query (it matches the words and bigrams it starts)."""
    terms = query_terms(text)
    kept = ([t for t in terms if t not in STOPWORDS] or terms)[:max_terms]
    numbers = [v for t, v in number_variants(text) if t in kept]
    extra = [p for p in dict.fromkeys([*numbers, *han_run_phrases(text)]) if p not in kept][:max_terms]
    return [quote(t) + (" *" if len(t) == 1 and _CJK_RUN.match(t) else "") for t in kept] + [quote(p) for p in extra]


def match_expression(text: str, *, max_terms: int = MAX_TERMS) -> str | None:
    """An FTS5 query OR-ing every quoted term of `text`, or None when nothing is searchable."""
    return " OR ".join(match_phrases(text, max_terms=max_terms)) or None


__all__ = [
    "DOTTED",
    "MAX_TERMS",
    "STOPWORDS",
    "cjk_tokens",
    "han_run_phrases",
    "has_cjk",
    "index_text",
    "is_nfc",
    "match_expression",
    "match_phrases",
    "nfc",
    "number_variants",
    "query_terms",
    "quote",
    "scripts",
    "tokens",
    "warm",
    "words",
]
