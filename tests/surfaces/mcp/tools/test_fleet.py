"""The 8 fleet tools and 3 lesson tools through the in-memory MCP client: shapes, refusals, hints."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.mcp.tools import fleet, lessons
from robot_mcp_memory.tenancy.principal import Principal
from tests.conftest import Client

FLEET_TOOLS = {
    "register_robot",
    "set_robot_meta",
    "list_robots",
    "list_groups",
    "set_group",
    "upsert_group",
    "delete_group",
    "set_self_improve",
}
LESSON_TOOLS = {"record_params", "recall_params", "list_lessons"}


async def _fleet(client: Client) -> None:
    """line-a = {rap-1, rap-2}; rap-3 ungrouped; self-improvement on globally."""
    await client.call("upsert_group", group_id="line-a", name="Line A", customer="acme", factory="lyon")
    await client.call("register_robot", robot_id="rap-1", name="Rap one", group="line-a")
    await client.call("register_robot", robot_id="rap-2", group="line-a")
    await client.call("register_robot", robot_id="rap-3")
    await client.call("set_self_improve", enabled=True)


@pytest.fixture
async def as_rap1(memory: Memory) -> AsyncIterator[Client]:
    """A client whose every call carries rap-1's robot token (the principal, fixed)."""
    mcp = FastMCP("memory")
    fleet.register(mcp, memory, lambda _ctx: Principal.robot("rap-1"))
    lessons.register(mcp, memory, lambda _ctx: Principal.robot("rap-1"))
    async with create_connected_server_and_client_session(mcp) as session:
        yield Client(session)


# ---------------------------------------------------------------------------- the surface
async def test_the_eleven_tools_are_registered_with_schemas_limits_and_honest_hints(client: Client) -> None:
    tools = {t.name: t for t in (await client.session.list_tools()).tools}
    assert set(tools) >= FLEET_TOOLS | LESSON_TOOLS
    for name in FLEET_TOOLS | LESSON_TOOLS:
        t = tools[name]
        assert t.description is not None, name
        assert len(t.description) > 60, name
        assert t.outputSchema is not None, name
        assert t.annotations is not None, name
    for name in ("list_robots", "list_groups", "recall_params", "list_lessons"):
        assert tools[name].annotations.readOnlyHint is True, name  # type: ignore[union-attr]
    assert tools["delete_group"].annotations.destructiveHint is True  # type: ignore[union-attr]
    assert tools["record_params"].annotations.idempotentHint is not True  # type: ignore[union-attr]
    props = tools["list_lessons"].inputSchema["properties"]
    assert (props["limit"]["minimum"], props["limit"]["maximum"]) == (1, 500)
    assert tools["register_robot"].inputSchema["properties"]["robot_id"]["maxLength"] == 64
    assert tools["register_robot"].inputSchema["required"] == ["robot_id"]
    assert set(tools["record_params"].inputSchema["required"]) == {"robot", "key", "params"}


# ---------------------------------------------------------------------------- fleet shapes
async def test_an_operator_builds_a_fleet_and_sees_it_in_the_spec_shapes(client: Client) -> None:
    created = await client.call("upsert_group", group_id="line-a", name="Line A", customer="acme", factory="lyon")
    assert created["action"] == "created"
    assert created["self_improve"] is None
    reg = await client.call("register_robot", robot_id="rap-1", name="Rap one", group="line-a")
    assert (reg["action"], reg["group"], reg["self_improve"]) == ("created", "line-a", False)
    await client.call("register_robot", robot_id="rap-2")
    robots = await client.call("list_robots")
    assert [(r["robot_id"], r["name"], r["group"]) for r in robots["robots"]] == [
        ("rap-1", "Rap one", "line-a"),
        ("rap-2", "", None),
    ]
    assert robots["total"] == 2
    assert [r["robot_id"] for r in (await client.call("list_robots", group="line-a"))["robots"]] == ["rap-1"]
    groups = await client.call("list_groups")
    [g] = groups["groups"]
    assert {k: g[k] for k in ("group_id", "name", "customer", "factory", "self_improve", "robots")} == {
        "group_id": "line-a",
        "name": "Line A",
        "customer": "acme",
        "factory": "lyon",
        "self_improve": None,
        "robots": ["rap-1"],
    }
    assert groups["global_self_improve"] is False


async def test_set_group_moves_ungroups_and_refuses_an_unknown_group_with_a_hint(client: Client) -> None:
    await _fleet(client)
    moved = await client.call("set_group", robot_id="rap-3", group="line-a")
    assert (moved["group"], moved["previous_group"]) == ("line-a", None)
    out = await client.call("set_group", robot_id="rap-3", group="")
    assert (out["group"], out["previous_group"]) == (None, "line-a")
    missing = await client.call("set_group", robot_id="rap-3", group="line-z")
    assert missing["error"] == "not_found"
    assert "upsert_group" in missing["detail"]
    assert (await client.call("list_groups"))["groups"][0]["group_id"] == "line-a"
    assert len((await client.call("list_groups"))["groups"]) == 1, "no accidental group"


async def test_meta_accepts_an_object_or_a_json_string(client: Client) -> None:
    await client.call("register_robot", robot_id="rap-1")
    await client.call("set_robot_meta", robot_id="rap-1", meta={"model": "r1"})
    got = await client.call("set_robot_meta", robot_id="rap-1", meta='{"site": "lyon"}', name="Rap")
    assert (got["meta"], got["name"]) == ({"model": "r1", "site": "lyon"}, "Rap")


async def test_switches_report_the_group_and_the_global_toggle(client: Client) -> None:
    await _fleet(client)
    state = await client.call("set_self_improve", enabled=False, group="line-a")
    assert state["global_self_improve"] is True
    assert (state["group"]["self_improve"], state["group"]["effective_self_improve"]) == (False, False)
    robots = {r["robot_id"]: r["self_improve"] for r in (await client.call("list_robots"))["robots"]}
    assert robots == {"rap-1": False, "rap-2": False, "rap-3": True}
    back = await client.call("set_self_improve", enabled=None, group="line-a")
    assert (back["group"]["self_improve"], back["group"]["effective_self_improve"]) == (None, True)
    glob = await client.call("set_self_improve", enabled=False)
    assert (glob["group"], glob["global_self_improve"]) == (None, False)


async def test_delete_group_ungroups_its_robots_and_keeps_its_lessons(client: Client) -> None:
    await _fleet(client)
    await client.call("record_params", robot="rap-1", key="grasp/mug", params={"force": 0.3}, success=True)
    deleted = await client.call("delete_group", group_id="line-a")
    assert deleted == {
        "group_id": "line-a",
        "deleted": True,
        "ungrouped_robots": ["rap-1", "rap-2"],
        "lessons_kept": True,
    }
    listed = await client.call("list_lessons")
    assert [(x["scope"], x["orphaned"]) for x in listed["lessons"]] == [("group:line-a", True)]
    assert (await client.call("delete_group", group_id="line-a"))["error"] == "not_found"


# ---------------------------------------------------------------------------- lesson shapes
async def test_lessons_are_recorded_shared_and_recalled_in_the_spec_shape(client: Client) -> None:
    await _fleet(client)
    rec = await client.call(
        "record_params", robot="rap-1", key="grasp/mug", params='{"force": 0.3}', place="table-a", success=True
    )
    assert (rec["recorded"], rec["reason"], rec["scope"]) == (True, "created", "group:line-a")
    [lesson] = rec["lessons"]
    assert {k: lesson[k] for k in ("scope", "key", "params", "success_count", "failure_count", "place")} == {
        "scope": "group:line-a",
        "key": "grasp/mug",
        "params": {"force": 0.3},
        "success_count": 1,
        "failure_count": 0,
        "place": "table-a",
    }
    got = await client.call("recall_params", robot="rap-2", key="grasp/mug", place="table-a")
    assert (got["self_improve"], [x["params"] for x in got["lessons"]]) == (True, [{"force": 0.3}])
    assert got["lessons"][0]["transferred"] is False
    assert (await client.call("recall_params", robot="rap-2", key="grasp/mug", place="table-b"))["lessons"] == []
    for _ in range(2):
        await client.call(
            "record_params", robot="rap-2", key="grasp/mug", params={"force": 0.3}, place="table-a", success=True
        )
    far = await client.call("recall_params", robot="rap-1", key="grasp/mug", place="table-b")
    [offered] = far["lessons"]
    assert (offered["transferred"], offered["from_place"], offered["place"]) == (True, "table-a", "table-a")
    assert (await client.call("recall_params", robot="rap-3", key="grasp/mug", place="table-a"))["lessons"] == []


async def test_with_self_improvement_off_record_says_why_and_recall_is_empty(client: Client) -> None:
    await _fleet(client)
    await client.call("set_self_improve", enabled=False, group="line-a")
    rec = await client.call("record_params", robot="rap-1", key="k", params={"a": 1})
    assert (rec["recorded"], rec["reason"], rec["lessons"]) == (False, "self_improve_off", [])
    assert "set_self_improve" in rec["detail"]
    got = await client.call("recall_params", robot="rap-1", key="k")
    assert (got["self_improve"], got["lessons"]) == (False, [])


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("register_robot", {"robot_id": "bad id!"}, "invalid"),
        ("register_robot", {"robot_id": "shared"}, "invalid"),
        ("register_robot", {"robot_id": "RAP-1"}, "conflict"),
        ("register_robot", {"robot_id": "rap-9", "group": "nowhere"}, "not_found"),
        ("upsert_group", {"group_id": "-x"}, "invalid"),
        ("upsert_group", {"group_id": "x" * 65}, "invalid"),
        ("set_group", {"robot_id": "ghost", "group": "line-a"}, "not_found"),
        ("set_group", {"robot_id": "rap-1", "group": "bad/group"}, "invalid"),
        ("set_robot_meta", {"robot_id": "ghost", "name": "x"}, "not_found"),
        ("set_robot_meta", {"robot_id": "rap-1", "meta": "{not json"}, "invalid"),
        ("set_robot_meta", {"robot_id": "rap-1", "meta": "[1, 2]"}, "invalid"),
        ("list_robots", {"group": "nowhere"}, "not_found"),
        ("delete_group", {"group_id": "nowhere"}, "not_found"),
        ("set_self_improve", {"enabled": None}, "invalid"),
        ("set_self_improve", {"enabled": True, "group": "nowhere"}, "not_found"),
        ("record_params", {"robot": "ghost", "key": "k", "params": {}}, "not_found"),
        ("record_params", {"robot": "", "key": "k", "params": {}}, "invalid"),
        ("record_params", {"robot": "rap-1", "key": "k", "params": "{broken"}, "invalid"),
        ("record_params", {"robot": "rap-1", "key": "k", "params": "[1]"}, "invalid"),
        ("record_params", {"robot": "rap-1", "key": "k", "params": 42}, "invalid"),
        ("record_params", {"robot": "rap-1", "key": "", "params": {}}, "invalid"),
        ("recall_params", {"robot": "ghost", "key": "k"}, "not_found"),
        ("list_lessons", {"robot": "ghost"}, "not_found"),
        ("list_lessons", {"limit": 0}, "invalid"),
    ],
)
async def test_bad_ids_unknown_robots_and_groups_and_malformed_params_get_a_clear_error(
    client: Client, tool: str, args: dict[str, Any], code: str
) -> None:
    await _fleet(client)
    got = await client.call(tool, **args)
    assert got.get("error") == code, got
    assert isinstance(got["detail"], str)
    assert got["detail"]


# ---------------------------------------------------------------------------- a robot token
async def test_a_robot_token_is_refused_fleet_administration(client: Client, as_rap1: Client) -> None:
    await _fleet(client)
    for tool, args in (
        ("set_group", {"robot_id": "rap-1", "group": ""}),
        ("upsert_group", {"group_id": "line-b"}),
        ("delete_group", {"group_id": "line-a"}),
        ("set_self_improve", {"enabled": False}),
        ("register_robot", {"robot_id": "rap-3"}),
        ("set_robot_meta", {"robot_id": "rap-2", "name": "x"}),
    ):
        got = await as_rap1.call(tool, **args)
        assert got.get("error") == "forbidden", (tool, got)
    assert (await as_rap1.call("register_robot", robot_id="rap-1", name="me"))["name"] == "me"


async def test_a_robot_token_sees_its_group_and_its_lessons_only(client: Client, as_rap1: Client) -> None:
    await _fleet(client)
    await client.call("record_params", robot="rap-3", key="k", params={"solo": True})
    assert [r["robot_id"] for r in (await as_rap1.call("list_robots"))["robots"]] == ["rap-1", "rap-2"]
    assert [g["group_id"] for g in (await as_rap1.call("list_groups"))["groups"]] == ["line-a"]
    rec = await as_rap1.call("record_params", robot="rap-3", key="k", params={"mine": True})
    assert (rec["robot"], rec["scope"]) == ("rap-1", "group:line-a")
    got = await as_rap1.call("recall_params", robot="rap-3", key="k")
    assert [x["params"] for x in got["lessons"]] == [{"mine": True}]
    assert {x["scope"] for x in (await as_rap1.call("list_lessons"))["lessons"]} == {"group:line-a"}
