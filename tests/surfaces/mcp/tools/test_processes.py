"""The seven process tools through an in-memory MCP client (spec §7 "tools")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.types import TextContent

from robot_mcp_memory.app import Memory
from tests.conftest import MAILROOM, Client, doc


async def test_get_process_returns_the_identical_markdown_that_find_returns(client: Client) -> None:
    await client.call("save_process", markdown=MAILROOM)
    got = await client.call("get_process", id="fetch-package-mailroom")
    found = await client.call("find_processes", query="mailroom package")
    assert got["markdown"] == found["processes"][0]["markdown"]
    assert got["markdown"].startswith("---\nid: fetch-package-mailroom\n")
    assert "## Pitfalls & fixes" in got["markdown"]


async def test_find_result_has_the_documented_keys_and_mode(client: Client) -> None:
    await client.call("save_process", markdown=MAILROOM)
    found = await client.call("find_processes", query="parcel", k=5)
    assert set(found) >= {"processes", "mode"}
    hit = found["processes"][0]
    assert set(hit) >= {
        "id",
        "title",
        "score",
        "reliability",
        "success_count",
        "failure_count",
        "updated",
        "markdown",
    }
    assert hit["score"] > 0
    assert hit["reliability"] == round((3 + 1) / (3 + 1 + 2), 4)


async def test_saving_the_same_id_from_the_same_mission_updates_and_keeps_counters(client: Client) -> None:
    first = await client.call("save_process", markdown=MAILROOM)
    assert first["action"] == "created"
    await client.call("record_outcome", id="fetch-package-mailroom", success=True)
    edited = MAILROOM.replace("Visitor packages are on the lower shelf.", "Visitor packages: top shelf now.")
    second = await client.call("save_process", markdown=edited)
    assert second["action"] == "updated"
    assert second["id"] == "fetch-package-mailroom"
    assert second["success_count"] == 4  # 3 from the document, +1 recorded, kept across the update
    assert second["created"] == first["created"]
    got = await client.call("get_process", id="fetch-package-mailroom")
    assert "top shelf now" in got["markdown"]


async def test_saving_the_same_id_from_another_mission_forks_with_a_suffix(client: Client) -> None:
    await client.call("save_process", markdown=MAILROOM)
    other = MAILROOM.replace("m-9af31c", "m-000002")
    forked = await client.call("save_process", markdown=other)
    assert forked["action"] == "forked"
    assert forked["id"] == "fetch-package-mailroom-2"
    assert forked["requested_id"] == "fetch-package-mailroom"
    third = await client.call("save_process", markdown=MAILROOM.replace("m-9af31c", "m-000003"))
    assert third["id"] == "fetch-package-mailroom-3"
    again = await client.call("save_process", markdown=other)
    assert again["id"] == "fetch-package-mailroom-2"
    assert again["action"] == "updated"
    listed = await client.call("list_processes")
    assert listed["total"] == 3


async def test_record_outcome_with_a_note_appends_a_dated_outcome_log_line(client: Client) -> None:
    await client.call("save_process", markdown=MAILROOM)
    out = await client.call("record_outcome", id="fetch-package-mailroom", success=False, note="door  was\nlocked")
    assert out["failure_count"] == 2
    assert out["reliability"] == round(4 / 7, 4)
    md = (await client.call("get_process", id="fetch-package-mailroom"))["markdown"]
    log = md.split("## Outcome log\n", 1)[1]
    assert log.startswith("- 20")
    assert "failure: door was locked" in log


async def test_record_outcome_without_note_counts_through_the_hot_path(client: Client, memory: Memory) -> None:
    await client.call("save_process", markdown=MAILROOM)
    before = memory.index.stats.hot_done
    out = await client.call("record_outcome", id="fetch-package-mailroom", success=True)
    assert out["success_count"] == 4
    assert memory.index.stats.hot_done == before + 1


async def test_unknown_ids_read_as_not_found_everywhere(client: Client) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("get_process", {"id": "no-such-process"}),
        ("record_outcome", {"id": "no-such-process", "success": True}),
        ("delete_process", {"id": "no-such-process"}),
    ]
    for tool, args in cases:
        result = await client.call(tool, **args)
        assert result["error"] == "not_found", tool
        assert "no-such-process" in result["detail"]


async def test_delete_removes_the_document_and_its_index_entry(client: Client) -> None:
    await client.call("save_process", markdown=MAILROOM)
    assert (await client.call("delete_process", id="fetch-package-mailroom"))["deleted"] is True
    assert (await client.call("find_processes", query="mailroom parcel"))["processes"] == []
    assert (await client.call("get_process", id="fetch-package-mailroom"))["error"] == "not_found"


async def test_list_processes_pages_newest_first_without_bodies(client: Client) -> None:
    for i in range(5):
        await client.call("save_process", markdown=doc(f"task-{i}", f"Task number {i}", "## Steps\n1. go"))
    page = await client.call("list_processes", limit=2, offset=1)
    assert page["total"] == 5
    assert len(page["processes"]) == 2
    assert all("markdown" not in p and "body" not in p for p in page["processes"])


async def test_reindex_reports_how_many_documents_it_indexed(client: Client) -> None:
    await client.call("save_process", markdown=MAILROOM)
    await client.call("save_process", markdown=doc("open-door", "Open the lab door"))
    assert await client.call("reindex") == {"indexed": 2}
    found = await client.call("find_processes", query="lab door")
    assert found["processes"][0]["id"] == "open-door"


async def test_an_invalid_document_is_refused_with_what_and_where(client: Client) -> None:
    bad = "---\ntitle: [unclosed\n---\nbody"
    result = await client.call("save_process", markdown=bad)
    assert result["error"] == "invalid"
    assert "line" in result["detail"]
    result = await client.call("save_process", markdown=doc("Bad_Slug", "x"))
    assert result["error"] == "invalid"
    assert "id" in result["detail"]
    assert (await client.call("list_processes"))["total"] == 0


async def test_out_of_range_arguments_are_refused_as_invalid_not_as_a_traceback(client: Client) -> None:
    result = await client.call("find_processes", query="x", k=1000)
    assert result["error"] == "invalid"
    assert "k" in result["detail"]
    assert "Traceback" not in result["detail"]
    result = await client.call("list_processes", limit=0)
    assert result["error"] == "invalid"
    for tool, args in (("find_processes", {"query": "x", "k": 0}), ("get_process", {})):
        raw = await client.session.call_tool(tool, args)
        block = raw.content[0]
        assert isinstance(block, TextContent)
        assert "\n" not in block.text  # compact JSON, as every other result (it was indented)
        assert json.loads(block.text) == raw.structuredContent["result"]  # type: ignore[index]


async def test_hostile_queries_never_fail(client: Client) -> None:
    await client.call("save_process", markdown=MAILROOM)
    for q in ['"', "*", "(", "NEAR", "AND", "OR", "-", ":", 'mail" OR "x', "NEAR(a b)", "^", "", "   ", "🤖"]:
        result = await client.call("find_processes", query=q)
        assert "processes" in result, q


async def test_every_tool_is_async_and_the_server_is_named_memory(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import inspect

    from robot_mcp_memory.surfaces.mcp.server import MemoryMCP, build_server

    registered: dict[str, Any] = {}
    add_tool = MemoryMCP.add_tool

    def recording(self: MemoryMCP, fn: Any, name: str | None = None, *args: Any, **kwargs: Any) -> None:
        registered[name or fn.__name__] = fn
        add_tool(self, fn, name, *args, **kwargs)

    monkeypatch.setattr(MemoryMCP, "add_tool", recording)
    mcp = build_server(memory)
    assert mcp.name == "memory"
    tools = await mcp.list_tools()
    assert {t.name for t in tools} >= {
        "find_processes",
        "get_process",
        "save_process",
        "record_outcome",
        "delete_process",
        "list_processes",
        "reindex",
    }
    for t in tools:
        assert inspect.iscoroutinefunction(registered[t.name]), t.name
        assert t.outputSchema is not None, t.name


async def test_an_unexpected_error_is_answered_generically_without_internals(
    client: Client, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(*_a: object, **_k: object) -> None:
        raise RuntimeError("SELECT * FROM processes -- /srv/data/index.db token=hunter22")

    monkeypatch.setattr(memory.process_store, "find", boom)
    result = await client.call("find_processes", query="anything")
    assert result["error"] == "internal"
    for secret in ("SELECT", "/srv", "hunter22", "index.db"):
        assert secret not in result["detail"]
    assert "reference" in result["detail"]


async def test_results_carry_structured_content_equal_to_their_text(client: Client) -> None:
    await client.call("save_process", markdown=MAILROOM)
    for tool, args, refused in [("find_processes", {"query": "parcel"}, False), ("get_process", {"id": "nope"}, True)]:
        result = await client.session.call_tool(tool, args)
        assert result.isError is refused  # a refusal is an error result, with the same JSON body
        assert result.structuredContent is not None
        block = result.content[0]
        assert isinstance(block, TextContent)
        assert result.structuredContent["result"] == json.loads(block.text)
