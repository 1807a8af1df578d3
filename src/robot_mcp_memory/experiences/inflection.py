"""English inflection, undone: steps 1 and 5 of the Porter stemmer — plurals (``cubes`` →
``cube``, ``boxes`` → ``box``, ``batteries`` → ``batteri``), ``-ed`` and ``-ing`` (``gripped``,
``gripping`` → ``grip``; ``placed``, ``placing`` → ``place``), a final ``y`` (``carry``,
``carried`` → ``carri``), a final ``e`` and a doubled ``l`` (``handles``, ``handled`` → ``handl``;
``controlling`` → ``control``).

Dedup compares two texts' content words by these stems, so "the grippers slipped" is the same as
"the gripper slips". Not steps 2 to 4: they strip derivational endings and join words that name
different things ("general"/"generous", "organ"/"organisation"), and joining two different words
is exactly what would drop a distinct experience as a duplicate. A final ``e`` stays after a short
stem that ends consonant-vowel-consonant (Porter's rule), which keeps ``tape``/``tap``,
``cube``/``cub`` and ``plane``/``plan`` apart.

SQLite's ``porter`` tokenizer runs these steps too (with 2 to 4 between them), so two words with
one stem here are, but for rare words, one term in the full-text index: a query for one finds
text holding the other, which the lexical stage's candidate query relies on
(`dedup.candidate_expression`).
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiou")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")


def _consonant(w: str, i: int) -> bool:
    """Porter's consonant: not a, e, i, o, u, and a ``y`` only after a vowel (or first)."""
    c = w[i]
    if c in _VOWELS:
        return False
    if c == "y":
        return i == 0 or not _consonant(w, i - 1)
    return True


def _measure(w: str) -> int:
    """m in [C](VC)^m[V]: how many vowel-consonant sequences `w` has."""
    m, after_vowel = 0, False
    for i in range(len(w)):
        consonant = _consonant(w, i)
        if consonant and after_vowel:
            m += 1
        after_vowel = not consonant
    return m


def _has_vowel(w: str) -> bool:
    return any(not _consonant(w, i) for i in range(len(w)))


def _cvc(w: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (``hop``, not ``snow``)."""
    n = len(w)
    return n >= 3 and _consonant(w, n - 3) and not _consonant(w, n - 2) and _consonant(w, n - 1) and w[-1] not in "wxy"


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """`word` without its inflectional ending (Porter's steps 1 and 5). A word of fewer than three
    letters, or one that is not all ASCII lower-case letters, is returned as it is (SQLite's
    ``porter`` does the same)."""
    if len(word) < 3 or not _LETTERS.issuperset(word):
        return word
    w = word
    # 1a: plurals
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # 1b: -eed, -ed, -ing
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for ending in ("ed", "ing"):
            if w.endswith(ending) and _has_vowel(w[: -len(ending)]):
                w = w[: -len(ending)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif len(w) >= 2 and w[-1] == w[-2] and _consonant(w, len(w) - 1) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    # 1c: a final y after a vowel in the stem
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    # 5a: a final e, unless the word without it ends consonant-vowel-consonant and is short
    if w.endswith("e"):
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    # 5b: a doubled l of a long word
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


__all__ = ["stem"]
