"""Hostile input through the real MCP tool surface (in-memory client), for every tool.

Arguments are generated from each tool's own input schema — in range, out of range, wrong types,
hostile strings — so tools added later are fuzzed without touching this file. For every call:
the answer is one JSON object (or an MCP-level error for a malformed call), no refusal leaks an
internal detail, and documents stored before the fuzzing are unchanged.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import TextContent

from robot_mcp_memory.surfaces.mcp.server import MemoryMCP
from tests.conftest import MAILROOM, Client, doc

HOSTILE = [
    "",
    " ",
    '"',
    "'; DROP TABLE processes; --",
    "NEAR(a b)",
    "* OR -",
    "../../etc/passwd",
    "\x00",
    "\ud800",
    "🤖" * 50,
    "{",
    "[1,2",
    '{"$where": 1}',
    "null",
    "shared",
    "unknown",
    "a" * 5000,
    "<script>alert(1)</script>",
    "---\ntitle: x\n---\n",
    "去收发室取包裹",
]
LEAKS = re.compile(r"Traceback|sqlite|SELECT |INSERT |/tmp/|/work/|index\.db|File \"|\bline \d+, in\b", re.I)
SEEDS = ["seed-alpha", "seed-beta"]


def value_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    typ = schema.get("type")
    options: list[st.SearchStrategy[Any]] = [st.sampled_from(HOSTILE), st.none(), st.integers(-(2**40), 2**40)]
    if "anyOf" in schema:
        options += [value_for(s) for s in schema["anyOf"]]
        options.append(st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=4))
    if typ == "string":
        options += [st.text(max_size=schema.get("maxLength", 300) + 2)] * 3
    elif typ == "integer":
        lo, hi = schema.get("minimum", -1000), schema.get("maximum", 1000)
        options += [st.integers(lo - 2, hi + 2)] * 3
    elif typ == "number":
        options += [st.floats(allow_nan=True, allow_infinity=True)] * 2
    elif typ == "boolean":
        options += [st.booleans()] * 3
    elif typ == "object":
        options += [st.dictionaries(st.text(max_size=10), st.integers() | st.text(max_size=10), max_size=5)] * 2
    elif typ == "array":
        options += [st.lists(st.text(max_size=10), max_size=5)] * 2
    return st.one_of(options)


@st.composite
def calls(draw: st.DrawFn, tools: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(tools)))
    props: dict[str, Any] = tools[name].get("properties", {})
    args: dict[str, Any] = {}
    for key, schema in props.items():
        if draw(st.integers(0, 4)) > 0:  # sometimes leave an argument out, required or not
            args[key] = draw(value_for(schema))
    if draw(st.integers(0, 9)) == 0:
        args[draw(st.text(min_size=1, max_size=8))] = draw(st.sampled_from(HOSTILE))
    return name, args


def test_hostile_arguments_to_every_tool_never_leak_and_never_change_stored_documents(server: MemoryMCP) -> None:
    # Hypothesis drives synchronous tests; the MCP session lives on an event loop in a portal thread.
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(create_connected_server_and_client_session(server.lowlevel)) as session,
    ):
        client = Client(session)

        def call(tool: str, **args: Any) -> dict[str, Any]:
            return portal.call(functools.partial(client.call, tool, **args))

        call("save_process", markdown=doc(SEEDS[0], "Seed alpha", "## Steps\n1. alpha"))
        call("save_process", markdown=doc(SEEDS[1], "Seed beta", "## Steps\n1. beta"))
        call("save_process", markdown=MAILROOM)
        before = {pid: call("get_process", id=pid)["markdown"] for pid in SEEDS}
        tools = {t.name: t.inputSchema for t in portal.call(session.list_tools).tools}
        seen: list[tuple[str, str]] = []

        @settings(
            max_examples=25 * len(tools),
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(calls(tools))
        def one(call_: tuple[str, dict[str, Any]]) -> None:
            name, args = call_
            result = portal.call(session.call_tool, name, args)
            assert len(result.content) == 1, (name, args, result)
            block = result.content[0]
            assert isinstance(block, TextContent)
            if result.isError and result.structuredContent is None:
                # MCP-level refusal of a malformed call (e.g. an unknown tool): text, no internals.
                assert not LEAKS.search(block.text), (name, block.text)
                seen.append((name, "mcp_error"))
                return
            data = json.loads(block.text)
            assert isinstance(data, dict)
            refusal = "error" in data and isinstance(data.get("detail"), str) and set(data) <= {"error", "detail"}
            assert result.isError is refusal, (name, args, data)  # refusals, and only they, are errors
            if refusal:
                assert data["error"] in {"not_found", "forbidden", "invalid", "conflict", "busy", "storage"}, data
                assert not LEAKS.search(data["detail"]), (name, args, data)
            seen.append((name, str(data.get("error", "ok"))))

        one()
        for pid in SEEDS:
            got = call("get_process", id=pid)
            assert "error" not in got, f"seed document {pid} vanished: {got}"
            assert got["markdown"] == before[pid]
        assert len({name for name, _ in seen}) == len(tools)
