"""Consolidation at ``end_session``: fold redundant memories of one session into one.

robotmem's algorithm, with its defect fixed (it clustered by text alone, so a failed attempt
could be superseded by a successful one with the same wording):

1. eligible: the session's active **facts** (never perceptions), whose category is not protected
   (``constraint``, ``postmortem``, ``gotcha``) and whose confidence is below 0.95;
2. fewer than three → nothing to do;
3. group by collection, by category **and** by the decisive facts (`dedup.Facts`: numbers with
   their units, parameters, outcome — ``task.success``/``status``/``outcome``/``result`` —,
   negation, the note, source) — so a failure is never merged into a success, nor 12 N into
   15 N, and a memory learned into another collection under the same session never leaves it;
4. within a group, greedy complete-link clustering on Jaccard similarity > 0.5 of the words
   learn's dedup compares (`dedup.lexical_words`), every pair in a cluster clearing the threshold
   and not `dedup.conflicting` ("increase" is never folded into "decrease", nor a sequence of
   steps into its reverse);
5. each cluster keeps one representative — highest confidence, then most accessed, then newest —
   and the others become ``superseded`` by it (never deleted).

Pure: `plan` takes rows and returns (superseded id, representative id) pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robot_mcp_memory.experiences.classify import PROTECTED
from robot_mcp_memory.experiences.dedup import Facts, conflicting, facts_of, jaccard, lexical_words
from robot_mcp_memory.search import segment

CLUSTER_THRESHOLD = 0.5
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
    groups: dict[tuple[str, str, Facts], list[Row]] = {}
    for r in pool:
        groups.setdefault((r.collection, r.category, facts_of(r.content, r.context)), []).append(r)
    out: list[tuple[int, int]] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        for cluster in _clusters(members):
            rep = max(cluster, key=lambda r: (r.confidence, r.access_count, r.created_at, r.id))
            out.extend((r.id, rep.id) for r in cluster if r.id != rep.id)
    return out


def _clusters(members: Sequence[Row]) -> list[list[Row]]:
    every = {r.id: segment.tokens(r.content) for r in members}
    toks = {i: lexical_words(t) for i, t in every.items()}
    ordered = sorted(members, key=lambda r: (-r.confidence, r.id))
    clusters: list[list[Row]] = []
    for r in ordered:
        for cluster in clusters:
            if all(
                jaccard(toks[r.id], toks[o.id]) > CLUSTER_THRESHOLD and not conflicting(every[r.id], every[o.id])
                for o in cluster
            ):
                cluster.append(r)
                break
        else:
            clusters.append([r])
    return [c for c in clusters if len(c) > 1]


__all__ = ["CLUSTER_THRESHOLD", "KEEP_CONFIDENCE", "MIN_MEMORIES", "Row", "eligible", "plan"]
