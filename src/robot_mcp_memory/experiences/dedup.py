"""Is a new insight a duplicate of one already stored? Exact → lexical → semantic, where
**numbers and outcomes decide**.

robotmem compared text only, so "grip with 12 N" swallowed "grip with 15 N", a failed episode
vanished into a successful one, and "do not grasp the mug by the rim" was dropped as a copy of
"grasp the mug by the rim". Here text similarity only *proposes* a duplicate; the decisive
`Facts` of both must then be identical:

- the numbers in the text, in order, compared exactly (``12.50`` = ``12.5``, ``12`` ≠ ``12.1``),
  each with its unit ("5 s" ≠ "5 min", "30 cm" ≠ "30 mm") and spelled ones too ("five seconds"
  is ``5 s``); a number of several groups (``192.168.1.10``, firmware ``1.2.10``) verbatim;
- every value under ``context.params``, every value under ``context.spatial`` (a number or a
  named place), the whole ``context.task`` (``name``, ``reward``, ``steps``…) and ``context.robot``
  (``type``, ``id``…), the environment, and every value under any other top-level key of the
  context ({"force": 12}) — but ``tags`` (labels, not the experience);
- the outcome: ``success``, ``status``, ``outcome`` and ``result`` under ``context.task`` and at
  the top level, and the success/failure words of the text;
- negation: whether the text negates ("not", "never", "avoid", "unless", "不", "не", "안" …);
- the free-text note (``context.note``: what a plain-text context is kept as): its numbers,
  outcome words and negation, as for the text;
- the source (``real`` vs simulation).

Stages (the first that finds a match with equal facts wins):

1. **exact** — same normalised text (case, spacing and trailing punctuation ignored), by hash;
2. **lexical** — the same `content_sequence`: the same words in the same order once articles,
   "please", punctuation, case and the numbers with their units are set aside (the facts
   compare those). Any other word only one text has — another object, colour, place, person, a
   form of "be"/"have", "to", an inflection — or another order makes another experience:
   dropping a distinct experience is far worse than keeping a near-duplicate. Candidates are the
   memories with the same lexical key (`content_hash`, a digest of the sequence): one indexed
   lookup finds every one of them, for this robot only;
3. **semantic** — cosine ≥ `COSINE_DUPLICATE` between embeddings, when a vector index supplies
   candidates, unless the texts differ by a substitution (`substituted`: a word or two, or the
   word order): their vectors are close because of the shared words, not because the differing
   ones mean the same. What this stage catches is a rewording in other words, and inflection or
   particle variants in any language.

A lexical or semantic candidate is still no duplicate when the texts are `conflicting`: a word
only one of them has is the opposite of a word only the other has ("increase"/"decrease",
"left"/"right", "safe"/"unsafe"), or, when they describe a sequence ("then", "before", "first"…),
their shared words come in another order.

Everything here is pure; the SQL that fetches candidates lives in `storage`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Literal

from robot_mcp_memory.experiences.lexicon import (
    CJK_OPPOSITES,
    FAILURE,
    FILLER_WORDS,
    NEGATING_PREFIXES,
    NEGATING_STEM,
    NEGATING_WORDS,
    NEGATION,
    NUMBER_WORDS,
    OPPOSITES,
    SCALE_WORDS,
    SEQUENCE_WORDS,
    SPACED_UNIT_EXCLUDED,
    SUCCESS,
    UNIT_NAMES,
    Analysis,
)
from robot_mcp_memory.search import segment

COSINE_DUPLICATE = 0.92
Method = Literal["exact", "jaccard", "cosine"]

#: A number, wherever it stands: after a letter too (``M12``, ``v2``, ``10x20``, ``夹爪力12牛顿`` —
#: Han characters are letters to ``\w``), with a sign only where it cannot be a hyphen (`numbers`
#: drops a sign that follows a letter, a digit, ``_`` or ``.``). No lookbehind: `re` scans ahead
#: for a pattern that opens with a character class, and a left-to-right scan never starts inside a
#: number anyway.
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*")
#: The exponent of a number in scientific notation (``1e-3``, ``2.5E+4``), read only when the
#: number does not follow a letter ("ur5e-01" is a name and a number, not 5·10⁻¹).
_EXPONENT = re.compile(r"[eE][-+]?\d+")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_REAL = frozenset({"real", "real_world", "real-world", "hardware", "physical"})


def normalise(text: str) -> str:
    """Case-, width- and spacing-insensitive form of `text` (for the exact stage)."""
    t = unicodedata.normalize("NFKC", text).casefold()
    # = re.sub(r"\s+", " ", t).strip(): str.split and \s know the same white space, and split is
    # the cheaper
    return " ".join(t.split()).rstrip(".!。！;；")


def content_hash(text: str) -> str:
    """The lexical key of a fact: a digest of its `content_sequence`, so every text a lexical
    duplicate of it is (and its exact repeats) shares it, and one indexed lookup finds them all —
    for this robot only, with no full-text query. A text whose sequence is empty (articles and
    numbers only, emoji, punctuation) is keyed by its `normalise`d text: "👍" is not "👎"."""
    return lexical_key(content_sequence(text), text)


def lexical_key(sequence: Sequence[str], text: str) -> str:
    """`content_hash` of `text` whose `content_sequence` is `sequence` (when the caller has it)."""
    key = "\x1f".join(sequence) if sequence else "\x1e" + normalise(text)
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def perception_hash(description: str, perception_type: str, data: Any, metadata: Any) -> str:
    """A perception is the same only with the same description, kind, data and metadata."""
    blob = json.dumps([normalise(description), perception_type, data, metadata], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class FactKeys:
    """What dedup derives from a fact: its `content_sequence`, its lexical key (`content_hash`)
    and its facts digest (`facts_hash`)."""

    sequence: tuple[str, ...]
    content_hash: str
    facts_hash: str


def fact_keys(text: str, context: Mapping[str, Any], analysis: Analysis | None = None) -> FactKeys:
    """The `FactKeys` of `text` learned with `context`, its numbers found once for all three.
    learn, update, the robotmem import, `load`, consolidation and the migrations all derive them
    here, so a key computed by one is found by another. `analysis`: the text's, when the caller
    has it."""
    measured = Measured.of(text)
    sequence = content_sequence(text, measured)
    digest = facts_hash(facts_of(text, context, analysis, measured))
    return FactKeys(sequence, lexical_key(sequence, text), digest)


#: The version of the rules `memory_keys` follows. Raise it whenever a change makes `memory_keys`
#: return other keys for a memory already stored: index.db then recomputes every fact's keys once,
#: on its next open (`storage.sqlite.index_db.follow_dedup_rules`), so a stored memory stays findable
#: as the duplicate of the same experience learned again. A rule change is data, not a schema step.
RULES_VERSION = 1


def memory_keys(
    kind: str, content: str, context: Mapping[str, Any], perception_type: str | None = None, data: Any = None
) -> tuple[str, str]:
    """``(content_hash, facts_hash)`` of a memory of type `kind`, as every write stores them: a
    fact's (`fact_keys`), a perception's `perception_hash` (and no digest)."""
    if kind == "perception":
        return perception_hash(content, perception_type or "", data, context), ""
    keys = fact_keys(content, context)
    return keys.content_hash, keys.facts_hash


def _canonical_number(raw: str) -> str:
    """``+012.50`` → ``12.5``; ``-0`` → ``0``; ``1,000`` and ``1,234.5`` group thousands; another
    single comma is a decimal one (``1,5`` → ``1.5``). A number of several groups that are not
    thousands — an address (``192.168.1.10``), a version (``1.2.10``) — is kept as written: it is
    no decimal, and its trailing zeros matter."""
    mantissa, e, exponent = raw.partition("e")
    if e:  # scientific notation: 1e+4 = 1e4 = 1e04, but 1e-4 is another number
        power = exponent.lstrip("+")
        digits = power.lstrip("-").lstrip("0") or "0"
        return f"{_canonical_number(mantissa)}e{'-' if power.startswith('-') and digits != '0' else ''}{digits}"
    sign = "-" if raw.startswith("-") else ""
    body = raw.lstrip("+-")
    if _THOUSANDS.fullmatch(body):
        body = body.replace(",", "")
    elif body.count(".") + body.count(",") > 1:
        return sign + body
    else:
        body = body.replace(",", ".")
    whole, _, frac = body.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    out = f"{whole}.{frac}" if frac else whole
    return out if out == "0" else sign + out


#: A sign written as a word: "minus 5 degrees" is -5, "plus 5" +5.
_SIGN_WORD = re.compile(r"\b(minus|negative|plus|positive)\s+(?=\d)", re.IGNORECASE)
_MINUS_BEFORE = re.compile(r"\b(?:minus|negative)[ \t]+$", re.IGNORECASE)
#: What may stand right after a number as its unit: at most one space, then a run of letters (or
#: ``°``, ``%``), and perhaps ``/`` and a second one (``m/s``). `_unit` decides whether it is one.
_UNIT = re.compile(r"([ \t\u00a0\u202f]?)(°[CcFf]?|%|[^\W\d_]+)(?:[ \t]?/[ \t]?(°|%|[^\W\d_]+))?")
_SPELLED_WORDS = frozenset(NUMBER_WORDS) | frozenset(SCALE_WORDS) | {"half"}
_SIGN_WORDS = frozenset({"minus", "negative", "plus", "positive"})
#: Each number word's part in a number: a unit (1–9), a teen (10–19), tens, or the word itself.
_KINDS = {w: "tens" if v >= 20 else "teen" if v >= 10 else "unit" for w, v in NUMBER_WORDS.items() if v} | {
    w: w for w in ("zero", "half", "hundred", "thousand")
}
_SMALL = ("unit", "teen", "tens")
#: A run of letters: number words are found among them by lookup (twice as fast as an alternation).
_LETTERS = re.compile(r"[^\W\d_]+")


def _unit(run: str, spaced: bool) -> tuple[str, int] | None:
    """The canonical unit `run` names and how many of its characters name it, or None. A Han run
    names one when a unit opens it (the number is followed by the rest of the sentence: 12牛顿可以…)."""
    low = run.lower()
    unit = UNIT_NAMES.get(low)
    if unit is not None:
        return None if spaced and low in SPACED_UNIT_EXCLUDED else (unit, len(run))
    if not run.isascii() and segment.has_cjk(run[:1]):
        for n in (2, 1):
            unit = UNIT_NAMES.get(run[:n])
            if unit is not None:
                return unit, n
    return None


def _quantity(number: str, text: str, end: int) -> tuple[str, int]:
    """`number` with the unit that follows it in `text` at `end` (``5 s``, ``0.3 m/s``), if any,
    and where the two end."""
    m = _UNIT.match(text, end)
    if m is None:
        return number, end
    unit = _unit(m.group(2), bool(m.group(1)))
    if unit is None:
        return number, end
    per = _unit(m.group(3), False) if m.group(3) else None
    if per:
        return f"{number} {unit[0]}/{per[0]}", m.start(3) + per[1]
    return f"{number} {unit[0]}", m.start(2) + unit[1]


def _spelled(text: str) -> list[tuple[int, int, str]]:
    """English number words as numbers, with where each starts and ends (its unit too):
    "twenty-five" → 25, "two hundred and five" → 205, "half" → 0.5. Words join only where a
    number can go on ("twenty five", not "five twenty" — that is two numbers)."""
    out: list[tuple[int, int, str]] = []
    start = end = -1  # the number being read: where it starts, where its last word ends
    total = current = 0  # its thousands, and the rest
    last = ""  # the kind of its last word

    def flush() -> None:
        if start >= 0:
            value = str(total + current)
            sign = "-" if _MINUS_BEFORE.search(text, max(0, start - 12), start) else ""
            q, stop = _quantity(sign + value, text, end)
            out.append((start, stop, q))

    for m in _LETTERS.finditer(text):
        word = m.group(0).lower()
        kind = _KINDS.get(word)
        if kind is None:
            continue
        value = NUMBER_WORDS.get(word, 0)
        near = start >= 0 and m.start() - end <= 5 and text[end : m.start()].strip(" -").lower() in ("", "and")
        if near and kind == "unit" and last == "tens":
            current += value
        elif near and kind == "hundred" and last in _SMALL and current < 100:
            current *= 100
        elif near and kind == "thousand" and (last in _SMALL or last == "hundred") and total == 0:
            total, current = current * 1000, 0
        elif near and kind in _SMALL and last in ("hundred", "thousand") and current % 100 == 0:
            current += value
        else:
            flush()
            start = -1
            if kind in ("half", "zero"):  # a number of its own, never part of another
                q, stop = _quantity("0.5" if kind == "half" else "0", text, m.end())
                out.append((m.start(), stop, q))
                last = ""
                continue
            start = m.start()
            total, current = (1000, 0) if kind == "thousand" else (0, 100 if kind == "hundred" else value)
        end, last = m.end(), kind
    flush()
    return out


def _quantities(text: str, words: Set[str] | None = None) -> tuple[str, list[tuple[int, int, str]]]:
    """`text` with its sign words written as signs ("minus 5" → "-5"), and the numbers in it: where
    each starts and ends (its unit included), canonical, with its unit (see `numbers`)."""
    signed = text
    if words is None or not _SIGN_WORDS.isdisjoint(words):
        signed = _SIGN_WORD.sub(lambda m: "-" if m.group(1).lower() in ("minus", "negative") else "+", text)
    found = []
    pos = 0
    while (m := _NUMBER.search(signed, pos)) is not None:
        start, raw, pos = m.start(), m.group(0), m.end()
        after_letter = start > 0 and signed[start - 1].isalpha()
        if not after_letter and (e := _EXPONENT.match(signed, pos)) is not None:
            raw, pos = raw + e.group(0).lower(), e.end()
        if raw[0] in "+-" and start and (signed[start - 1].isalnum() or signed[start - 1] in "._"):
            start, raw = start + 1, raw[1:]  # a hyphen ("ur5-01", "x-5"), not a sign
        q, stop = _quantity(_canonical_number(raw), signed, pos)
        found.append((start, stop, q))
    if words is None or not _SPELLED_WORDS.isdisjoint(words):
        spelled = _spelled(signed)
        if spelled:
            found = sorted(found + spelled)
    return signed, found


def numbers(text: str, words: Set[str] | None = None) -> tuple[str, ...]:
    """The numbers written in `text`, in order, canonicalised (``12.50`` → ``12.5``; ``minus 5``
    → ``-5``), each with the unit that follows it (``12.5 N``, ``5 s``, ``45 deg``), spelled ones
    too ("five seconds" → ``5 s``). `words`, the text's tokens when known, spare the searches for
    number and sign words in a text that has none."""
    return tuple(q for _, _, q in _quantities(text, words)[1])


def negated(text: str | Analysis) -> bool:
    return (text if isinstance(text, Analysis) else Analysis(text)).hit(NEGATION)


def text_outcome(text: str | Analysis) -> int:
    """+1 when the text reports success only, −1 failure only, 0 otherwise."""
    a = text if isinstance(text, Analysis) else Analysis(text)
    return (1 if a.hit(SUCCESS) else 0) - (1 if a.hit(FAILURE) else 0)


def _leaves(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of `value` with its path (``params.force``, ``spatial.position[0]``), keys in
    sorted order."""
    out: list[tuple[str, Any]] = []
    _collect_leaves(value, prefix, out)
    return out


def _collect_leaves(value: Any, prefix: str, out: list[tuple[str, Any]]) -> None:
    # dict, not Mapping: contexts are plain JSON here (`jsonvalue.check`), and the abstract-class
    # check on every leaf of every learn cost more than the rest of this walk. Appending to one
    # list, not nested generators: a leaf was handed up through a `yield from` per level.
    if isinstance(value, dict):
        for k in sorted(value):
            _collect_leaves(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _collect_leaves(v, f"{prefix}[{i}]", out)
    else:
        out.append((prefix, value))


_YES = frozenset({"true", "yes", "y", "1", "success", "succeeded", "ok", "pass", "passed"})
_NO = frozenset({"false", "no", "n", "0", "failure", "failed", "fail", "error"})


def _success(v: Any) -> bool | None:
    """``task.success`` as an outcome, however it was written: a boolean, ``1``/``0``, or
    ``"true"``/``"false"`` (and their like); None when it says neither."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float) and v in (0, 1):
        return v == 1
    if isinstance(v, str):
        word = v.strip().lower()
        return True if word in _YES else False if word in _NO else None
    return None


def _number_key(v: Any) -> Any:
    """A context value as a fact: a number as `_canonical_number` writes it, anything else as is.
    Python writes numbers nearly canonically already — an int exactly, a float as its shortest
    repr, which has no leading zeros, no grouping and no trailing zeros but ``.0`` — so only
    those in scientific notation go through the parser, which would otherwise run on every number
    of every learn's context."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return v
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return str(v)
    raw = repr(v)
    if "e" in raw:
        return _canonical_number(raw)
    if raw.endswith(".0"):
        raw = raw[:-2]
    return "0" if raw == "-0" else raw


def _verdict(v: Any) -> Any:
    """An outcome value as a fact: `_success`'s verdict when it says success or failure (``True``,
    ``1``, ``"succeeded"`` are one), else the value itself — a string case-folded, a number
    canonical (``0.5`` ≠ ``0.9``: a partial success is no other one), a structure as its leaves.
    Missing and empty are both None."""
    if v is None:  # most of the eight outcome keys a learn looks at
        return None
    ok = _success(v)
    if ok is not None:
        return ok
    if isinstance(v, str):
        return v.strip().lower() or None
    if isinstance(v, dict | list):
        return tuple((k, _number_key(x)) for k, x in _leaves(v))
    return _number_key(v)


def source_of(context: Mapping[str, Any]) -> str:
    """``real`` when the context says the data came from the real world, else its stated source
    (``sim``…) or ``''``. Read from ``source``, ``env`` (a string, or robotmem's
    ``env.sim_or_real``), ``task.source`` or ``task.env``."""
    task = context.get("task")
    env = context.get("env")
    candidates = [context.get("source"), env]
    if isinstance(env, Mapping):
        candidates[1] = env.get("sim_or_real")
    if isinstance(task, Mapping):
        candidates += [task.get("source"), task.get("env")]
    for raw in candidates:
        found = _source_word(raw)
        if found is not None:
            return found
    return ""


def _source_word(raw: Any) -> str | None:
    """`raw` as a source (``real`` for each of its synonyms), or None when it is no such string."""
    if isinstance(raw, str) and raw.strip():
        value = raw.strip().lower()
        return "real" if value in _REAL else value
    return None


@dataclass(frozen=True)
class Facts:
    """What must be equal for two memories to be the same experience."""

    numbers: tuple[str, ...]
    params: tuple[tuple[str, Any], ...]
    spatial: tuple[tuple[str, Any], ...]
    outcome: tuple[Any, ...]
    negated: bool
    source: str
    #: the numbers and the negation of ``context.note`` (its outcome words are in `outcome`)
    note: tuple[Any, ...] = ()
    #: every other value of the context, by its path: the task's (``task.name``, ``task.reward``,
    #: ``task.steps``…), the robot's (``robot.type``, ``robot.id``), the environment's, and those of
    #: any other top-level key ({"force": 12})
    extra: tuple[tuple[str, Any], ...] = ()


#: Top-level context keys whose values are facts of their own (``params``, ``spatial``, the note,
#: the source) or no fact at all (``tags``: labels, not the experience).
_APART = frozenset({"params", "spatial", "tags", "source", "note"})
#: The keys, under ``task`` and at the top level, that say how an attempt ended.
_OUTCOME_KEYS = ("success", "status", "outcome", "result")


def _other_values(context: Mapping[str, Any], source: str) -> list[tuple[str, Any]]:
    """The `Facts.extra` of `context`: each value not read as a fact of its own (the outcome,
    params, spatial, the note, the `source` — an ``env``, ``env.sim_or_real``, ``task.source`` or
    ``task.env`` that says it) nor a tag, with its path. The task and the robot count whole: one
    robot id (the Python API's and stdio's default) may run several tasks and robot types, and
    the same insight from another of them is another experience (``task.reward`` is an outcome
    measure too)."""
    out: list[tuple[str, Any]] = []
    for key in sorted(context):
        value = context[key]
        if key in _APART or key in _OUTCOME_KEYS or (key == "env" and _source_word(value) == source):
            continue
        if key == "task" and isinstance(value, dict):
            value = {
                k: v
                for k, v in value.items()
                if k not in _OUTCOME_KEYS and not (k in ("source", "env") and _source_word(v) == source)
            }
        elif key == "env" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if not (k == "sim_or_real" and _source_word(v) == source)}
        out.extend((k, _number_key(v)) for k, v in _leaves(value, key))
    return out


def facts_of(
    text: str, context: Mapping[str, Any], analysis: Analysis | None = None, measured: Measured | None = None
) -> Facts:
    """The decisive facts of `text` learned with `context` (see the module docstring). `analysis`
    and `measured`: the text's, when the caller has them."""
    a = analysis or Analysis(text)
    task = context.get("task")
    task = task if isinstance(task, Mapping) else {}
    note = context.get("note")
    said = Analysis(note) if isinstance(note, str) and note.strip() else None
    source = source_of(context)
    extra = _other_values(context, source)
    if note is not None and said is None:  # a note that is no text is a value like any other
        extra += ((k, _number_key(v)) for k, v in _leaves(note, "note"))
    return Facts(
        numbers=(measured or Measured.of(text)).numbers,
        params=tuple((k, _number_key(v)) for k, v in _leaves(context.get("params", {}))),
        spatial=tuple((k, _number_key(v)) for k, v in _leaves(context.get("spatial", {}))),
        outcome=(
            *(_verdict(task.get(k)) for k in _OUTCOME_KEYS),
            *(_verdict(context.get(k)) for k in _OUTCOME_KEYS),
            text_outcome(a),
            0 if said is None else text_outcome(said),
        ),
        negated=a.hit(NEGATION),
        source=source,
        note=_note_facts(said),
        extra=tuple(extra),
    )


def _note_facts(said: Analysis | None) -> tuple[Any, ...]:
    """A note's numbers and negation — nothing when it has neither, as when there is no note: a
    note such as "seen in lab" must not keep the same insight learned without one from being
    its duplicate (two such notes never did)."""
    if said is None:
        return ()
    found, negates = numbers(said.text, said.words), said.hit(NEGATION)
    return (found, negates) if found or negates else ()


def facts_hash(facts: Facts) -> str:
    """A stable digest of `facts`: memories whose digests differ can never be duplicates."""
    return hashlib.sha256(repr(facts).encode()).hexdigest()[:24]


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def lexical_words(tokens: Iterable[str]) -> list[str]:
    """The distinct tokens whose overlap a lexical duplicate reports as its similarity, in order:
    every token but the numbers (all-digit tokens), which the facts compare exactly — so "12.5"
    against "12.50" (tokens ``12 5`` / ``12 50``) costs no similarity. A text of numbers only
    keeps them."""
    uniq = list(dict.fromkeys(t for t in tokens if t))
    kept = [t for t in uniq if not t.isdecimal()]
    return kept or uniq


@dataclass(frozen=True)
class Measured:
    """A text's numbers as dedup reads them, found once for its facts and its `content_sequence`:
    in its `normalise`d form (units are read case-blind anyway, and "12  N" with two spaces or a
    full-width "１２ N" is "12 N" as the exact stage already says)."""

    tokens: tuple[str, ...]  # of the normalised text
    signed: str  # the normalised text with its sign words as signs
    found: tuple[tuple[int, int, str], ...]  # (start, stop, quantity) in `signed`

    @classmethod
    def of(cls, text: str) -> Measured:
        norm = normalise(text)
        tokens = segment.tokens(norm)
        signed, found = _quantities(norm, frozenset(tokens))
        return cls(tuple(tokens), signed, tuple(found))

    @property
    def numbers(self) -> tuple[str, ...]:
        return tuple(q for _, _, q in self.found)


#: What may be a symbol of the sequence: a run of ASCII operators and signs, or one character
#: outside ASCII that is neither part of a word nor white space (`_symbol` decides).
_MAYBE_SYMBOL = re.compile(r"[<>=!+\-&^~|$]+|[^\w\s\x00-\x7f]")
#: Unicode categories of the characters that are words of their own: math (≥ → ±), other (✅ ❌
#: 👍 🔒 °), modifier (^) and currency symbols.
_SYMBOL_CATEGORIES = frozenset({"Sm", "So", "Sk", "Sc"})
#: English contractions, as token pairs (`segment.tokens` splits at the apostrophe: "don't" →
#: ``don t``), and the words they stand for: "don't" and "do not" are one experience.
_NOT = {
    "don": "do", "doesn": "does", "didn": "did", "isn": "is", "aren": "are", "wasn": "was",
    "weren": "were", "haven": "have", "hasn": "has", "hadn": "had", "shouldn": "should",
    "wouldn": "would", "couldn": "could", "mustn": "must", "needn": "need", "can": "can",
    "won": "will", "shan": "shall",
}  # fmt: skip
_CONTRACTED = {
    "t": _NOT,
    "s": dict.fromkeys(("it", "that", "there", "here", "what", "he", "she", "who"), "is"),
    "m": {"i": "am"},
    "re": dict.fromkeys(("you", "we", "they"), "are"),
    "ll": dict.fromkeys(("i", "you", "we", "they", "it", "he", "she", "that"), "will"),
    "ve": dict.fromkeys(("i", "you", "we", "they"), "have"),
}
_EXPANDED = {"cannot": ("can", "not")}
#: A number's place in the sequence (`segment.tokens` never yields it from text: every digit is
#: in some number, which the sequence replaces).
NUMBER_TOKEN = "#"
_MARK = " 0 "  # what stands for a number or a symbol while the rest is split into tokens


def _symbol(run: str, piece: str, start: int, end: int) -> str | None:
    """The token a `_MAYBE_SYMBOL` match `run` at `start`:`end` of `piece` is, or None when it is
    ordinary punctuation: a comparison ("<", ">=", "!=", "->"), "&" (the word "and"), a sign or
    dash standing apart or against a digit ("offset + 5", "x-5"; not the hyphen in "wi-fi" nor a
    list's leading "- "), a symbol character (✅ → ≤ ± ° $); not "!", "’", "—", "…"."""
    if not run.isascii():
        return run if unicodedata.category(run) in _SYMBOL_CATEGORIES else None
    if "<" in run or ">" in run or "=" in run:
        return run
    if run == "&":
        return "and"
    run = run.replace("!", "")
    if run.strip("+-"):
        return run  # ^ ~ | $
    if not run:
        return None
    before = piece[start - 1] if start else ""
    after = piece[end] if end < len(piece) else ""
    if before.isalpha() and after.isalpha():
        return None  # a hyphen inside a word
    if run == "-" and not piece[:start].strip() and after.isspace():
        return None  # a list item's dash
    return run


def _scan(piece: str, chunks: list[str], marks: list[str]) -> None:
    """`piece` (text without numbers) into `chunks`, each of its symbols replaced by `_MARK` and
    appended to `marks`."""
    last = 0
    for s in _MAYBE_SYMBOL.finditer(piece):
        sym = _symbol(s.group(0), piece, s.start(), s.end())
        if sym is not None:
            chunks.append(piece[last : s.start()])
            chunks.append(_MARK)
            marks.append(sym)
            last = s.end()
    chunks.append(piece[last:])


def _expand(words: Sequence[str]) -> list[str]:
    """`words` with English contractions written out ("don t" → ``do not``, "cannot" → ``can
    not``, "it s" → ``it is``) and "wi fi" as ``wifi``."""
    out: list[str] = []
    for w in words:
        table = _CONTRACTED.get(w)
        if table is not None and out and out[-1] in table:
            if w == "t":
                out[-1:] = [table[out[-1]], "not"]
            else:
                out.append(table[out[-1]])
        elif w == "fi" and out and out[-1] == "wi":
            out[-1] = "wifi"
        elif w in _EXPANDED:
            out.extend(_EXPANDED[w])
        else:
            out.append(w)
    return out


def content_sequence(text: str, measured: Measured | None = None) -> tuple[str, ...]:
    """What a text says, for dedup: its tokens in order (`normalise`d: case and width folded),
    without the articles and "please" (`lexicon.FILLER_WORDS`), each number with its unit
    (`numbers`: "12 N", "12N", "twelve newtons") as one `NUMBER_TOKEN` where it stands — the
    facts compare the quantities, the sequence where they stand ("give 2 pills to the patient" /
    "give the pills to patient 2"; "room B12" / "room 12B") — and each symbol that carries meaning
    as a token of its own (`_symbol`: "> 50 C" / "< 50 C", ✅ / ❌, "10:30" / "10/30"). English
    contractions are written out ("don't" is "do not", "can't" and "cannot" "can not") and "&"
    is "and". Nothing else is dropped and nothing is stemmed: a pronoun ("his"/"her"), a form of
    "be" or "have", "to", a particle, an inflection ("casing"/"case") or the order of the words
    ("stack the red block on the blue one" / "… the blue block on the red one") can be all that
    tells two experiences apart, and when in doubt dedup stores."""
    m = measured or Measured.of(text)
    signed = m.signed
    words: Sequence[str]
    if not m.found and _MAYBE_SYMBOL.search(signed) is None:
        words = m.tokens  # most texts: no numbers, no symbols
    else:
        chunks: list[str] = []
        marks: list[str] = []
        pos, after_number = 0, -1
        for start, stop, _ in m.found:
            if start < pos:
                pos = max(pos, stop)
                continue  # inside the number before (a spelled one around a digit)
            gap = signed[pos:start]
            if pos == after_number and gap.strip() in (":", "/"):  # 10:30 is not 10/30
                chunks.append(_MARK)
                marks.append(gap.strip())
            else:
                _scan(gap, chunks, marks)
            chunks.append(_MARK)
            marks.append(NUMBER_TOKEN)
            pos = after_number = stop
        _scan(signed[pos:], chunks, marks)
        placed = iter(marks)
        words = [next(placed) if w == "0" else w for w in segment.tokens("".join(chunks))]
    if "'" in signed or "\u2019" in signed or not _EXPANDED.keys().isdisjoint(words) or "fi" in words:
        words = _expand(words)
    return tuple(w for w in words if w not in FILLER_WORDS)


#: A cosine candidate this many word edits or fewer away is a substitution, not a paraphrase.
SUBSTITUTION_EDITS = 2


def substituted(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two texts' `content_sequence`s differ by a substitution rather than a paraphrase:
    each has at most `SUBSTITUTION_EDITS` words (repeats counted) the other lacks, in whatever
    order — words inserted, deleted or replaced ("the red cube" / "the blue cube", "grasp the mug"
    / "grasp the mug less firmly", "has been charged" / "has to be charged", "wired" /
    "wireless", "charged" / "charging"), and the rest perhaps reordered (roles or the scope of
    "not" swapped: "stack the red block on the blue block" / "… the blue block on the red block";
    "move the arm to the left" / "move the left arm"; "the gate is locked" / "lock the gate").
    An embedding of such a pair is made mostly of the words they share, so their cosine is high
    (up to 0.999) whatever the edit does to the meaning. No word counts as "another form" of a
    different one: a shared beginning tells nothing (cup/cupboard, pen/pencil, lock/locked), so
    an inflection variant ("Agarra"/"Agarrar la taza") is stored twice — a near-duplicate kept is
    cheap, a distinct experience dropped is lost. Not a substitution: more words differ — a
    rewording, which the cosine threshold judges."""
    if list(a) == list(b):
        return False
    ca, cb = Counter(a), Counter(b)
    return max((ca - cb).total(), (cb - ca).total()) <= SUBSTITUTION_EDITS


def _opposed(mine: Set[str], theirs: Set[str]) -> bool:
    """Whether a word of `mine` is the opposite of one of `theirs` (the words only each text has)."""
    for w in mine:
        opposite = OPPOSITES.get(w)
        if opposite is not None and not opposite.isdisjoint(theirs):
            return True
        for p in NEGATING_PREFIXES:
            if len(w) >= NEGATING_STEM and p + w in theirs:
                return True
            if w.startswith(p) and len(w) - len(p) >= NEGATING_STEM and w[len(p) :] in theirs:
                return True
        if not w.isascii():
            for ch in w:
                opposite = CJK_OPPOSITES.get(ch)
                if opposite is not None and any(o in t for t in theirs for o in opposite):
                    return True
    return False


def _negating_word(tokens: Sequence[str], only: Set[str], shared: Set[str]) -> bool:
    """Whether `tokens` has a negating prefix written apart ("counter clockwise") that the other
    text lacks, right before a word both have."""
    return any(
        w in NEGATING_WORDS and w in only and i + 1 < len(tokens) and tokens[i + 1] in shared
        for i, w in enumerate(tokens)
    )


def _in_order(tokens: Sequence[str], other: Set[str]) -> list[str]:
    """The content words of `tokens` that `other` has too, each once, in the order they first come."""
    return [w for w in dict.fromkeys(tokens) if w in other and w not in segment.STOPWORDS and not w.isdecimal()]


def conflicting(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two similar texts (their tokens, in order, repeats kept) still say different
    things: a word one has more often is the opposite of a word the other has more often
    ("increase"/"decrease", "safe"/"unsafe", "clockwise"/"counter clockwise", 左手/右手; counted,
    so "switch it on … the mug on the table" still differs from "switch it off … on the table");
    or they name a sequence ("then", "before", "first", 然后…) and their shared content words
    come in another order ("open the door, then press the button" against the reverse)."""
    ca, cb = Counter(a), Counter(b)
    only_a = {w for w, n in ca.items() if n > cb[w]}
    only_b = {w for w, n in cb.items() if n > ca[w]}
    if only_a and only_b and _opposed(only_a, only_b):
        return True
    if not (NEGATING_WORDS.isdisjoint(only_a) and NEGATING_WORDS.isdisjoint(only_b)):
        shared = ca.keys() & cb.keys()
        if _negating_word(a, only_a, shared) or _negating_word(b, only_b, shared):
            return True
    if not SEQUENCE_WORDS.isdisjoint(ca) or not SEQUENCE_WORDS.isdisjoint(cb):
        return _in_order(a, cb.keys()) != _in_order(b, ca.keys())
    return False


@dataclass(frozen=True)
class Candidate:
    """A stored memory proposed as a possible duplicate."""

    id: int
    content: str
    similarity: float | None = None  # the cosine, for semantic candidates


@dataclass(frozen=True)
class Duplicate:
    existing_id: int
    method: Method
    similarity: float


def judge(
    text: str,
    exact: Sequence[Candidate],
    lexical: Sequence[Candidate] = (),
    semantic: Sequence[Candidate] = (),
    tokens: Sequence[str] | None = None,
    sequence: Sequence[str] | None = None,
) -> Duplicate | None:
    """The first candidate, stage by stage, that tells the same experience. Every candidate already
    shares the new memory's facts digest (`facts_hash`; the SQL that fetched it checked), so
    numbers and outcomes have decided before the text is even compared:

    - **exact**: the same normalised text;
    - **lexical**: the same `content_sequence` — the texts differ at most in articles, "please",
      punctuation, case and how their numbers and units are written — and not `conflicting`; of
      several, the one whose words overlap most (Jaccard of `lexical_words`, the similarity
      reported). `exact` holds the memories with the same `content_hash` (the lexical key), and
      they are lexical candidates too;
    - **semantic**: cosine ≥ `COSINE_DUPLICATE`, not `conflicting`, and not `substituted`: a
      pair that differs in a word or two, or in word order, is two experiences however close
      their vectors.

    `tokens` and `sequence`: the text's tokens and `content_sequence`, when the caller has them."""
    if not (exact or lexical or semantic):
        return None  # most learns: nothing to compare with
    norm = normalise(text)
    for c in exact:
        if normalise(c.content) == norm:
            return Duplicate(c.id, "exact", 1.0)
    words = segment.tokens(text) if tokens is None else tokens
    said = tuple(content_sequence(text) if sequence is None else sequence)
    mine: list[str] | None = None  # lexical_words(words): made when a candidate says the same
    every: list[str] = []  # the text's tokens with repeats, for `conflicting`: made when needed

    def differs(theirs: Sequence[str]) -> bool:
        if not every:
            every.extend(segment.tokens(text))
        return conflicting(every, theirs)

    best: Duplicate | None = None
    for c in (*exact, *lexical) if said else ():  # an empty sequence says nothing to compare
        if content_sequence(c.content) != said:
            continue
        theirs = segment.tokens(c.content)
        if mine is None:
            mine = lexical_words(words)
        sim = jaccard(mine, lexical_words(theirs))
        if (best is None or sim > best.similarity) and not differs(theirs):
            best = Duplicate(c.id, "jaccard", round(sim, 4))
    if best is not None:
        return best
    for c in semantic:
        if c.similarity is None or c.similarity < COSINE_DUPLICATE:
            continue
        if not substituted(said, content_sequence(c.content)) and not differs(segment.tokens(c.content)):
            return Duplicate(c.id, "cosine", round(c.similarity, 4))
    return None


__all__ = [
    "COSINE_DUPLICATE",
    "Candidate",
    "Duplicate",
    "FactKeys",
    "Facts",
    "Measured",
    "conflicting",
    "content_hash",
    "content_sequence",
    "fact_keys",
    "facts_hash",
    "facts_of",
    "jaccard",
    "judge",
    "lexical_key",
    "lexical_words",
    "memory_keys",
    "negated",
    "normalise",
    "numbers",
    "perception_hash",
    "source_of",
    "substituted",
]
