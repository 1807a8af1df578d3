"""Consolidation planning: redundant memories fold together, within the rules."""

from __future__ import annotations

from typing import Any

import pytest

from robot_mcp_memory.experiences.classify import PROTECTED
from robot_mcp_memory.experiences.consolidate import KEEP_CONFIDENCE, MIN_MEMORIES, Row, plan


def row(i: int, content: str, *, category: str = "observation", conf: float = 0.8, ctx: dict[str, Any] | None = None,
        type_: str = "fact", access: int = 0, collection: str = "default") -> Row:  # fmt: skip
    return Row(i, type_, content, category, conf, ctx or {}, access, float(i), collection)


def test_similar_memories_of_one_category_fold_into_the_most_confident() -> None:
    rows = [
        row(1, "the mug handle faces left on the shelf"),
        row(2, "The mug handle faces left on a shelf!", conf=0.9),
        row(3, "mug handle faces left on shelf"),
        row(4, "the door opens inwards"),
        row(5, "the mug handle faces left on the top shelf"),  # a word more: another experience
    ]
    assert sorted(plan(rows)) == [(1, 2), (3, 2)]


def test_a_failure_is_never_merged_into_a_success() -> None:
    ok, bad = {"task": {"success": True}}, {"task": {"success": False}}
    rows = [
        row(1, "approach the mug from the left side", ctx=ok),
        row(2, "Approach the mug from the left side.", ctx=ok),
        row(3, "approach the mug from the left side", ctx=bad),
    ]
    assert plan(rows) == [(1, 2)]  # equal confidence and accesses: the newer one (2) is kept


def test_memories_of_other_collections_never_merge() -> None:
    """One session may learn into several collections: each memory stays recallable in its own."""
    rows = [
        row(1, "the mug handle faces left on the shelf"),
        row(2, "The mug handle faces left on a shelf!"),
        row(3, "the mug handle faces left on the shelf", conf=0.9, collection="kitchen"),
    ]
    assert plan(rows) == [(1, 2)]  # equal confidence and accesses: the newer one (2) is kept


def test_different_numbers_never_merge() -> None:
    rows = [row(1, "grip the mug at 12 N"), row(2, "grip the mug at 15 N"), row(3, "grip the mug at 18 N")]
    assert plan(rows) == []


ORDINARY = (
    "the mug handle faces left on the shelf",
    "The mug handle faces left on a shelf!",
    "mug handle faces left on shelf",
)


#: Three wordings of one observation (the same content words in the same order): whichever
#: represents them, the others say nothing it does not.
SAME = ORDINARY[0], "Please: the mug handle faces left on the shelf.", ORDINARY[2]


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


def test_writings_of_one_sentence_fold_into_the_most_confident() -> None:
    """Punctuation, case and articles differ; the words and their order do not."""
    rows = [
        row(1, "turn the valve, then open the door", conf=0.9),
        row(2, "Turn the valve, then open the door."),
        row(3, "turn a valve then open a door"),
        row(4, "the door opens inwards"),
    ]
    assert sorted(plan(rows)) == [(2, 1), (3, 1)]


@pytest.mark.parametrize(
    ("kept", "added"),
    [
        ("Grasp the mug firmly", "Grasp the mug less firmly"),
        ("The gripper holds the wet mug", "The gripper hardly holds the wet mug"),
        ("The arm hit the shelf while turning", "The arm almost hit the shelf while turning"),
        ("The gripper lost the wet mug", "The gripper nearly lost the wet mug"),
        ("Grasp the mug by the rim", "Grasp the mug by the handle rather than the rim"),
        ("Approach the shelf slowly", "Approach the shelf too slowly"),
        ("the mug handle faces left on the shelf", "the mug handle faces left on the top shelf"),
    ],
)
def test_a_memory_with_a_word_more_never_supersedes_one_without_it(kept: str, added: str) -> None:
    """Found by review: a memory was folded into a newer one whose content words include all of its
    own, and the added word reversed it ("less firmly", "nearly lost": a failure became a near
    miss). Only lexical duplicates fold, whichever is the more confident."""
    other = row(3, "the door opens inwards")
    assert plan([row(1, kept), row(2, added), other]) == []
    assert plan([row(1, added), row(2, kept), other]) == []


def test_only_the_same_words_in_the_same_order_fold() -> None:
    """Found by review: roles swapped ("the red block on the blue block") are the same content
    words; the order tells them apart."""
    rows = [
        row(1, "Stack the red block on the blue block"),
        row(2, "Stack the blue block on the red block"),
        row(3, "stack a red block on a blue block", conf=0.9),
    ]
    assert plan(rows) == [(1, 3)]


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
