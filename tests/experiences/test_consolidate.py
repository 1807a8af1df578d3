"""Consolidation planning: redundant memories fold together, within the rules."""

from __future__ import annotations

from typing import Any

import pytest

from robot_mcp_memory.experiences.classify import PROTECTED
from robot_mcp_memory.experiences.consolidate import CLUSTER_THRESHOLD, KEEP_CONFIDENCE, MIN_MEMORIES, Row, plan
from robot_mcp_memory.experiences.dedup import jaccard
from robot_mcp_memory.search import segment


def row(i: int, content: str, *, category: str = "observation", conf: float = 0.8, ctx: dict[str, Any] | None = None,
        type_: str = "fact", access: int = 0, collection: str = "default") -> Row:  # fmt: skip
    return Row(i, type_, content, category, conf, ctx or {}, access, float(i), collection)


def test_similar_memories_of_one_category_fold_into_the_most_confident() -> None:
    rows = [
        row(1, "the mug handle faces left on the shelf"),
        row(2, "the mug handle faces left on the top shelf", conf=0.9),
        row(3, "mug handle faces left on shelf"),
        row(4, "the door opens inwards"),
    ]
    assert sorted(plan(rows)) == [(1, 2), (3, 2)]


def test_a_failure_is_never_merged_into_a_success() -> None:
    ok, bad = {"task": {"success": True}}, {"task": {"success": False}}
    rows = [
        row(1, "approach the mug from the left side", ctx=ok),
        row(2, "approach the mug from the left side slowly", ctx=ok),
        row(3, "approach the mug from the left side", ctx=bad),
    ]
    assert plan(rows) == [(1, 2)]  # equal confidence and accesses: the newer one (2) is kept


def test_memories_of_other_collections_never_merge() -> None:
    """One session may learn into several collections: each memory stays recallable in its own."""
    rows = [
        row(1, "the mug handle faces left on the shelf"),
        row(2, "the mug handle faces left on the top shelf"),
        row(3, "the mug handle faces left on the shelf", conf=0.9, collection="kitchen"),
    ]
    assert plan(rows) == [(1, 2)]  # equal confidence and accesses: the newer one (2) is kept


def test_different_numbers_never_merge() -> None:
    rows = [row(1, "grip the mug at 12 N"), row(2, "grip the mug at 15 N"), row(3, "grip the mug at 18 N")]
    assert plan(rows) == []


ORDINARY = (
    "the mug handle faces left on the shelf",
    "the mug handle faces left on the top shelf",
    "mug handle faces left on shelf",
)


#: Three wordings of one observation (the same content words): whichever represents them, the
#: others say nothing it does not.
SAME = ORDINARY[0], "the mug's handle faces left on this shelf", ORDINARY[2]


def ordinary_rows() -> list[Row]:
    """Three similar facts that fold into row 2 (the most confident)."""
    return [row(1, ORDINARY[0]), row(2, ORDINARY[1], conf=0.9), row(3, ORDINARY[2])]


@pytest.mark.parametrize(
    "protected",
    [
        *({"category": c} for c in sorted(PROTECTED)),
        {"type_": "perception"},  # same category and text as the facts: only the type differs
        {"type_": "perception", "category": "perception"},
        {"conf": KEEP_CONFIDENCE},  # exactly at the bar is kept out
        {"conf": 0.99},
    ],
    ids=repr,
)
def test_protected_categories_perceptions_and_confident_memories_are_left_alone(protected: dict[str, Any]) -> None:
    """Each protected class gets as many near-copies as would fold on their own, next to ordinary
    facts that do fold: the protected ids appear nowhere in the plan, and the ordinary ones fold
    exactly as they would alone."""
    copies = [row(10 + i, text, **protected) for i, text in enumerate(ORDINARY)]
    assert len(copies) >= MIN_MEMORIES
    rows = ordinary_rows() + copies
    pairs = plan(rows)
    assert pairs  # the pool is large enough for the plan to do something
    assert {i for pair in pairs for i in pair}.isdisjoint({r.id for r in copies})
    assert sorted(pairs) == sorted(plan(ordinary_rows())) == [(1, 2), (3, 2)]


def test_clustering_is_complete_link_every_pair_must_clear_the_threshold() -> None:
    """A~B and B~C clear the threshold, A~C does not: A and C never end in one cluster, even
    though each is similar to B (single-link, "any" pair, would chain them)."""
    b = row(1, "red mug blue shelf green cup", conf=0.9)
    a = row(2, "red mug blue shelf", conf=0.85)
    c = row(3, "blue shelf green cup")
    sim = {
        k: jaccard(segment.words(x.content), segment.words(y.content))
        for k, (x, y) in {"ab": (a, b), "bc": (b, c), "ac": (a, c)}.items()
    }
    assert sim["ab"] > CLUSTER_THRESHOLD
    assert sim["bc"] > CLUSTER_THRESHOLD
    assert sim["ac"] <= CLUSTER_THRESHOLD
    assert plan([b, a, c]) == [(2, 1)]
    assert plan([c, a, b]) == [(2, 1)]


def test_similarity_exactly_at_the_cluster_threshold_does_not_fold() -> None:
    """Jaccard must be strictly above CLUSTER_THRESHOLD: 2 shared words of 4 is exactly 0.5."""
    a, b = row(1, "red mug blue shelf"), row(2, "red mug")
    assert jaccard(segment.words(a.content), segment.words(b.content)) == CLUSTER_THRESHOLD
    unrelated = row(3, "the door opens inwards")
    assert plan([a, b, unrelated]) == []
    # just above it (3 of 4, 0.75) they fold
    assert plan([row(1, "red mug blue"), row(2, "red mug blue shelf"), unrelated]) == [(1, 2)]


def at(i: int, content: str, *, conf: float = 0.8, access: int = 0, created: float = 0.0) -> Row:
    return Row(i, "fact", content, "observation", conf, {}, access, created)


def test_a_cluster_keeps_the_most_confident_before_the_most_accessed() -> None:
    rows = [
        at(1, SAME[0], conf=0.9),
        at(2, SAME[1], access=50, created=9),
        at(3, SAME[2], access=10, created=9),
    ]
    assert sorted(plan(rows)) == [(2, 1), (3, 1)]


def test_at_equal_confidence_a_cluster_keeps_the_most_accessed_memory() -> None:
    """The most accessed wins over a newer one and a higher id."""
    rows = [
        at(1, SAME[0], access=7, created=1),
        at(2, SAME[1], access=3, created=5),
        at(3, SAME[2], created=9),
    ]
    assert sorted(plan(rows)) == [(2, 1), (3, 1)]


def test_at_equal_confidence_and_accesses_a_cluster_keeps_the_newest_memory() -> None:
    """Newest by created_at, not by id: here the lowest id is the newest."""
    rows = [at(1, SAME[0], created=300), at(2, SAME[1], created=200), at(3, SAME[2], created=100)]
    assert sorted(plan(rows)) == [(2, 1), (3, 1)]


def test_when_everything_else_is_equal_a_cluster_keeps_the_highest_id() -> None:
    rows = [at(1, SAME[0]), at(2, SAME[1]), at(3, SAME[2])]
    assert sorted(plan(rows)) == [(1, 3), (2, 3)]


def test_fewer_than_three_candidates_change_nothing() -> None:
    assert plan([row(1, "a b c d"), row(2, "a b c d e")]) == []
