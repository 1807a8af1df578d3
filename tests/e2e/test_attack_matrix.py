"""The §6a tenancy table as an attack matrix against the real server, over SSE and Streamable HTTP.

Fleet: groups ``g-a`` (rap-1, rap-2) and ``g-b`` (rap-3); each robot has its own token, plus the
admin token, a wrong token and no token. Every row of the spec's §6a table is tried in both
directions (what a robot may do, and what it must not), for each transport. The test prints the
matrix size; a cell passes only when the answer is exactly what the policy says.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.conftest import Client, doc
from tests.e2e.harness import ServerProcess, http_session, initialize_request, robot_tokens, sse_session

pytestmark = pytest.mark.e2e

ADMIN = "admin-token-0123456789"
TOKENS = {"rap-1": "tok-rap-1-abcdefgh", "rap-2": "tok-rap-2-abcdefgh", "rap-3": "tok-rap-3-abcdefgh"}
ENV = {
    "MEMORY_TOKEN": ADMIN,
    "MEMORY_ROBOT_TOKENS": robot_tokens(TOKENS),
}
Session = Callable[..., AbstractAsyncContextManager[Client]]
TRANSPORTS: dict[str, Session] = {"sse": sse_session, "streamable-http": http_session}


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    proc = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env=ENV)
    await proc.start()
    try:
        async with http_session(proc, token=ADMIN) as admin:
            await admin.call("upsert_group", group_id="g-a", customer="acme")
            await admin.call("upsert_group", group_id="g-b", customer="globex")
            await admin.call("register_robot", robot_id="rap-1", group="g-a")
            await admin.call("register_robot", robot_id="rap-2", group="g-a")
            await admin.call("register_robot", robot_id="rap-3", group="g-b")
            await admin.call("set_self_improve", enabled=True)
            for owner in ("rap-1", "rap-2", "rap-3", "shared"):
                await admin.call(
                    "save_process", markdown=doc(f"doc-{owner}", f"Deliver the parcel {owner}", robot=owner)
                )
            await admin.call("record_params", robot="rap-1", key="grip", params={"force": 1})
            await admin.call("record_params", robot="rap-3", key="grip", params={"force": 3})
        yield proc
    finally:
        await proc.stop()


def ids(result: dict[str, Any], key: str = "processes", field: str = "id") -> set[str]:
    return {item[field] for item in result.get(key, [])}


def refused(code: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r.get("error") == code


def owners(result: dict[str, Any], key: str = "processes") -> set[str]:
    return {item["robot"] for item in result.get(key, [])}


def ok(r: dict[str, Any]) -> bool:
    return "error" not in r


@dataclass
class Cell:
    who: str
    what: str
    tool: str
    args: dict[str, Any]
    expect: Callable[[dict[str, Any]], bool]


def robot_cells(who: str, t: str) -> list[Cell]:
    """Every §6a row for one scoped robot, both directions."""
    mate = "rap-2" if who == "rap-1" else None
    foreign = "rap-3" if who == "rap-1" else "rap-1"
    visible = {f"doc-{who}", "doc-shared"} | ({f"doc-{mate}"} if mate else set())
    allowed = {who, "shared"} | ({mate} if mate else set())
    return [
        # find / get / list: own group + shared; the robot argument cannot widen it
        Cell(
            who,
            "find sees own group + shared",
            "find_processes",
            {"query": "deliver parcel", "k": 20},
            lambda r: visible <= ids(r) and owners(r) <= allowed,
        ),
        Cell(
            who,
            "find robot=<foreign> cannot escape",
            "find_processes",
            {"query": "deliver parcel", "k": 20, "robot": foreign},
            lambda r: visible <= ids(r) and owners(r) <= allowed,
        ),
        Cell(
            who,
            "list robot=<foreign> cannot escape",
            "list_processes",
            {"robot": foreign},
            lambda r: bool(ids(r)) and owners(r) <= allowed,
        ),
        Cell(who, "get own", "get_process", {"id": f"doc-{who}"}, ok),
        Cell(who, "get shared", "get_process", {"id": "doc-shared"}, ok),
        Cell(who, "get foreign reads as not_found", "get_process", {"id": f"doc-{foreign}"}, refused("not_found")),
        # save_process: pinned to the tenant
        Cell(
            who,
            "save robot:unknown is pinned to self",
            "save_process",
            {"markdown": doc(f"pin-{who}-{t}", "Pinned doc")},
            lambda r: r.get("robot") == who,
        ),
        Cell(
            who,
            "save for a foreign robot is forbidden",
            "save_process",
            {"markdown": doc(f"x-{who}-{t}", "Foreign", robot=foreign)},
            refused("forbidden"),
        ),
        Cell(
            who,
            "save a shared doc is forbidden",
            "save_process",
            {"markdown": doc(f"s-{who}-{t}", "Shared", robot="shared")},
            refused("forbidden"),
        ),
        Cell(
            who,
            "save over a foreign id forks, never overwrites",
            "save_process",
            {"markdown": doc(f"doc-{foreign}", "Hijack attempt")},
            lambda r: r.get("id", "").startswith(f"doc-{foreign}-") and r.get("robot") == who,
        ),
        Cell(
            who,
            "save over the shared doc's id forks, never overwrites it",
            "save_process",
            {"markdown": doc("doc-shared", "Hijack the fleet-wide doc")},
            lambda r: r.get("id", "").startswith("doc-shared-") and r.get("robot") == who,
        ),
        # record_outcome / delete_process: in scope only
        Cell(who, "record_outcome on shared", "record_outcome", {"id": "doc-shared", "success": True}, ok),
        Cell(
            who,
            "record_outcome on foreign is not_found",
            "record_outcome",
            {"id": f"doc-{foreign}", "success": False},
            refused("not_found"),
        ),
        Cell(who, "delete shared is forbidden", "delete_process", {"id": "doc-shared"}, refused("forbidden")),
        Cell(who, "delete foreign is not_found", "delete_process", {"id": f"doc-{foreign}"}, refused("not_found")),
        # register_robot / set_robot_meta: only itself
        Cell(who, "register itself", "register_robot", {"robot_id": who, "name": f"{who} {t}"}, ok),
        Cell(
            who,
            "register another robot is forbidden",
            "register_robot",
            {"robot_id": foreign},
            refused("forbidden"),
        ),
        Cell(
            who,
            "register itself into another group is forbidden",
            "register_robot",
            {"robot_id": who, "group": "g-b" if who == "rap-1" else "g-a"},
            refused("forbidden"),
        ),
        Cell(who, "set own meta", "set_robot_meta", {"robot_id": who, "meta": {"site": t}}, ok),
        Cell(
            who,
            "set foreign meta is forbidden",
            "set_robot_meta",
            {"robot_id": foreign, "meta": {"x": 1}},
            refused("forbidden"),
        ),
        # list_robots / list_groups: own group only
        Cell(
            who,
            "list_robots shows own group only",
            "list_robots",
            {},
            lambda r: ids(r, "robots", "robot_id") == {who} | ({mate} if mate else set()),
        ),
        Cell(
            who,
            "list_robots group=<foreign group> shows nothing foreign",
            "list_robots",
            {"group": "g-b" if who == "rap-1" else "g-a"},
            lambda r: foreign not in ids(r, "robots", "robot_id"),
        ),
        Cell(
            who,
            "list_groups shows own group only",
            "list_groups",
            {},
            lambda r: ids(r, "groups", "group_id") == {"g-a" if who == "rap-1" else "g-b"},
        ),
        # fleet administration and reindex: forbidden
        Cell(who, "set_group is forbidden", "set_group", {"robot_id": who, "group": ""}, refused("forbidden")),
        Cell(who, "upsert_group is forbidden", "upsert_group", {"group_id": "g-evil"}, refused("forbidden")),
        Cell(who, "delete_group is forbidden", "delete_group", {"group_id": "g-b"}, refused("forbidden")),
        Cell(who, "set_self_improve is forbidden", "set_self_improve", {"enabled": False}, refused("forbidden")),
        Cell(who, "reindex is forbidden", "reindex", {}, refused("forbidden")),
        # lessons: always the tenant's own robot, whatever `robot` says
        Cell(
            who,
            "recall_params robot=<foreign> acts as self",
            "recall_params",
            {"robot": foreign, "key": "grip"},
            lambda r: (
                r.get("robot") == who
                and [lesson["params"] for lesson in r["lessons"]] == [{"force": 1 if who == "rap-1" else 3}]
            ),
        ),
        Cell(
            who,
            "record_params robot=<foreign> records for self",
            "record_params",
            {"robot": foreign, "key": f"k-{t}", "params": {"v": 1}},
            lambda r: r.get("robot") == who and r.get("recorded") is True,
        ),
        Cell(
            who,
            "list_lessons shows only own scopes",
            "list_lessons",
            {},
            lambda r: (
                {lesson["scope"] for lesson in r["lessons"]}
                <= {"group:g-a" if who == "rap-1" else "group:g-b", f"robot:{who}", f"solo:{who}"}
            ),
        ),
    ]


def cells_for(transport: str) -> list[Cell]:
    """The whole matrix for one transport; `transport` keeps per-transport writes apart."""
    t = transport.replace("-", "")
    own_new = {"markdown": doc(f"new-{t}", "My own new process")}
    cells = robot_cells("rap-1", t) + robot_cells("rap-3", t)
    cells += [
        Cell("rap-1", "save then delete own doc", "save_process", own_new, ok),
        Cell("rap-1", "delete own doc", "delete_process", {"id": f"new-{t}"}, ok),
        # the admin token: everything
        Cell(
            "admin",
            "find sees every group",
            "find_processes",
            {"query": "deliver parcel", "k": 20},
            lambda r: {"doc-rap-1", "doc-rap-2", "doc-rap-3", "doc-shared"} <= ids(r),
        ),
        Cell(
            "admin",
            "list_robots sees the fleet",
            "list_robots",
            {},
            lambda r: {"rap-1", "rap-2", "rap-3"} <= ids(r, "robots", "robot_id"),
        ),
        Cell("admin", "upsert_group", "upsert_group", {"group_id": f"g-{t}"}, ok),
        Cell("admin", "set_self_improve on a group", "set_self_improve", {"enabled": True, "group": f"g-{t}"}, ok),
        Cell("admin", "delete_group", "delete_group", {"group_id": f"g-{t}"}, ok),
        Cell(
            "admin",
            "save for any robot",
            "save_process",
            {"markdown": doc(f"adm-{t}", "Admin doc", robot="rap-3")},
            lambda r: r.get("robot") == "rap-3",
        ),
        Cell("admin", "reindex", "reindex", {}, lambda r: r.get("indexed", 0) >= 4),
        Cell(
            "admin",
            "recall_params for a named robot",
            "recall_params",
            {"robot": "rap-3", "key": "grip"},
            lambda r: [lesson["params"] for lesson in r["lessons"]] == [{"force": 3}],
        ),
    ]
    return cells


async def run_matrix(server: ServerProcess, transport: str) -> tuple[int, list[str]]:
    session = TRANSPORTS[transport]
    failures: list[str] = []
    cells = cells_for(transport)
    tokens = {"admin": ADMIN, **TOKENS}
    for who, group in itertools.groupby(cells, key=lambda c: c.who):
        async with session(server, token=tokens[who]) as client:
            for cell in group:
                result = await client.call(cell.tool, **cell.args)
                if not cell.expect(result):
                    failures.append(f"[{transport}] {who}: {cell.what}: {json.dumps(result)[:300]}")
    return len(cells), failures


async def test_the_tenancy_table_holds_over_sse_and_streamable_http(fleet: ServerProcess) -> None:
    tried = 0
    failures: list[str] = []
    for transport in TRANSPORTS:
        n, failed = await run_matrix(fleet, transport)
        tried += n
        failures += failed
    # Wrong and missing tokens: refused before MCP starts, on both transports and the message path.
    async with httpx.AsyncClient(timeout=5) as http:
        for path, method in (("/sse", "GET"), ("/mcp", "POST"), ("/messages/?session_id=0", "POST")):
            for headers in ({}, {"Authorization": "Bearer wrong-token-123"}, {"Authorization": f"Basic {ADMIN}"}):
                tried += 1
                r = await http.request(method, fleet.url(path), headers=headers)
                if r.status_code != 401 or "Bearer" not in r.headers.get("www-authenticate", ""):
                    failures.append(f"{method} {path} with {list(headers)}: {r.status_code}")
    sys.stderr.write(f"\nattack matrix: {tried} cells tried, {tried - len(failures)} passed\n")
    assert not failures, "\n".join(failures)
    # Nothing the robots tried changed what they were not allowed to touch.
    async with http_session(fleet, token=ADMIN) as admin:
        groups = ids(await admin.call("list_groups"), "groups", "group_id")
        assert {"g-a", "g-b"} <= groups
        assert "g-evil" not in groups
        got = await admin.call("get_process", id="doc-rap-3")
        assert "Hijack" not in got["markdown"]
        shared = (await admin.call("get_process", id="doc-shared"))["markdown"]
        assert "Deliver the parcel shared" in shared
        assert "Hijack" not in shared
    # No token ever reaches a log line.
    logs = fleet.stderr()
    for secret in (ADMIN, *TOKENS.values()):
        assert secret not in logs


async def test_a_tenant_cannot_post_into_another_tenants_sse_session(fleet: ServerProcess) -> None:
    session_ids: list[str] = []
    from mcp.client.sse import sse_client

    async with sse_client(
        fleet.url("/sse"),
        headers={"Authorization": f"Bearer {TOKENS['rap-1']}"},
        on_session_created=session_ids.append,
    ) as (read, write):
        from mcp import ClientSession

        async with ClientSession(read, write) as session:
            await session.initialize()
            (sid,) = session_ids
            call = {
                "jsonrpc": "2.0",
                "id": 99,
                "method": "tools/call",
                "params": {"name": "find_processes", "arguments": {"query": "parcel"}},
            }
            async with httpx.AsyncClient(timeout=5) as http:
                for token in (TOKENS["rap-3"], ADMIN):
                    r = await http.post(
                        fleet.url(f"/messages/?session_id={sid}"),
                        json=call,
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    assert r.status_code in (403, 404), r.status_code
                r = await http.post(
                    fleet.url(f"/messages/?session_id={sid}"),
                    json=call,
                    headers={"Authorization": f"Bearer {TOKENS['rap-1']}"},
                )
                assert r.status_code == 202


async def test_a_tenant_cannot_post_into_another_tenants_streamable_http_session(fleet: ServerProcess) -> None:
    init = initialize_request("t")
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=5) as http:
        r = await http.post(
            fleet.url("/mcp"), json=init, headers={**accept, "Authorization": f"Bearer {TOKENS['rap-1']}"}
        )
        assert r.status_code == 200
        sid = r.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        r = await http.post(
            fleet.url("/mcp"),
            json=listing,
            headers={
                **accept,
                "Authorization": f"Bearer {TOKENS['rap-3']}",
                "mcp-session-id": sid,
                "mcp-protocol-version": "2025-06-18",
            },
        )
        assert r.status_code in (403, 404), r.status_code


async def test_ten_concurrent_tenants_never_see_each_others_data(fleet: ServerProcess) -> None:
    robots = ["rap-1", "rap-2", "rap-3"]
    leaks: list[str] = []

    async def tenant(n: int) -> None:
        robot = robots[n % 3]
        session = sse_session if n % 2 else http_session
        group = {"rap-1": {"rap-1", "rap-2"}, "rap-2": {"rap-1", "rap-2"}, "rap-3": {"rap-3"}}[robot]
        async with session(fleet, token=TOKENS[robot]) as client:
            for i in range(4):
                await client.call("save_process", markdown=doc(f"c{n}-{i}", f"Concurrent parcel job {n} {i}"))
                found = await client.call("find_processes", query="concurrent parcel job", k=50)
                for p in found["processes"]:
                    if p["robot"] not in group | {"shared"}:
                        leaks.append(f"{robot} saw {p['id']} of {p['robot']}")
                listed = await client.call("list_robots")
                for r in listed["robots"]:
                    if r["robot_id"] not in group:
                        leaks.append(f"{robot} listed {r['robot_id']}")

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for n in range(10):
                tg.start_soon(tenant, n)
    assert not leaks, leaks[:10]
