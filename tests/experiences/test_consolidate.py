"""Consolidation planning: redundant memories fold together, within the rules."""

from __future__ import annotations

from typing import Any

from robot_mcp_memory.experiences.consolidate import Row, plan


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
    assert plan(rows) == [(1, 2)] or plan(rows) == [(2, 1)]
    assert all(3 not in pair for pair in plan(rows))


def test_memories_of_other_collections_never_merge() -> None:
    """One session may learn into several collections: each memory stays recallable in its own."""
    rows = [
        row(1, "the mug handle faces left on the shelf"),
        row(2, "the mug handle faces left on the top shelf"),
        row(3, "the mug handle faces left on the shelf", conf=0.9, collection="kitchen"),
    ]
    assert plan(rows) == [(1, 2)] or plan(rows) == [(2, 1)]


def test_different_numbers_never_merge() -> None:
    rows = [row(1, "grip the mug at 12 N"), row(2, "grip the mug at 15 N"), row(3, "grip the mug at 18 N")]
    assert plan(rows) == []


def test_protected_categories_perceptions_and_confident_memories_are_left_alone() -> None:
    rows = [
        row(1, "never grasp the rim of the mug", category="constraint"),
        row(2, "never grasp the rim of the mug now", category="constraint"),
        row(3, "mug on the table", type_="perception", category="perception"),
        row(4, "mug on the table again", type_="perception", category="perception"),
        row(5, "the shelf is tidy today", conf=0.95),
        row(6, "the shelf is tidy today indeed", conf=0.95),
    ]
    assert plan(rows) == []


def test_fewer_than_three_candidates_change_nothing() -> None:
    assert plan([row(1, "a b c d"), row(2, "a b c d e")]) == []
