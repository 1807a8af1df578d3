"""The seven experience tools through the in-memory MCP client: names, shapes, limits."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.types import TextContent

from robot_mcp_memory.surfaces.mcp.server import MemoryMCP
from tests.conftest import Client

EXPERIENCE_TOOLS = {
    "learn": ["insight", "context", "collection", "session_id"],
    "recall": [
        "query",
        "n",
        "collection",
        "min_confidence",
        "session_id",
        "context_filter",
        "spatial_sort",
        "include_data",
    ],
    "save_perception": ["description", "perception_type", "data", "metadata", "collection", "session_id"],
    "forget": ["memory_id", "reason"],
    "update": ["memory_id", "new_content", "context"],
    "start_session": ["collection", "context"],
    "end_session": ["session_id", "outcome_score"],
}


async def test_the_seven_tools_have_robotmem_argument_names_in_order(server: MemoryMCP) -> None:
    tools = {t.name: t for t in await server.list_tools()}
    for name, args in EXPERIENCE_TOOLS.items():
        assert list(tools[name].inputSchema["properties"]) == args, name
        assert tools[name].outputSchema is not None
    assert tools["recall"].annotations is not None
    assert tools["recall"].annotations.readOnlyHint is True
    assert tools["forget"].annotations is not None
    assert tools["forget"].annotations.destructiveHint is True


async def test_result_shapes_are_robotmems(client: Client) -> None:
    s = await client.call("start_session", collection="lab", context={"task": {"name": "sort"}})
    assert set(s) >= {"session_id", "collection", "robot", "context", "started_at"}
    created = await client.call(
        "learn", insight="sort the red blocks first", collection="lab", session_id=s["session_id"]
    )
    assert set(created) >= {"status", "memory_id", "auto_inferred", "robot", "collection"}
    assert created["status"] == "created"
    assert created["robot"] == "tester"
    assert created["collection"] == "lab"
    dup = await client.call("learn", insight="Sort the red blocks first.", collection="lab")
    assert dup["status"] == "duplicate"
    assert set(dup) >= {"existing_id", "method", "similarity"}
    seen = await client.call(
        "save_perception", description="blocks on the tray", collection="lab", perception_type="tactile"
    )
    assert set(seen) >= {"memory_id", "perception_type", "collection", "has_embedding"}
    assert seen["has_embedding"] is True  # the fixture's hashing embedder stores a vector with it
    found = await client.call("recall", query="red sort", collection="lab")
    assert set(found) == {"memories", "total", "mode"}
    assert found["total"] == 1
    assert found["mode"] == "hybrid"  # the fixture's hashing embedder: experiences are hybrid too
    m = found["memories"][0]
    assert set(m) >= {"id", "content", "category", "confidence", "context", "params", "spatial", "robot", "task"}
    up = await client.call("update", memory_id=created["memory_id"], new_content="sort the blue blocks first")
    assert up["status"] == "updated"
    assert up["old_content"] == "sort the red blocks first"
    gone = await client.call("forget", memory_id=seen["memory_id"], reason="the tray was empty")
    assert gone == {"status": "forgotten", "memory_id": seen["memory_id"], "content": "blocks on the tray",
                    "reason": "the tray was empty"}  # fmt: skip
    ended = await client.call("end_session", session_id=s["session_id"], outcome_score=1)
    assert set(ended) >= {"status", "summary", "consolidated", "related_memories", "decayed_count"}
    assert ended["decayed_count"] == 0
    assert ended["status"] == "ended"


async def test_other_collections_are_not_searched(client: Client) -> None:
    await client.call("learn", insight="the blue door is locked", collection="site-a")
    assert (await client.call("recall", query="blue door", collection="site-b"))["memories"] == []
    assert (await client.call("recall", query="blue door", collection="site-a"))["total"] == 1


async def test_forgotten_and_unknown_memories_are_not_found(client: Client) -> None:
    m = await client.call("learn", insight="the lift is slow")
    await client.call("forget", memory_id=m["memory_id"], reason="it was repaired")
    assert (await client.call("update", memory_id=m["memory_id"], new_content="x"))["error"] == "not_found"
    assert (await client.call("forget", memory_id=999, reason="x"))["error"] == "not_found"
    assert (await client.call("end_session", session_id="nope"))["error"] == "not_found"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("recall", {"query": "x", "n": 0}),
        ("recall", {"query": "x", "n": 101}),
        ("recall", {"query": "x", "min_confidence": 1.5}),
        ("recall", {"query": "x" * 4001}),
        ("recall", {"query": "x", "collection": "bad name!"}),
        ("recall", {"query": "x", "context_filter": "not json"}),
        ("recall", {"query": "x", "context_filter": "[1, 2]"}),
        ("learn", {"insight": ""}),
        ("learn", {"insight": "x" * 10_001}),
        ("learn", {"insight": "x", "session_id": "s" * 65}),
        ("learn", {"insight": "x", "context": {"note": "y" * 70_000}}),
        ("save_perception", {"description": "x", "perception_type": "Visual Light"}),
        ("save_perception", {"description": "x", "metadata": {"m": "y" * 20_000}}),
        ("forget", {"memory_id": 0, "reason": "x"}),
        ("forget", {"memory_id": 1, "reason": ""}),
        ("end_session", {"session_id": "s", "outcome_score": 2}),
    ],
)
async def test_limits_are_enforced_as_invalid_arguments(client: Client, tool: str, args: dict[str, Any]) -> None:
    assert (await client.call(tool, **args))["error"] == "invalid"


def test_times_before_year_1000_are_iso_8601() -> None:
    """strftime's %Y wrote year 1 as "1": an imported robotmem row from year 1 read back unparseable."""
    import datetime as dt

    from robot_mcp_memory.experiences.views import iso

    assert iso(-62135596800.0) == "0001-01-01T00:00:00.000Z"
    assert dt.datetime.fromisoformat(str(iso(-62135596800.0)).replace("Z", "+00:00")).year == 1


@given(st.floats(min_value=-62135596800.0, max_value=253402300799.0))
def test_every_time_reads_back_as_the_millisecond_it_falls_in(ts: float) -> None:
    """A time before 1970 with a fraction came out as "…:59.-500Z" (int() rounds toward zero)."""
    import datetime as dt

    from robot_mcp_memory.experiences.views import iso

    back = dt.datetime.fromisoformat(str(iso(ts)).replace("Z", "+00:00")).timestamp()
    assert -1e-4 <= ts - back < 0.001 + 1e-4  # the millisecond it falls in (a double's own error aside)


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in a tool result's text: not JSON")

    return json.loads(text, parse_constant=refuse)


async def test_spatial_sort_over_coordinates_whose_squares_overflow(client: Client) -> None:
    """A stored coordinate of 1e200 squared is past the float range: hybrid recall raised an
    OverflowError (the client got "internal"), and keyword and filter recall reported an
    infinite distance, written as the non-JSON ``Infinity`` in the text block."""
    await client.call(
        "learn", insight="grasp the red mug at the far spot", context={"spatial": {"position": [1e200, 0, 0]}}
    )
    await client.call(
        "learn", insight="grasp the red mug at the near spot", context={"spatial": {"position": [0.1, 0, 0]}}
    )
    for query in ("grasp red mug", ""):
        for extra in ({}, {"max_distance": 1e11}):
            spatial = {"field": "spatial.position", "target": [0, 0, 0], **extra}
            result = await client.session.call_tool("recall", {"query": query, "spatial_sort": spatial})
            assert not result.isError
            block = result.content[0]
            assert isinstance(block, TextContent)
            found = _strict(block.text)
            assert isinstance(result.structuredContent, dict)
            assert found == result.structuredContent["result"], (query, extra)
            assert "error" not in found, found
            by = {m["content"].rsplit(" ", 2)[-2]: m["distance"] for m in found["memories"]}
            assert by["near"] == pytest.approx(0.1)
            assert found["memories"][0]["content"].endswith("near spot")
            if extra:
                assert "far" not in by
            else:
                assert by["far"] == pytest.approx(1e200)


async def test_a_spatial_field_segment_that_only_looks_like_an_index_is_a_key(client: Client) -> None:
    """'²' and '٣' are digits to str.isdigit but keys to the JSON path SQL reads: the distance
    read in Python for hybrid candidates called int('²') (an internal error) or took '٣' as
    index 3, reporting a distance the ranking never saw."""
    tracks = [[1.0, 2.0], [3.0, 4.0], [5, 6], [7, 8]]
    await client.call("learn", insight="dock near the charger", context={"spatial": {"tracks": tracks}})
    for field in ("spatial.tracks.²", "spatial.tracks.٣"):
        for query in ("dock charger", ""):
            found = await client.call("recall", query=query, spatial_sort={"field": field, "target": [0, 0]})
            assert "error" not in found, (field, found)
            assert [m["distance"] for m in found["memories"]] == [None], (field, query)
    found = await client.call(
        "recall", query="dock charger", spatial_sort={"field": "spatial.tracks.3", "target": [0, 0]}
    )
    assert [m["distance"] for m in found["memories"]] == [pytest.approx((7**2 + 8**2) ** 0.5)]


async def test_a_null_or_blank_collection_is_the_default_one(client: Client) -> None:
    """robotmem's tools take collection=null (its default) or blank as the default collection;
    ours refused both as invalid arguments."""
    made = await client.call("learn", insight="the hinge squeaks at 40 degrees", collection=None)
    assert made["collection"] == "default"
    assert (await client.call("learn", insight="the latch sticks at 12 N", collection="  "))["collection"] == "default"
    seen = await client.call("save_perception", description="latch photo", collection=None)
    assert seen["collection"] == "default"
    assert (await client.call("start_session", collection=""))["collection"] == "default"
    found = await client.call("recall", query="hinge squeaks", collection=None)
    assert [m["id"] for m in found["memories"]] == [made["memory_id"]]
    bad = await client.call("learn", insight="x", collection="my lab")
    assert bad["error"] == "invalid"
