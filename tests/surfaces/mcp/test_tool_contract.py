"""The tool contract as a reviewed diff: the 25 tool names, their input schemas and hints.

A change to any tool's arguments, limits or annotations fails this test until the snapshot is
regenerated — run ``UPDATE_SNAPSHOTS=1 pytest tests/test_tool_contract.py`` and review the diff
of ``tests/snapshots/tools.json`` like any other contract change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pydantic_core
import pytest
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.mcp.server import OUTPUT_SCHEMA_DIALECT, MemoryMCP, ResultMismatch, build_server
from robot_mcp_memory.surfaces.mcp.tools.results import Refusal

SNAPSHOT = Path(__file__).parent / "snapshots" / "tools.json"

#: DESIGN §4: the names and arguments that are fixed (optional arguments may be added).
CONTRACT: dict[str, list[str]] = {
    "find_processes": ["query", "k", "robot"],
    "get_process": ["id"],
    "save_process": ["markdown"],
    "record_outcome": ["id", "success", "note"],
    "delete_process": ["id"],
    "list_processes": ["limit", "offset", "robot"],
    "reindex": [],
    "register_robot": ["robot_id", "name", "group"],
    "set_robot_meta": ["robot_id", "name", "meta"],
    "list_robots": ["group"],
    "list_groups": [],
    "set_group": ["robot_id", "group"],
    "upsert_group": ["group_id", "name", "customer", "factory", "self_improve"],
    "delete_group": ["group_id"],
    "set_self_improve": ["enabled", "group"],
    "record_params": ["robot", "key", "params", "place", "success", "private"],
    "recall_params": ["robot", "key", "place"],
    "list_lessons": ["robot", "limit", "offset"],
    "learn": ["insight", "context", "collection", "session_id"],
    "recall": ["query", "n", "collection", "min_confidence", "session_id", "context_filter", "spatial_sort"],
    "save_perception": ["description", "perception_type", "data", "metadata", "collection", "session_id"],
    "forget": ["memory_id", "reason"],
    "update": ["memory_id", "new_content", "context"],
    "start_session": ["collection", "context"],
    "end_session": ["session_id", "outcome_score"],
}


async def _tools(server: MemoryMCP) -> dict[str, dict[str, Any]]:
    return {
        t.name: {
            "inputSchema": t.inputSchema,
            "annotations": t.annotations.model_dump(exclude_none=True) if t.annotations else {},
            "has_output_schema": t.outputSchema is not None,
        }
        for t in await server.list_tools()
    }


async def test_the_25_tools_of_the_contract_are_registered_with_their_arguments(server: MemoryMCP) -> None:
    tools = await _tools(server)
    assert sorted(tools) == sorted(CONTRACT)
    for name, args in CONTRACT.items():
        props = list(tools[name]["inputSchema"].get("properties", {}))
        assert props[: len(args)] == args, name
        assert tools[name]["has_output_schema"], name


async def test_every_tool_describes_itself_for_a_planner(server: MemoryMCP) -> None:
    for tool in await server.list_tools():
        assert len(tool.description or "") > 60, tool.name
        assert tool.annotations is not None, tool.name
        assert tool.annotations.readOnlyHint is not None, tool.name


async def test_tool_schemas_match_the_reviewed_snapshot(server: MemoryMCP) -> None:
    current = json.dumps(await _tools(server), indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(current)
    assert SNAPSHOT.exists(), "no snapshot: run UPDATE_SNAPSHOTS=1 pytest tests/test_tool_contract.py"
    assert SNAPSHOT.read_text() == current, (
        "the tool contract changed: review it, then run UPDATE_SNAPSHOTS=1 pytest tests/test_tool_contract.py"
    )


async def test_output_schemas_declare_draft_07_and_are_valid_draft_07(server: MemoryMCP) -> None:
    """Clients validate every result against these; see server.OUTPUT_SCHEMA_DIALECT for why
    the dialect is declared. The tool tests' stock client validates real results against them."""
    from jsonschema import Draft7Validator

    for tool in await server.list_tools():
        assert tool.outputSchema is not None, tool.name
        assert tool.outputSchema["$schema"] == OUTPUT_SCHEMA_DIALECT, tool.name
        Draft7Validator.check_schema(tool.outputSchema)


def _nullable_pairs(node: Any) -> list[Any]:
    if isinstance(node, list):
        return [p for v in node for p in _nullable_pairs(v)]
    if not isinstance(node, dict):
        return []
    found = [p for v in node.values() for p in _nullable_pairs(v)]
    branches = node.get("anyOf")
    if (
        isinstance(branches, list)
        and len(branches) == 2
        and {"type": "null"} in branches
        and all(set(b) == {"type"} for b in branches)
    ):
        found.append(node)
    return found


async def test_optional_output_fields_are_type_lists_which_clients_check_faster(server: MemoryMCP) -> None:
    """``{"type": ["number", "null"]}``, not pydantic's two-branch anyOf: the same constraint,
    and ~20 % less of a client's time checking each result (server.nullable_as_type_lists)."""
    lists = 0
    for tool in await server.list_tools():
        assert _nullable_pairs(tool.outputSchema) == [], tool.name
        lists += json.dumps(tool.outputSchema).count('"null"]')
    assert lists > 10


def _keywords(node: Any, found: list[tuple[str, Any]]) -> None:
    """Every (keyword, value) pair of every subschema in `node` (property names are not keywords)."""
    if isinstance(node, list):
        for v in node:
            _keywords(v, found)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        found.append((key, value))
        if key in ("properties", "$defs") and isinstance(value, dict):
            for sub in value.values():
                _keywords(sub, found)
        else:
            _keywords(value, found)


async def test_output_schemas_carry_no_keyword_that_checks_nothing(server: MemoryMCP) -> None:
    """No pydantic titles and no ``additionalProperties: true`` (server.lean_schema): a client
    checking every result walks them all. A property named title is still there."""
    titled = 0
    for tool in await server.list_tools():
        found: list[tuple[str, Any]] = []
        _keywords(tool.outputSchema, found)
        assert not [v for k, v in found if k == "title" and isinstance(v, str)], tool.name
        assert ("additionalProperties", True) not in found, tool.name
        titled += '"title": {' in json.dumps(tool.outputSchema)
    assert titled >= 2  # find_processes and list_processes return processes with a title


class Part(BaseModel):
    name: str
    weight: float | None = None


class Parts(BaseModel):
    parts: list[Part]
    note: str | None = None


PARTS = Parts(parts=[Part(name="gripper", weight=1.5), Part(name="mug")], note="ünïcode")


async def _parts() -> Parts | Refusal:
    """A tool returning a union, as every tool of ours does."""
    return PARTS


async def _bare() -> Parts:
    """A tool returning one model."""
    return PARTS


async def _wrong() -> Parts | Refusal:
    """A tool that returns what it does not declare."""
    return Part(name="not parts")  # type: ignore[return-value]  # the defect under test


async def test_results_are_converted_as_fastmcp_converts_them(memory: Memory) -> None:
    """A tool's pydantic result is dumped once into the `CallToolResult` (`structured_results`)
    instead of FastMCP's ``convert_result`` and a compact text block written after it: the
    structured content is FastMCP's own, wrapped as FastMCP wraps it, and the text is that value
    as compact JSON — for a union result and a bare model — and a result of the wrong type is
    still refused."""
    plain = FastMCP("plain")
    ours = build_server(memory)
    for fn in (_parts, _bare, _wrong):
        plain.add_tool(fn)
        ours.add_tool(fn)
    plain_tools = {t.name: t for t in await plain.list_tools()}
    for name in ("_parts", "_bare"):
        converted: Any = await plain.call_tool(name, {})  # FastMCP's own: (content, structured)
        content, structured = converted
        result = await ours.call_tool(name, {})
        assert isinstance(result, CallToolResult)
        assert result.structuredContent == structured, name
        value = structured.get("result", structured) if name == "_parts" else structured
        assert ("result" in structured) == (name == "_parts")
        [block] = result.content
        assert isinstance(block, TextContent)
        assert block.text == pydantic_core.to_json(value).decode()  # compact
        assert json.loads(block.text) == value
        [theirs] = content
        assert isinstance(theirs, TextContent)
        assert json.loads(theirs.text) == value  # FastMCP's text: the same value, indented
        assert not result.isError
        published = {t.name: t for t in await ours.list_tools()}[name]
        assert published.inputSchema["properties"] == plain_tools[name].inputSchema["properties"]
    with pytest.raises(ToolError) as raised:
        await ours.call_tool("_wrong", {})
    assert isinstance(raised.value.__cause__, ResultMismatch)


async def test_every_real_result_is_one_compact_text_block_of_its_structured_content(server: MemoryMCP) -> None:
    from tests.conftest import MAILROOM

    calls: list[tuple[str, dict[str, Any]]] = [
        ("save_process", {"markdown": MAILROOM}),
        ("find_processes", {"query": "mailroom parcel"}),
        ("list_processes", {}),
        ("register_robot", {"robot_id": "rap-1", "group": "line-a"}),
        ("list_robots", {}),
        ("record_params", {"robot": "rap-1", "key": "grip", "params": {"force": 12.5}, "success": True}),
        ("recall_params", {"robot": "rap-1", "key": "grip"}),
        ("learn", {"insight": "the wet mug slips at 12 N", "context": {"task": {"success": False}}}),
        ("learn", {"insight": "The wet mug slips at 12 N!", "context": {"task": {"success": False}}}),
        ("recall", {"query": "wet mug", "n": 3}),
        ("recall", {"query": "wet mug", "context_filter": {"task.success": {"$near": 1}}}),  # a refusal
        ("start_session", {"context": {"task": "sorting"}}),
        ("forget", {"memory_id": 999_999, "reason": "no such memory"}),
    ]
    for name, args in calls:
        result = await server.call_tool(name, args)
        assert isinstance(result, CallToolResult), name
        assert result.structuredContent is not None
        inner = result.structuredContent["result"]
        assert len(result.content) == 1
        block = result.content[0]
        assert isinstance(block, TextContent)
        assert block.text == pydantic_core.to_json(inner).decode(), name
        assert result.isError == isinstance(inner.get("error"), str), name


def test_a_definition_used_once_inside_another_is_written_where_it_is_used() -> None:
    """`server.inline_single_use`: only a definition free of references, used once, and only
    into another definition; annotations beside the reference stay, anything that checks
    (draft-07 ignores it beside ``$ref``) keeps the reference."""
    from robot_mcp_memory.surfaces.mcp.server import inline_single_use

    leaf = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    schema = {
        "$defs": {
            "Outer": {
                "properties": {"one": {"$ref": "#/$defs/Leaf", "description": "kept"}, "two": {"$ref": "#/$defs/Mid"}}
            },
            "Mid": {"properties": {"deep": {"$ref": "#/$defs/Deeper"}}},
            "Deeper": {"type": "string"},
            "Leaf": leaf,
            "Twice": {"type": "number"},
            "Self": {"properties": {"next": {"$ref": "#/$defs/Self"}}},
            "Top": {"type": "boolean"},
            "Checked": {"type": "null"},
        },
        "properties": {
            "a": {"$ref": "#/$defs/Outer"},
            "b": {"$ref": "#/$defs/Top"},
            "c": {"items": [{"$ref": "#/$defs/Twice"}, {"$ref": "#/$defs/Twice"}]},
            "d": {"$ref": "#/$defs/Self"},
            "e": {"properties": {"f": {"$ref": "#/$defs/Wrapper"}}},
        },
    }
    schema["$defs"]["Wrapper"] = {"properties": {"g": {"$ref": "#/$defs/Checked", "minimum": 3}}}
    out = inline_single_use(schema)
    outer = out["$defs"]["Outer"]["properties"]
    assert outer["one"] == {**leaf, "description": "kept"}
    assert outer["two"] == {"properties": {"deep": {"type": "string"}}}  # a chain, inlined from the bottom up
    assert sorted(out["$defs"]) == ["Checked", "Outer", "Self", "Top", "Twice", "Wrapper"]
    assert out["properties"] == schema["properties"]  # the top level is left as it was
    assert inline_single_use({"type": "object"}) == {"type": "object"}


async def test_inlined_output_schemas_decide_as_the_schemas_pydantic_wrote(server: MemoryMCP) -> None:
    """The recall and learn schemas with their inner definitions written in place accept and
    refuse exactly what the originals do, over real results and results broken on purpose."""
    import copy

    from jsonschema import Draft7Validator

    from robot_mcp_memory.surfaces.mcp.server import inline_single_use, lean_schema, nullable_as_type_lists

    await server.call_tool("learn", {"insight": "the wet mug slips at 12 N", "context": {"task": {"success": False}}})
    tools = {t.name: t for t in await server.list_tools()}
    recall = tools["recall"].outputSchema
    learn = tools["learn"].outputSchema
    assert recall is not None
    assert learn is not None
    assert "MemoryView" not in json.dumps(recall)  # a memory's schema is where the memories are
    assert "AutoInferred" not in json.dumps(learn)
    as_fastmcp_lists_them = {t.name: t for t in await FastMCP.list_tools(server)}
    for name, args in (("recall", {"query": "wet mug"}), ("learn", {"insight": "the dry mug holds at 8 N"})):
        raw = as_fastmcp_lists_them[name].outputSchema
        before = {"$schema": OUTPUT_SCHEMA_DIALECT, **lean_schema(nullable_as_type_lists(raw))}
        after = inline_single_use(before)
        assert after == tools[name].outputSchema
        result = await server.call_tool(name, args)
        good = result.structuredContent  # type: ignore[union-attr]
        assert good is not None
        broken: list[Any] = [good, {"result": {"error": "invalid", "detail": "x"}}, {"result": {}}, {}]
        inner = good["result"]
        wrong: tuple[Any, ...] = (None, "text", 1.5, [], {})
        for key in list(inner):
            for bad in wrong:
                variant = copy.deepcopy(good)
                variant["result"][key] = bad
                broken.append(variant)
        if name == "recall":
            assert inner["memories"]
            for key in list(inner["memories"][0]):
                for bad in (None, "text", 7, True, [1], {"k": 1}):
                    variant = copy.deepcopy(good)
                    variant["result"]["memories"][0][key] = bad
                    broken.append(variant)
                variant = copy.deepcopy(good)
                del variant["result"]["memories"][0][key]
                broken.append(variant)
        verdicts = [(Draft7Validator(before).is_valid(doc), Draft7Validator(after).is_valid(doc)) for doc in broken]
        assert all(a == b for a, b in verdicts), name
        assert {a for a, _ in verdicts} == {True, False}, name  # some pass, some fail: the test can tell


def _verdicts(schema: dict[str, Any], docs: list[Any]) -> list[Any]:
    """Each doc's validity against `schema`, or the error a reference that does not resolve raises."""
    from jsonschema import Draft7Validator

    out: list[Any] = []
    for doc in docs:
        try:
            out.append(Draft7Validator(schema).is_valid(doc))
        except Exception as exc:
            out.append(type(exc).__name__)
    return out


_D7 = "http://json-schema.org/draft-07/schema#"
_EDGE_CASES: dict[str, tuple[dict[str, Any], list[Any]]] = {
    "a reference into a definition": (
        {
            "$schema": _D7,
            "$defs": {
                "X": {"type": "object", "properties": {"y": {"type": "integer"}}},
                "A": {"properties": {"x": {"$ref": "#/$defs/X"}}},
            },
            "properties": {"a": {"$ref": "#/$defs/A"}, "y": {"$ref": "#/$defs/X/properties/y"}},
        },
        [{"y": 1}, {"y": "no"}, {"a": {"x": {"y": "no"}}}],
    ),
    "a property named $ref": (
        {
            "$schema": _D7,
            "$defs": {
                "Leaf": {"type": "object", "properties": {"x": {"type": "integer"}}},
                "Holder": {"properties": {"leaf": {"$ref": "#/$defs/Leaf"}}},
            },
            "properties": {"$ref": {"$ref": "#/$defs/Leaf"}, "holder": {"$ref": "#/$defs/Holder"}},
        },
        [{"$ref": {"x": 1}, "holder": {"leaf": {"x": 2}}}, {"$ref": {"x": "no"}, "holder": {"leaf": {"x": 2}}}],
    ),
    "names a pointer escapes": (
        {
            "$schema": _D7,
            "$defs": {
                "a/b": {"type": "integer"},
                "a~1b": {"type": "string"},
                "W": {"properties": {"v": {"$ref": "#/$defs/a~1b"}}},
            },
            "properties": {"w": {"$ref": "#/$defs/W"}, "s": {"$ref": "#/$defs/a~01b"}},
        },
        [{"w": {"v": 1}}, {"w": {"v": "s"}}],
    ),
    "reference-shaped data": (
        {
            "$schema": _D7,
            "$defs": {"X": {"type": "integer"}, "W": {"properties": {"v": {"const": {"$ref": "#/$defs/X"}}}}},
            "properties": {"w": {"$ref": "#/$defs/W"}},
        },
        [{"w": {"v": {"$ref": "#/$defs/X"}}}, {"w": {"v": 3}}],
    ),
}


@pytest.mark.parametrize("case", sorted(_EDGE_CASES))
def test_inlining_leaves_what_it_cannot_move_safely(case: str) -> None:
    """From a review: references are read where subschemas stand, never in data; a reference
    into a definition, or a name a JSON pointer escapes, keeps the schema as it was written."""
    from robot_mcp_memory.surfaces.mcp.server import inline_single_use

    schema, docs = _EDGE_CASES[case]
    assert _verdicts(inline_single_use(schema), docs) == _verdicts(schema, docs)
