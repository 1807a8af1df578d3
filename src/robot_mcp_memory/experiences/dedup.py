"""Is a new insight a duplicate of one already stored? Exact → lexical → semantic, where
**numbers and outcomes decide**.

robotmem compared text only, so "grip with 12 N" swallowed "grip with 15 N", a failed episode
vanished into a successful one, and "do not grasp the mug by the rim" was dropped as a copy of
"grasp the mug by the rim". Here text similarity only *proposes* a duplicate; the decisive
`Facts` of both must then be identical:

- the numbers in the text, in order, compared exactly (``12.50`` = ``12.5``, ``12`` ≠ ``12.1``);
- every value under ``context.params`` and every number under ``context.spatial``;
- the outcome: ``context.task.success`` (and ``task.outcome`` / ``task.result``), and the
  success/failure words of the text;
- negation: whether the text negates ("not", "never", "avoid", "不", "не" …);
- the source (``real`` vs simulation).

Stages (the first that finds a match with equal facts wins):

1. **exact** — same normalised text (case, spacing and trailing punctuation ignored), by hash;
2. **lexical** — Jaccard similarity of the word sets ≥ `JACCARD_DUPLICATE`. Candidates come from
   the full-text index with a pigeonhole query (`candidate_expression`) that every qualifying
   memory must match, so no candidate is missed however old;
3. **semantic** — cosine ≥ `COSINE_DUPLICATE` between embeddings, when a vector index supplies
   candidates.

Everything here is pure; the SQL that fetches candidates lives in `storage`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from robot_mcp_memory.experiences.lexicon import FAILURE, NEGATION, SUCCESS, Analysis
from robot_mcp_memory.search import segment

JACCARD_DUPLICATE = 0.8
COSINE_DUPLICATE = 0.92
Method = Literal["exact", "jaccard", "cosine"]

#: A number, wherever it stands: after a letter too (``M12``, ``v2``, ``10x20``, ``夹爪力12牛顿`` —
#: Han characters are letters to ``\w``), with a sign only where it cannot be a hyphen.
_NUMBER = re.compile(r"(?:(?<![\w.])[-+])?(?<!\d)(?<!\d[.,])\d+(?:[.,]\d+)*")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")
_REAL = frozenset({"real", "real_world", "real-world", "hardware", "physical"})


def normalise(text: str) -> str:
    """Case-, width- and spacing-insensitive form of `text` (for the exact stage)."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", t).strip().rstrip(".!。！;；")


def content_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode()).hexdigest()[:32]


def perception_hash(description: str, perception_type: str, data: Any, metadata: Any) -> str:
    """A perception is the same only with the same description, kind, data and metadata."""
    blob = json.dumps([normalise(description), perception_type, data, metadata], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _canonical_number(raw: str) -> str:
    """``+012.50`` → ``12.5``; ``-0`` → ``0``; ``1,000`` and ``1,234.5`` group thousands; any
    other comma is a decimal one (``1,5`` → ``1.5``)."""
    sign = "-" if raw.startswith("-") else ""
    body = raw.lstrip("+-")
    body = body.replace(",", "") if _THOUSANDS.fullmatch(body) else body.replace(",", ".")
    whole, _, frac = body.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    out = f"{whole}.{frac}" if frac else whole
    return out if out == "0" else sign + out


#: A sign written as a word: "minus 5 degrees" is -5, "plus 5" +5.
_SIGN_WORD = re.compile(r"\b(minus|negative|plus|positive)\s+(?=\d)", re.IGNORECASE)


def numbers(text: str) -> tuple[str, ...]:
    """The numbers written in `text`, in order, canonicalised (``12.50`` → ``12.5``; ``minus 5``
    → ``-5``)."""
    signed = _SIGN_WORD.sub(lambda m: "-" if m.group(1).lower() in ("minus", "negative") else "+", text)
    return tuple(_canonical_number(m.group(0)) for m in _NUMBER.finditer(signed))


def negated(text: str | Analysis) -> bool:
    return (text if isinstance(text, Analysis) else Analysis(text)).hit(NEGATION)


def text_outcome(text: str | Analysis) -> int:
    """+1 when the text reports success only, −1 failure only, 0 otherwise."""
    a = text if isinstance(text, Analysis) else Analysis(text)
    return (1 if a.hit(SUCCESS) else 0) - (1 if a.hit(FAILURE) else 0)


def _leaves(value: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    # dict, not Mapping: contexts are plain JSON here (`jsonvalue.check`), and the abstract-class
    # check on every leaf of every learn cost more than the rest of this walk.
    if isinstance(value, dict):
        for k in sorted(value):
            yield from _leaves(value[k], f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


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
    if isinstance(v, bool) or not isinstance(v, int | float):
        return v
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return _canonical_number(repr(v))


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
        if isinstance(raw, str) and raw.strip():
            value = raw.strip().lower()
            return "real" if value in _REAL else value[:32]
    return ""


@dataclass(frozen=True)
class Facts:
    """What must be equal for two memories to be the same experience."""

    numbers: tuple[str, ...]
    params: tuple[tuple[str, Any], ...]
    spatial: tuple[tuple[str, Any], ...]
    outcome: tuple[Any, ...]
    negated: bool
    source: str


def facts_of(text: str, context: Mapping[str, Any], analysis: Analysis | None = None) -> Facts:
    a = analysis or Analysis(text)
    task = context.get("task")
    task = task if isinstance(task, Mapping) else {}
    outcome = (
        _success(task.get("success")),
        str(task.get("outcome", "")).lower(),
        str(task.get("result", "")).lower(),
        text_outcome(a),
    )
    return Facts(
        numbers=numbers(text),
        params=tuple((k, _number_key(v)) for k, v in _leaves(context.get("params", {}))),
        spatial=tuple(
            (k, _number_key(v))
            for k, v in _leaves(context.get("spatial", {}))
            if isinstance(v, int | float) and not isinstance(v, bool)
        ),
        outcome=outcome,
        negated=a.hit(NEGATION),
        source=source_of(context),
    )


def facts_hash(facts: Facts) -> str:
    """A stable digest of `facts`: memories whose digests differ can never be duplicates."""
    return hashlib.sha256(repr(facts).encode()).hexdigest()[:24]


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def candidate_expression(tokens: Sequence[str], threshold: float = JACCARD_DUPLICATE) -> str | None:
    """An FTS5 query every stored text with Jaccard ≥ `threshold` to `tokens` must match.

    Such a text contains at least ⌈t·|A|⌉ of A's tokens, so it misses at most
    m = |A| − ⌈t·|A|⌉ of them. Deal A's tokens into m + 1 groups: by the pigeonhole principle the
    text contains every token of at least one group. The query ORs the groups, each an AND of
    its tokens — selective (an AND is driven by its rarest token) and complete. Longer tokens,
    usually rarer, are dealt first so every group gets some."""
    uniq = list(dict.fromkeys(t for t in tokens if t))
    if not uniq:
        return None
    misses = len(uniq) - math.ceil(threshold * len(uniq) - 1e-9)
    groups: list[list[str]] = [[] for _ in range(misses + 1)]
    for i, tok in enumerate(sorted(uniq, key=lambda t: (-len(t), t))):
        groups[i % len(groups)].append(tok)
    ored = " OR ".join("(" + " AND ".join(segment.quote(t) for t in g) + ")" for g in groups if g)
    return f"content : ({ored})"


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
    lexical: Sequence[Candidate],
    semantic: Sequence[Candidate] = (),
    tokens: Sequence[str] | None = None,
) -> Duplicate | None:
    """The first candidate, stage by stage, whose text is similar enough. Every candidate already
    shares the new memory's facts digest (`facts_hash`; the SQL that fetched it checked), so
    numbers and outcomes have decided before text similarity is even measured."""
    norm = normalise(text)
    for c in exact:
        if normalise(c.content) == norm:
            return Duplicate(c.id, "exact", 1.0)
    mine = set(segment.words(text) if tokens is None else tokens)
    best: Duplicate | None = None
    for c in lexical:
        sim = jaccard(mine, segment.words(c.content))
        if sim >= JACCARD_DUPLICATE and (best is None or sim > best.similarity):
            best = Duplicate(c.id, "jaccard", round(sim, 4))
    if best is not None:
        return best
    for c in semantic:
        if c.similarity is not None and c.similarity >= COSINE_DUPLICATE:
            return Duplicate(c.id, "cosine", round(c.similarity, 4))
    return None


__all__ = [
    "COSINE_DUPLICATE",
    "JACCARD_DUPLICATE",
    "Candidate",
    "Duplicate",
    "Facts",
    "candidate_expression",
    "content_hash",
    "facts_hash",
    "facts_of",
    "jaccard",
    "judge",
    "negated",
    "normalise",
    "numbers",
    "perception_hash",
    "source_of",
]
