"""Hostile arguments to the experience tools (found by review): each gets an ``invalid`` refusal
naming the problem, and nothing already stored is lost or made unreadable."""

from __future__ import annotations

import json
from typing import Any

import pytest

from robot_mcp_memory.jsonvalue import MAX_DEPTH
from tests.conftest import Client


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_a_deeply_nested_argument_is_refused_and_recall_keeps_working(client: Client) -> None:
    """A context nested 250 deep was stored, and then every recall reaching it failed to encode
    its answer (over stdio the server died, again after each restart)."""
    kept = await client.call("learn", insight="grip the mug by the handle")
    deep_text = json.dumps(nested(250))
    for tool, args in [
        ("learn", {"insight": "mug handle note", "context": deep_text}),
        ("learn", {"insight": "mug handle note", "context": nested(MAX_DEPTH + 1)}),
        ("update", {"memory_id": kept["memory_id"], "new_content": "mug note", "context": deep_text}),
        ("save_perception", {"description": "mug seen", "metadata": deep_text}),
        ("save_perception", {"description": "mug seen", "data": "[" * 250 + "]" * 250}),
        ("start_session", {"context": deep_text}),
        ("recall", {"query": "mug", "context_filter": deep_text}),
        ("learn", {"insight": "mug handle note", "context": "[" * 3000 + "]" * 3000}),  # past json's own limit
    ]:
        got = await client.call(tool, **args)
        assert got["error"] == "invalid", (tool, got)
        assert "deep" in got["detail"], got
        assert "Error executing" not in got["detail"]
    assert (await client.call("learn", insight="shallow enough", context=nested(MAX_DEPTH - 1)))["status"] == "created"
    found = await client.call("recall", query="mug", n=10)
    assert [m["content"] for m in found["memories"]] == ["grip the mug by the handle"]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("forget", {"memory_id": True, "reason": "meant something else"}),
        ("update", {"memory_id": True, "new_content": "overwritten"}),
        ("recall", {"query": "", "n": True}),
        ("recall", {"query": "", "min_confidence": True}),
        ("find_processes", {"query": "mug", "k": True}),
    ],
)
async def test_true_is_not_the_number_one(client: Client, tool: str, args: dict[str, Any]) -> None:
    """pydantic reads true as 1: ``forget(memory_id=true)`` forgot memory 1."""
    first = await client.call("learn", insight="memory one: grip the mug by the handle")
    got = await client.call(tool, **args)
    assert got["error"] == "invalid"
    assert "not true/false" in got["detail"]
    still = await client.call("recall", query="grip the mug")
    assert [m["id"] for m in still["memories"]] == [first["memory_id"]]
    assert still["memories"][0]["content"] == "memory one: grip the mug by the handle"


async def test_true_is_not_a_score(client: Client) -> None:
    s = await client.call("start_session")
    got = await client.call("end_session", session_id=s["session_id"], outcome_score=True)
    assert got["error"] == "invalid"
    assert (await client.call("end_session", session_id=s["session_id"], outcome_score=1.0))["status"] == "ended"


async def test_integers_beyond_64_bits_are_refused_or_compared_not_an_internal_error(client: Client) -> None:
    await client.call("learn", insight="huge counter value", context={"params": {"f": 2**70}})
    for tool, args in [
        ("forget", {"memory_id": 2**63, "reason": "x"}),
        ("update", {"memory_id": 2**64, "new_content": "x"}),
    ]:
        got = await client.call(tool, **args)
        assert got["error"] == "invalid", got
    for flt in ({"params.f": {"$gt": 10**20}}, {"params.f": 2**70}, {"params.f": {"$in": [2**70]}}):
        got = await client.call("recall", query="", context_filter=flt)
        assert "error" not in got, got
        assert [m["content"] for m in got["memories"]] == ["huge counter value"]


async def test_a_blank_context_keeps_the_old_one_on_update(client: Client) -> None:
    ctx = {"params": {"grip_force": 12.5}, "task": {"name": "grasp_mug", "success": True}}
    learned = await client.call("learn", insight="grip force 12.5 N held the mug", context=ctx)
    blanks: list[str | dict[str, Any]] = ["", "   ", {}]
    for blank in blanks:
        assert (
            await client.call(
                "update",
                memory_id=learned["memory_id"],
                new_content="grip force 12.5 N held the mug well",
                context=blank,
            )
        )["status"] == "updated"
        found = await client.call("recall", query="", context_filter={"task.success": True})
        assert [m["context"] for m in found["memories"]] == [ctx]


async def test_plain_text_context_that_starts_with_a_bracket_is_a_note(client: Client) -> None:
    learned = await client.call("learn", insight="wet mug run", context="[sim] wet mug run, gripper v2")
    assert learned["status"] == "created"
    found = await client.call("recall", query="wet mug run")
    assert found["memories"][0]["context"] == {"note": "[sim] wet mug run, gripper v2"}
    for not_an_object in ("[1, 2, 3]", '{"broken": '):
        assert (await client.call("learn", insight="another run", context=not_an_object))["error"] == "invalid"


async def test_a_malformed_spatial_field_is_refused_naming_spatial_sort(client: Client) -> None:
    await client.call("learn", insight="mug far away", context={"spatial": {"position": [9, 9, 9]}})
    for query in ("mug", ""):
        got = await client.call("recall", query=query, spatial_sort={"field": "spatial..position", "target": [0, 0, 0]})
        assert got["error"] == "invalid"
        assert got["detail"].startswith("spatial_sort.field")


async def test_integers_beyond_64_bits_in_any_tool_are_invalid(client: Client) -> None:
    got = await client.call("list_processes", offset=2**63)
    assert got["error"] == "invalid"
    assert "out of range" in got["detail"]


async def test_a_json_string_argument_with_a_number_of_thousands_of_digits_is_invalid(client: Client) -> None:
    got = await client.call("learn", insight="long number", context='{"p": {"n": ' + "9" * 5000 + "}}")
    assert got["error"] == "invalid", got
    assert "Error executing" not in got["detail"]


async def test_a_text_context_on_update_keeps_the_stored_one_and_an_object_replaces_it(client: Client) -> None:
    """robotmem's update(id, text, context="note") used the note to re-classify only; the tool
    replaced the whole context with {"note": …}, and filtered recalls lost the memory (D09)."""
    ctx = {"params": {"grip_force": 12}, "task": {"success": True}}
    mid = (await client.call("learn", insight="grip force 12 N held the wet mug", context=ctx))["memory_id"]
    note = "re-measured with the new sensor"
    await client.call("update", memory_id=mid, new_content="grip force 12.5 N held the wet mug", context=note)
    hits = (await client.call("recall", query="mug", context_filter={"task.success": True}))["memories"]
    assert [(m["id"], m["context"]) for m in hits] == [(mid, ctx)]
    await client.call("update", memory_id=mid, new_content="grip force 12.5 N held the mug", context={"note": note})
    assert (await client.call("recall", query="mug"))["memories"][0]["context"] == {"note": note}
