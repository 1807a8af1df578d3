"""Issue 27 items 1 and 5 against real server processes: with ``MEMORY_DATABASE_URL`` naming the
test cluster, a robot saves a process, finds it, learns and recalls a memory and records an
outcome over stateless Streamable HTTP (the official MCP client); a second server process on
the same database, on another port, sees all of it — and each request still answers as the
principal its own bearer token names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.conftest import doc
from tests.e2e.harness import ServerProcess, http_session, initialize_request, json_lines, robot_tokens
from tests.pgcluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ADMIN = "admin-token-0123456789"
TOKENS = {"rap-1": "tok-rap-1-abcdefgh", "rap-2": "tok-rap-2-abcdefgh"}
ENV = {
    "MEMORY_TOKEN": ADMIN,
    "MEMORY_ROBOT_TOKENS": robot_tokens(TOKENS),
    "MEMORY_EMBEDDER": "hashing",
}
DEADLINE_S = 120.0


@pytest.fixture
def database_url(pg_cluster: Cluster) -> Iterator[str]:
    """A database of this test's own in the session's cluster (the servers migrate it themselves)."""
    with pg_cluster.database("e2e") as url:
        yield url


def replica(tmp_path: Path, name: str, url: str) -> ServerProcess:
    return ServerProcess(
        data_dir=tmp_path / name / "data",
        log_dir=(tmp_path / name),
        env={**ENV, "MEMORY_DATABASE_URL": url},
    )


def ids(result: dict[str, Any]) -> list[int]:
    return [m["id"] for m in result["memories"]]


async def test_a_second_replica_on_the_same_database_sees_what_the_first_one_wrote(
    tmp_path: Path, database_url: str
) -> None:
    first, second = replica(tmp_path, "a", database_url), replica(tmp_path, "b", database_url)
    for server in (first, second):
        server.log_dir.mkdir(parents=True)
    with anyio.fail_after(DEADLINE_S):
        await first.start()
        try:
            async with http_session(first, token=ADMIN) as admin:
                await admin.call("upsert_group", group_id="g-a", customer="acme")
                await admin.call("upsert_group", group_id="g-b", customer="globex")
                await admin.call("register_robot", robot_id="rap-1", group="g-a")
                await admin.call("register_robot", robot_id="rap-2", group="g-b")
            async with http_session(first, token=TOKENS["rap-1"]) as rap1:
                saved = await rap1.call(
                    "save_process", markdown=doc("open-dock-door", "Open the loading dock door", "Press the green key.")
                )
                found = await rap1.call("find_processes", query="open the dock door")
                learned = await rap1.call(
                    "learn",
                    insight="the dock door sticks below 5 C: push twice",
                    context={"params": {"pushes": 2}, "task": {"success": True}},
                    collection="dock",
                )
                recalled = await rap1.call("recall", query="dock door sticks", collection="dock")
                outcome = await rap1.call("record_outcome", id="open-dock-door", success=True, note="opened")
        finally:
            await first.stop()

        await second.start()  # the first one is gone: nothing can come from its memory
        try:
            async with http_session(second, token=TOKENS["rap-1"]) as rap1:
                got = await rap1.call("get_process", id="open-dock-door")
                found_again = await rap1.call("find_processes", query="open the dock door")
                recalled_again = await rap1.call("recall", query="dock door sticks", collection="dock")
                fleet = await rap1.call("list_robots")
            async with http_session(second, token=TOKENS["rap-2"]) as rap2:
                other_group = await rap2.call("recall", query="dock door sticks", collection="dock")
                not_theirs = await rap2.call("find_processes", query="open the dock door")
            headers, body = await raw_initialize(second)
        finally:
            await second.stop()

    assert (saved["id"], saved["action"]) == ("open-dock-door", "created"), saved
    assert [p["id"] for p in found["processes"]] == ["open-dock-door"]
    assert learned["status"] == "created"
    assert ids(recalled) == [learned["memory_id"]]
    assert (outcome["success_count"], outcome["failure_count"]) == (1, 0)

    assert got["reliability"] == round(2 / 3, 4), got
    assert "success (robot rap-1, group g-a): opened" in got["markdown"]
    assert [p["id"] for p in found_again["processes"]] == ["open-dock-door"]
    assert ids(recalled_again) == [learned["memory_id"]]
    assert recalled_again["memories"][0]["params"] == {"pushes": 2}
    assert "rap-1" in str(fleet)
    # Tenancy per request: rap-2's token names another group, on the same replica and database.
    assert ids(other_group) == []
    assert not_theirs["processes"] == []

    # Stateless Streamable HTTP: no session id handed out, the answer is one JSON body.
    assert "mcp-session-id" not in headers
    assert headers["content-type"].startswith("application/json")
    assert body["result"]["serverInfo"]["name"] == "memory"

    for server in (first, second):
        assert not (server.data_dir / "index.db").exists()  # nothing went to SQLite
        events = [line for line in json_lines(server.stderr()) if line.get("event") == "store_ready"]
        assert [e.get("backend") for e in events] == ["postgresql"]
        assert "tok-rap" not in server.stderr()
        assert database_url not in server.stderr()  # the URL (it may carry a password) never logged


async def raw_initialize(server: ServerProcess) -> tuple[httpx.Headers, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.post(
            server.url("/mcp"),
            json=initialize_request("raw-replica-check"),
            headers={"Authorization": f"Bearer {ADMIN}", "Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return response.headers, body
