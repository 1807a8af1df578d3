"""Consolidation at ``end_session``: fold redundant memories of one session into one.

robotmem's algorithm, with its defect fixed (it clustered by text alone, so a failed attempt
could be superseded by a successful one with the same wording):

1. eligible: the session's active **facts** (never perceptions), whose category is not protected
   (``constraint``, ``postmortem``, ``gotcha``) and whose confidence is below 0.95;
2. fewer than three → nothing to do;
3. group by collection, by category, by the decisive facts (`dedup.Facts`: numbers with their
   units, parameters, the task and the robot, outcome — ``task.success``/``status``/``outcome``/
   ``result`` —, negation, the note, source) **and** by the lexical key (`dedup.content_hash`):
   only memories that are lexical duplicates of each other, as learn judges them, can fold — the
   same words in the same order, differing at most in articles, "please", punctuation, case and
   how a number or unit is written. So a failure is never merged into a success, nor 12 N into
   15 N, nor one task's or robot type's experience into another's, and no word only one memory
   says is lost: "grasp the mug less firmly" never supersedes "grasp the mug firmly", nor "the
   gripper nearly lost the mug" "the gripper lost the mug" (a memory with a word more is no
   duplicate, whatever that word does to the meaning); a memory learned into another collection
   under the same session never leaves it;
4. within a group, greedy complete-link clustering, the memories taken best first (highest
   confidence, then most accessed, then newest): the first of a cluster is its representative;
   a memory joins it when it is `dedup.conflicting` with no member;
5. the other members of each cluster become ``superseded`` by its representative (never
   deleted): each says what the representative says.

Near-duplicates that learn kept apart stay apart here too: learn stored them because a word
differs, and a word can reverse what a memory says.

Pure: `plan` takes rows and returns (superseded id, representative id) pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robot_mcp_memory.experiences.classify import PROTECTED
from robot_mcp_memory.experiences.dedup import FactKeys, conflicting, fact_keys
from robot_mcp_memory.search import segment

KEEP_CONFIDENCE = 0.95
MIN_MEMORIES = 3


@dataclass(frozen=True)
class Row:
    id: int
    type: str
    content: str
    category: str
    confidence: float
    context: Mapping[str, Any]
    access_count: int
    created_at: float
    collection: str = "default"


def eligible(r: Row) -> bool:
    return r.type == "fact" and r.category not in PROTECTED and r.confidence < KEEP_CONFIDENCE


def plan(rows: Sequence[Row]) -> list[tuple[int, int]]:
    """Pairs (superseded_id, representative_id) for one session's memories."""
    pool = [r for r in rows if eligible(r)]
    if len(pool) < MIN_MEMORIES:
        return []
    keys = {r.id: fact_keys(r.content, r.context) for r in pool}
    groups: dict[tuple[str, str, str, str], list[Row]] = {}
    for r in pool:
        k = keys[r.id]
        groups.setdefault((r.collection, r.category, k.facts_hash, k.content_hash), []).append(r)
    out: list[tuple[int, int]] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        for rep, *others in _clusters(members, keys):
            out.extend((r.id, rep.id) for r in others)
    return out


def _clusters(members: Sequence[Row], keys: Mapping[int, FactKeys]) -> list[list[Row]]:
    """Clusters of two or more, each led by its representative. The members share their lexical
    key; an empty content sequence keys the text itself, so the sequences are compared too."""
    every = {r.id: segment.tokens(r.content) for r in members}

    def together(a: int, b: int) -> bool:
        return keys[a].sequence == keys[b].sequence and not conflicting(every[a], every[b])

    ordered = sorted(members, key=lambda r: (r.confidence, r.access_count, r.created_at, r.id), reverse=True)
    clusters: list[list[Row]] = []
    for r in ordered:
        for cluster in clusters:
            if all(together(r.id, o.id) for o in cluster):
                cluster.append(r)
                break
        else:
            clusters.append([r])
    return [c for c in clusters if len(c) > 1]


__all__ = ["KEEP_CONFIDENCE", "MIN_MEMORIES", "Row", "eligible", "plan"]


def session_summary(
    counts: Iterable[tuple[str, str, int]],
    *,
    consolidated: int,
    duration_s: float,
    outcome_score: float | None,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``end_session`` stores as a session's summary, whatever the backend: from (type,
    category, active memories) counts, how many memories consolidation folded, and how long the
    session ran. robotmem's keys (``memory_count``, ``by_type``, ``by_category``) stand beside
    ours; where an imported session came from (``imported_from`` of its `previous` summary) stays known."""
    by_type: dict[str, int] = {}
    by_category: dict[str, int] = {}
    for t, category, n in counts:
        by_type[t] = by_type.get(t, 0) + int(n)
        by_category[category] = int(n) + by_category.get(category, 0)
    summary: dict[str, Any] = {
        "memories": by_type.get("fact", 0),
        "perceptions": by_type.get("perception", 0),
        "categories": dict(sorted(by_category.items())),
        "consolidated": consolidated,
        "duration_s": round(duration_s, 3),
        "outcome_score": outcome_score,
        # robotmem's keys for the same counts (its summary had only these)
        "memory_count": sum(by_type.values()),
        "by_type": dict(sorted(by_type.items())),
        "by_category": dict(sorted(by_category.items())),
    }
    if previous and "imported_from" in previous:
        summary["imported_from"] = previous["imported_from"]
    return summary
