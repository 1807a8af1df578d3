"""Strict tool arguments (tools/arguments.py) through the in-memory MCP client: unknown names are
refused with the valid ones, booleans and numbers are not coerced, and every refusal is an
``isError: true`` result carrying the spec's ``{"error": …, "detail": …}`` body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.types import CallToolResult, TextContent

from robot_mcp_memory.surfaces.mcp.server import MemoryMCP
from robot_mcp_memory.surfaces.mcp.tools.arguments import ArgumentRules
from tests.conftest import MAILROOM, Client


def _body(result: CallToolResult) -> dict[str, Any]:
    block = result.content[0]
    assert isinstance(block, TextContent)
    data: dict[str, Any] = json.loads(block.text)
    return data


@pytest.mark.parametrize(
    ("tool", "args", "valid"),
    [
        ("find_processes", {"query": "parcel", "colour": "blue"}, ["query", "k", "robot"]),
        ("list_processes", {"robto": "g1-lab-01"}, ["limit", "offset", "robot"]),
        ("record_outcome", {"id": "fetch-package-mailroom", "success": True, "sucess": False}, ["id", "success"]),
        ("recall", {"query": "mug", "collection_name": "x"}, ["query", "n", "collection"]),
    ],
)
async def test_an_unknown_argument_name_is_refused_with_the_valid_names(
    client: Client, tool: str, args: dict[str, Any], valid: list[str]
) -> None:
    await client.call("save_process", markdown=MAILROOM)
    result = await client.session.call_tool(tool, args)
    body = _body(result)
    assert result.isError is True
    assert body["error"] == "invalid"
    unknown = next(k for k in args if k not in valid and k not in ("note", "query"))
    assert repr(unknown) in body["detail"]
    listed = body["detail"].rsplit(":", 1)[1]
    assert all(name in listed for name in valid), body
    got = await client.call("get_process", id="fetch-package-mailroom")
    assert "success_count: 3\n" in got["markdown"]  # the refused record_outcome counted nothing


@pytest.mark.parametrize("success", ["yes", "true", 1, 0, "false", [True], {"value": True}])
async def test_record_outcome_counts_only_a_json_boolean(client: Client, success: Any) -> None:
    await client.call("save_process", markdown=MAILROOM)
    result = await client.session.call_tool("record_outcome", {"id": "fetch-package-mailroom", "success": success})
    assert result.isError is True
    assert _body(result)["error"] == "invalid"
    got = await client.call("get_process", id="fetch-package-mailroom")
    assert "success_count: 3\n" in got["markdown"]
    assert "failure_count: 1\n" in got["markdown"]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("find_processes", {"query": "parcel", "k": "3"}),
        ("find_processes", {"query": "parcel", "k": 2.5}),
        ("list_processes", {"limit": "10"}),
        ("recall", {"query": "mug", "n": "5"}),
        ("recall", {"query": "mug", "min_confidence": "0.5"}),
        ("upsert_group", {"group_id": "lab", "self_improve": "on"}),
    ],
)
async def test_numbers_and_booleans_given_as_strings_are_refused(
    client: Client, tool: str, args: dict[str, Any]
) -> None:
    result = await client.session.call_tool(tool, args)
    assert result.isError is True
    assert _body(result)["error"] == "invalid"


async def test_a_whole_number_written_with_a_zero_fraction_is_an_integer(client: Client) -> None:
    """JSON has one number type: ``3.0`` is the integer 3, as JSON Schema counts it."""
    await client.call("save_process", markdown=MAILROOM)
    result = await client.session.call_tool("find_processes", {"query": "parcel", "k": 3.0})
    assert result.isError is False
    assert [p["id"] for p in _body(result)["processes"]] == ["fetch-package-mailroom"]


async def test_refusals_are_error_results_and_answers_are_not(client: Client) -> None:
    missing = await client.session.call_tool("get_process", {"id": "no-such-process"})
    assert missing.isError is True
    assert _body(missing)["error"] == "not_found"
    assert missing.structuredContent == {"result": _body(missing)}
    saved = await client.session.call_tool("save_process", {"markdown": MAILROOM})
    assert saved.isError is False
    assert "error" not in _body(saved)
    bad = await client.session.call_tool("save_process", {"markdown": "no frontmatter"})
    assert bad.isError is True
    assert _body(bad)["error"] == "invalid"


async def test_every_input_schema_says_unknown_arguments_are_refused(server: MemoryMCP) -> None:
    for tool in await server.list_tools():
        assert tool.inputSchema["additionalProperties"] is False, tool.name


def test_rules_read_the_scalar_types_from_the_schema() -> None:
    schema = {
        "properties": {
            "flag": {"type": "boolean"},
            "maybe": {"anyOf": [{"type": "boolean"}, {"type": "null"}], "default": None},
            "n": {"type": "integer"},
            "score": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "ctx": {"anyOf": [{"type": "object"}, {"type": "string"}]},
        }
    }
    rules = ArgumentRules.of("t", schema)
    assert rules.names == ("flag", "maybe", "n", "score", "ctx")
    assert set(rules.scalars) == {"flag", "maybe", "n", "score"}
    for ok in ({"flag": False}, {"maybe": None}, {"n": 7}, {"n": 7.0}, {"score": 1}, {"score": 0.5}, {"ctx": "{}"}):
        assert rules.problem(ok) is None, ok
    for bad in (
        {"flag": "no"},
        {"flag": None},
        {"maybe": 0},
        {"n": True},
        {"n": 2**63},
        {"n": 1e300},
        {"n": 0.5},
        {"score": "1"},
        {"score": False},
        {"other": 1},
    ):
        assert rules.problem(bad) is not None, bad
