"""Auto-classification of an insight by fast rules: category, tags, confidence, scope entities.

No LLM, no I/O: cue words (English, Chinese and a few others; see `lexicon`) tested against one
tokenisation of the text with set operations, cheap enough to run on every learn. robotmem's
pipeline, with its taxonomy kept small and explicit:

- **category** — the first rule that matches, in priority order: ``gotcha``, ``constraint``,
  ``postmortem``, ``root_cause``, ``procedure``, ``decision``, ``preference``, else
  ``observation``. An insight whose context says the task failed (``task.success: false``) and
  that matched nothing more specific is a ``postmortem``. Perceptions are ``perception``.
- **tags** — the category, plus domain tags (``grasp``, ``force``, ``navigation`` …) from keyword
  rules, plus any ``context.tags`` the caller gave (stored with source ``user``).
- **confidence** — 0.80, +0.05 for concrete numbers or ``key=value`` parameters, +0.05 for a
  stated cause, +0.05 for a recorded outcome, −0.15 for hedging ("maybe", "可能"), −0.05 for a
  fragment of under four words; clamped to [0.30, 0.95].
- **scope** — identifiers the insight is about (``grip_force``, ``GraspPlanner``, keys of
  ``key=value``) and file paths, at most ten each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from robot_mcp_memory.experiences.lexicon import (
    CATEGORY_CUES,
    CAUSAL,
    HEDGE,
    TAG_CUES,
    Analysis,
    has_measurement,
)

#: Categories end_session's consolidation never touches.
PROTECTED = frozenset({"constraint", "postmortem", "gotcha"})
CATEGORIES = (
    "gotcha",
    "constraint",
    "postmortem",
    "root_cause",
    "procedure",
    "decision",
    "preference",
    "observation",
    "perception",
)

#: The tag taxonomy: dimension → tags. Every auto tag belongs to exactly one dimension.
TAXONOMY: dict[str, tuple[str, ...]] = {
    "boundary": ("constraint",),
    "experience": ("postmortem", "gotcha", "root_cause", "observation", "perception"),
    "technique": ("procedure",),
    "metacognition": ("decision",),
    "reflection": ("preference",),
    "capability": ("grasp", "place", "navigation", "manipulation", "inspection"),
    "domain": ("force", "vision", "tactile", "calibration", "safety", "battery", "timing"),
}
DIMENSION_OF = {tag: dim for dim, tags in TAXONOMY.items() for tag in tags}

_IDENT = re.compile(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]+)+)\b")
_KEY_VALUE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_.]*)\s?[=:]\s?-?[\w.]")
_PATH = re.compile(r"(?<![\w/])((?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8})\b")
#: What every `_IDENT` match without an underscore holds: a lower-case letter or digit right
#: before a capital (CamelCase, camelCase). A text with neither that nor an underscore has no
#: identifier, and most have neither: scanning for this costs a fifth of `_IDENT`'s search.
_HUMP = re.compile(r"[a-z0-9][A-Z]")


@dataclass(frozen=True)
class Classification:
    category: str
    confidence: float
    tags: tuple[str, ...]
    user_tags: tuple[str, ...] = ()
    scope: dict[str, list[str]] = field(default_factory=dict)


def category_of(text: str | Analysis, context: Mapping[str, Any]) -> str:
    a = text if isinstance(text, Analysis) else Analysis(text)
    for name, c in CATEGORY_CUES:
        if a.hit(c):
            return name
    if _task_success(context) is False:
        return "postmortem"
    return "observation"


def _task_success(context: Mapping[str, Any]) -> bool | None:
    task = context.get("task")
    if isinstance(task, Mapping) and isinstance(task.get("success"), bool):
        return bool(task["success"])
    return None


def confidence_of(text: str | Analysis, context: Mapping[str, Any]) -> float:
    a = text if isinstance(text, Analysis) else Analysis(text)
    c = 0.80
    if has_measurement(a):
        c += 0.05
    if a.hit(CAUSAL):
        c += 0.05
    if _task_success(context) is not None:
        c += 0.05
    if a.hit(HEDGE):
        c -= 0.15
    if len(a.words) < 4:
        c -= 0.05
    return round(min(0.95, max(0.30, c)), 2)


def scope_of(text: str) -> dict[str, list[str]]:
    """Named things in `text`: ``key=value`` / ``key: value`` keys, identifiers (snake_case,
    CamelCase, camelCase) and file paths, at most ten of each. Each pattern runs only on a text
    holding the character its every match needs (most insights hold none of them)."""
    entities: dict[str, None] = {}
    if "=" in text or ":" in text:
        for m in _KEY_VALUE.finditer(text):
            entities.setdefault(m.group(1), None)
    if "_" in text or _HUMP.search(text):
        for m in _IDENT.finditer(text):
            entities.setdefault(m.group(1), None)
    # A path holds a "." after a "/" (its extension): "m/s" alone needs no scan.
    slash = text.find("/")
    has_path = slash >= 0 and text.find(".", slash) >= 0
    files = list(dict.fromkeys(m.group(1) for m in _PATH.finditer(text)))[:10] if has_path else []
    ents = [e for e in entities if e not in files and not e.isdigit()][:10]
    return {"entities": ents, "files": files} if (ents or files) else {}


def tags_of(text: str | Analysis, category: str) -> tuple[str, ...]:
    a = text if isinstance(text, Analysis) else Analysis(text)
    return (category, *(name for name, c in TAG_CUES if a.hit(c)))


def user_tags(context: Mapping[str, Any]) -> tuple[str, ...]:
    """``context.tags`` as clean tag names (lower-case, ≤ 40 chars, at most 10)."""
    raw = context.get("tags")
    if not isinstance(raw, list):
        return ()
    out: dict[str, None] = {}
    for t in raw:
        if isinstance(t, str):
            name = re.sub(r"\s+", "_", t.strip().lower())[:40]
            if name:
                out.setdefault(name, None)
    return tuple(out)[:10]


def classify(text: str | Analysis, context: Mapping[str, Any]) -> Classification:
    """Everything the write pipeline infers about a fact."""
    a = text if isinstance(text, Analysis) else Analysis(text)
    category = category_of(a, context)
    return Classification(
        category=category,
        confidence=confidence_of(a, context),
        tags=tags_of(a, category),
        user_tags=user_tags(context),
        scope=scope_of(a.text),
    )


def classify_perception(description: str, perception_type: str, context: Mapping[str, Any]) -> Classification:
    """Perceptions are observations by a sensor: category ``perception``, tag the sensor kind."""
    return Classification(
        category="perception",
        confidence=0.90,
        tags=(*tags_of(description, "perception"), perception_type),
        user_tags=user_tags(context),
        scope=scope_of(description),
    )


__all__ = [
    "CATEGORIES",
    "DIMENSION_OF",
    "PROTECTED",
    "TAXONOMY",
    "Classification",
    "category_of",
    "classify",
    "classify_perception",
    "confidence_of",
    "scope_of",
    "tags_of",
]
