"""What a write stores is what the caller gave (found by review): perception data decoded once and
reported as stored, any JSON value as data over MCP as in Python, and an update that leaves no
tag or scope of the old content behind."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.app import Memory
from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.model import MAX_DATA_BYTES, NewMemory, parse_data
from robot_mcp_memory.experiences.sqlite import storage
from robot_mcp_memory.experiences.sqlite.index_repo import rebuild_memory_index
from robot_mcp_memory.tenancy.principal import STDIO
from tests.conftest import Client
from tests.experiences.conftest import shown_id, stored_id


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[RobotMemory]:
    with RobotMemory(tmp_path / "data", robot_id="r1") as m:
        yield m


# ---------------------------------------------------------------------------- data decoded once
@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ('"reading ok"', "reading ok"),  # a JSON string is its text (it was refused)
        ('"12"', "12"),  # text stays text (it became the number 12)
        ('"null"', "null"),  # the text "null" is data (it was stored as no data)
        ('"{\\"f\\": 1}"', '{"f": 1}'),  # a JSON string holding JSON is that text, not an object
        ("12", 12),
        ("true", True),
        ('{"force": [1.5, 2]}', {"force": [1.5, 2]}),
        ("[1, 2]", [1, 2]),
        ("grasp ok, slight slip", "grasp ok, slight slip"),  # not JSON: kept as text, as documented
        ("NaN values on channel 3", "NaN values on channel 3"),  # text, though it starts like NaN
        (12, 12),
        (12.5, 12.5),
        (False, False),
        ({"f": "12"}, {"f": "12"}),
    ],
)
def test_data_is_decoded_once_and_stored_as_given(mem: RobotMemory, given: Any, stored: Any) -> None:
    r = mem.save_perception("tactile reading", "tactile", data=given)
    assert r["has_data"] is True
    got = mem.get(r["memory_id"])
    assert got["data"] == stored
    assert type(got["data"]) is type(stored)


@pytest.mark.parametrize("given", [None, "null", " null "])
def test_data_that_decodes_to_null_is_no_data_and_says_so(mem: RobotMemory, given: Any) -> None:
    r = mem.save_perception("camera frame, nothing seen", data=given)
    assert r["has_data"] is False
    assert mem.get(r["memory_id"])["data"] is None
    assert mem.recall("camera")[0]["has_data"] is False


@pytest.mark.parametrize("given", ['{"f": NaN}', "[1, Infinity]", "NaN", "-Infinity", {"f": math.nan}, math.inf])
def test_nan_and_infinity_in_data_are_refused_like_in_context(mem: RobotMemory, given: Any) -> None:
    """'{"f": NaN}' was stored as a plain string while context refused it."""
    with pytest.raises(InvalidInput, match="NaN"):
        mem.save_perception("force reading", "tactile", data=given)
    with pytest.raises(InvalidInput):
        mem.learn("force reading", context='{"f": NaN}')
    assert mem.recall("", n=10) == []


def test_a_decoded_string_is_bounded_and_checked_as_text() -> None:
    assert parse_data(json.dumps("x" * 1000)) == "x" * 1000
    with pytest.raises(InvalidInput, match="larger than"):
        parse_data(json.dumps("x" * (MAX_DATA_BYTES + 1)))
    with pytest.raises(InvalidInput, match="lone surrogate"):
        parse_data('"\\ud800"')


async def test_data_over_mcp_is_decoded_once_and_has_data_follows_what_was_stored(client: Client) -> None:
    cases: list[tuple[Any, Any]] = [
        ('"hello"', "hello"),  # was refused
        ('"12"', "12"),
        ('"null"', "null"),  # was has_data true with nothing stored
        ("null", None),  # was has_data true
        ("12", 12),
        ("plain caption", "plain caption"),
        ('{"bbox": [1, 2]}', {"bbox": [1, 2]}),
        ({"bbox": [1, 2]}, {"bbox": [1, 2]}),
    ]
    for given, stored in cases:
        r = await client.call("save_perception", description=f"seen {given!r}", data=given)
        assert "error" not in r, (given, r)
        assert r["has_data"] is (stored is not None), (given, r)
        found = (await client.call("recall", query="", n=1, include_data=True))["memories"][0]
        assert found["id"] == r["memory_id"]
        assert (found["data"], found["has_data"]) == (stored, stored is not None), given
    refused = await client.call("save_perception", description="force", data='{"f": NaN}')
    assert refused["error"] == "invalid"
    assert "NaN" in refused["detail"]


# ---------------------------------------------------------------------------- any JSON value over MCP
async def test_scalar_data_is_taken_over_mcp_as_by_the_python_api(client: Client) -> None:
    """data=12 or data=true was refused over MCP (the tool typed it object, array or string)."""
    for value in (12, 12.5, True, False, 0, -3):
        r = await client.call("save_perception", description=f"gauge reads {value}", data=value)
        assert r.get("has_data") is True, (value, r)
        found = (await client.call("recall", query="", n=1, include_data=True))["memories"][0]
        assert found["data"] == value
        assert type(found["data"]) is type(value)


async def test_the_data_schema_offers_every_json_type(client: Client) -> None:
    tools = {t.name: t for t in (await client.session.list_tools()).tools}
    data = tools["save_perception"].inputSchema["properties"]["data"]
    types = {branch["type"] for branch in data["anyOf"]}
    assert types == {"object", "array", "string", "integer", "number", "boolean", "null"}
    assert data["default"] is None
    meta = tools["save_perception"].inputSchema["properties"]["metadata"]
    assert {branch["type"] for branch in meta["anyOf"]} == {"object", "string", "null"}  # unchanged


# ---------------------------------------------------------------------------- update replaces tags and scope
def test_update_with_a_new_context_replaces_user_tags_and_scope(mem: RobotMemory) -> None:
    r = mem.learn("set grip_force=12 in GraspPlanner for mugs", context={"tags": ["mug"]})
    mem.update(r["memory_id"], "set approach_speed=0.2 in MotionPlanner for bottles", context={"tags": ["bottle"]})
    hit = mem.recall("approach speed bottles")[0]
    assert hit["id"] == r["memory_id"]
    assert "mug" not in hit["tags"]
    assert "bottle" in hit["tags"]
    assert hit["scope_entities"] == ["approach_speed", "MotionPlanner"]
    assert mem.recall("mug") == []
    assert [m["id"] for m in mem.recall("bottle")] == [r["memory_id"]]  # the new user tag is searchable
    assert mem.get(r["memory_id"])["context"] == {"tags": ["bottle"]}


@pytest.mark.parametrize("context", ["", "re-measured on the new rig", None, {}])
def test_update_keeping_the_context_keeps_user_tags_and_recomputes_scope(mem: RobotMemory, context: Any) -> None:
    r = mem.learn("set grip_force=12 in GraspPlanner for mugs", context={"tags": ["kitchen"]})
    mem.update(r["memory_id"], "set approach_speed=0.2 in src/motion.py", context=context)
    hit = mem.recall("kitchen")[0]  # the kept user tag is still shown and searchable
    assert hit["id"] == r["memory_id"]
    assert "kitchen" in hit["tags"]
    assert hit["scope_entities"] == ["approach_speed"]
    assert hit["scope_files"] == ["src/motion.py"]
    assert mem.recall("GraspPlanner") == []


def test_update_to_text_without_identifiers_leaves_no_scope(mem: RobotMemory) -> None:
    r = mem.learn("set grip_force=12 in GraspPlanner for mugs")
    mem.update(r["memory_id"], "hold mugs gently", context={"task": {"name": "mugs"}})
    hit = mem.recall("mugs")[0]
    assert (hit["scope_entities"], hit["scope_files"]) == ([], [])


async def test_update_of_a_perception_replaces_its_tags_and_scope_like_save_perception(memory: Memory) -> None:
    svc = memory.experiences
    p = await svc.save_perception(STDIO, "grip_force spike at the mug", "tactile", {"n": 3}, {"tags": ["mug"]})
    up = await svc.update(STDIO, p.memory_id, "approach_speed drop near the bottle", {"tags": ["bottle"]})
    again = await svc.save_perception(
        STDIO, "approach_speed drop near the bottle", "tactile", {"n": 3}, {"tags": ["bottle"]}
    )
    fresh = await svc.get(STDIO, again.memory_id)
    assert sorted(up.memory.tags) == sorted(fresh.tags)
    assert up.memory.metadata == fresh.metadata == {"scope": {"entities": ["approach_speed"], "files": []}}
    assert up.memory.data == {"n": 3}


async def test_update_keeps_an_imports_provenance_and_its_user_tags_unless_the_context_is_replaced(
    memory: Memory,
) -> None:
    """A robotmem import holds user tags its context does not list, ``import`` tags and
    ``metadata.imported_from``: a kept context keeps the user tags, a replaced one replaces them;
    the import's tags and provenance stay either way."""
    svc = memory.experiences
    marker = {"source": "robotmem", "id": 7, "created_at": "2025-01-01"}
    new = NewMemory(
        robot="tester",
        collection="default",
        type="fact",
        content="set grip_force=12 in GraspPlanner for mugs",
        category="observation",
        confidence=0.8,
        context={"task": {"name": "grasp"}},
        content_hash="h",
        source_weight=1.0,
        metadata={"scope": {"entities": ["grip_force", "GraspPlanner"], "files": []}, "imported_from": marker},
        tags=(("kitchen_safety", "user"), ("legacy", "import")),
    )
    stored = memory.index.write_blocking(lambda c: storage.insert_memory(c, new, 1.0))
    mid = shown_id(memory, stored)

    up = await svc.update(STDIO, mid, "set approach_speed=0.2 for mugs", "checked again")
    assert {"kitchen_safety", "legacy"} <= set(up.memory.tags)
    assert up.memory.metadata == {"scope": {"entities": ["approach_speed"], "files": []}, "imported_from": marker}
    assert [h.memory.id for h in (await svc.recall(STDIO, "kitchen_safety")).hits] == [mid]

    up = await svc.update(STDIO, mid, "hold mugs gently", {"tags": ["bottle"]})
    assert "kitchen_safety" not in up.memory.tags
    assert {"bottle", "legacy"} <= set(up.memory.tags)
    assert up.memory.metadata == {"imported_from": marker}
    assert (await svc.recall(STDIO, "kitchen_safety")).hits == []


async def test_the_index_after_an_update_is_what_a_rebuild_makes(memory: Memory) -> None:
    svc = memory.experiences
    a = await svc.learn(STDIO, "set grip_force=12 for mugs", {"tags": ["mug", "kitchen"]})
    await svc.update(STDIO, a.memory_id, "set approach_speed=0.2 for bottles", {"tags": ["bottle"], "site": "lab"})
    b = await svc.learn(STDIO, "the door sticks", {"tags": ["door"]})
    await svc.update(STDIO, b.memory_id, "the door sticks when wet", "noted")

    def fts(c: Any) -> dict[int, list[str]]:
        rows = c.execute("SELECT rowid, context FROM memories_fts ORDER BY rowid")
        return {r[0]: sorted(r[1].split()) for r in rows}

    written = memory.index.read_blocking(fts)
    assert set(written[stored_id(memory, a.memory_id)]) == {"bottle", "lab"}  # nothing of the replaced context's tags
    assert set(written[stored_id(memory, b.memory_id)]) == {"door"}
    memory.index.write_blocking(rebuild_memory_index)
    assert memory.index.read_blocking(fts) == written


async def test_update_over_mcp_leaves_no_stale_tag(client: Client) -> None:
    r = await client.call("learn", insight="set grip_force=12 in GraspPlanner for mugs", context={"tags": ["mug"]})
    up = await client.call(
        "update",
        memory_id=r["memory_id"],
        new_content="set approach_speed=0.2 in MotionPlanner for bottles",
        context=json.dumps({"tags": ["bottle"]}),
    )
    assert "mug" not in up["auto_inferred"]["tags"]
    assert "bottle" in up["auto_inferred"]["tags"]
    assert (await client.call("recall", query="mug"))["memories"] == []
