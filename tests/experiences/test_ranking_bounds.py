"""Ranking's bounds are inclusive and its ties are broken by age, against a real store.

Every memory is given an ``updated_at`` after the scope's ``now``, so no time has passed for it:
its decayed confidence is exactly its stored confidence, and equal memories score exactly alike.
"""

from __future__ import annotations

from typing import Any

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.model import Spatial
from robot_mcp_memory.experiences.ports import Order
from robot_mcp_memory.experiences.sqlite import ranking_repo
from robot_mcp_memory.experiences.sqlite.ranking_repo import Scope
from robot_mcp_memory.tenancy.principal import STDIO
from tests.experiences.conftest import stored_id

NOW = 1_000_000_000.0


async def learn(memory: Memory, insight: str, context: dict[str, Any] | None = None) -> int:
    """Learn through the service; the memory's stored id, which the ranking below works in."""
    learned = await memory.experiences.learn(STDIO, insight, context)
    assert learned.status == "created"
    return stored_id(memory, learned.memory_id)


def put(memory: Memory, memory_id: int, *, confidence: float = 0.8, updated_at: float = NOW + 60) -> None:
    """Set a memory's confidence and age straight in the database."""
    memory.index.write_blocking(
        lambda c: c.execute(
            "UPDATE memories SET confidence = ?, updated_at = ? WHERE id = ?", (confidence, updated_at, memory_id)
        )
    )


def ranked(memory: Memory, scope: Scope, order: Order = "score") -> list[int]:
    hits = memory.index.read_blocking(lambda c: ranking_repo.rank(c, scope, None, order, 50))
    return [h.memory.id for h in hits]


async def test_a_memory_exactly_at_min_confidence_is_returned(memory: Memory) -> None:
    below = await learn(memory, "the printer tray sticks on cold mornings")
    at = await learn(memory, "the kettle switch needs a firm press")
    above = await learn(memory, "the fridge door swings to the left")
    for mid, conf in ((below, 0.59), (at, 0.6), (above, 0.61)):
        put(memory, mid, confidence=conf)
    got = ranked(memory, Scope(None, "default", 0.6, NOW))
    assert sorted(got) == sorted([at, above])
    assert ranked(memory, Scope(None, "default", 0.61, NOW)) == [above]


async def test_a_memory_exactly_at_max_distance_is_returned(memory: Memory) -> None:
    """(3, 4) is exactly 5 from the origin: dist² = 25 = max_distance²."""
    near = await learn(memory, "the mug stands by the sink", {"spatial": {"position": [0, 0]}})
    at = await learn(memory, "the kettle stands by the window", {"spatial": {"position": [3, 4]}})
    beyond = await learn(memory, "the toaster stands by the door", {"spatial": {"position": [3, 4.01]}})
    for mid in (near, at, beyond):
        put(memory, mid)
    spatial = Spatial("spatial.position", (0.0, 0.0), max_distance=5.0)
    for order in ("score", "distance", "blend"):
        got = ranked(memory, Scope(None, "default", 0.0, NOW, spatial=spatial), order)
        assert sorted(got) == sorted([near, at]), order


async def test_among_equal_scores_the_most_recently_updated_comes_first(memory: Memory) -> None:
    """Same confidence, same source, no query: the newest first — by updated_at, not by id (here
    the oldest memory has the highest id)."""
    ids = [
        await learn(memory, text)
        for text in ("the bin is under the sink", "the mop is in the closet", "the broom hangs on the wall")
    ]
    for mid, updated in zip(ids, (NOW + 300, NOW + 200, NOW + 100), strict=True):
        put(memory, mid, updated_at=updated)
    assert ranked(memory, Scope(None, "default", 0.0, NOW)) == ids
    put(memory, ids[2], updated_at=NOW + 400)
    assert ranked(memory, Scope(None, "default", 0.0, NOW)) == [ids[2], ids[0], ids[1]]
