"""Memory ids over the real process with two tenants' tokens: a robot's ids say nothing of how many
memories another group wrote between them, a stored id guessed reaches nothing, and the operator's
REST API and the next start show the very ids the robot was given."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from robot_mcp_memory.experiences.model import PUBLIC_FROM
from tests.e2e.harness import ServerProcess, http_session, robot_tokens, running, sse_session

pytestmark = pytest.mark.e2e

ADMIN = "admin-token-0123456789"
TOKENS = {"rap-1": "rap1-token-0123", "rap-3": "rap3-token-0123"}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    env = {"MEMORY_TOKEN": ADMIN, "MEMORY_ROBOT_TOKENS": robot_tokens(TOKENS)}
    async with running(tmp_path, env) as proc:
        yield proc


async def test_a_robots_ids_show_nothing_of_another_groups_writes(server: ServerProcess) -> None:
    async with (
        http_session(server, token=ADMIN) as admin,
        http_session(server, token=TOKENS["rap-1"]) as rap1,
        sse_session(server, token=TOKENS["rap-3"]) as rap3,
    ):
        await admin.call("upsert_group", group_id="line-1")
        await admin.call("register_robot", robot_id="rap-1", group="line-1")
        await admin.call("register_robot", robot_id="rap-3")
        mine = [(await rap1.call("learn", insight="the dock door on line 1 sticks in the cold"))["memory_id"]]
        for k in range(5):  # the other tenant's writes, in between
            await rap3.call("learn", insight=f"bay {k} of the other plant charges in {k + 20} minutes")
        mine.append((await rap1.call("learn", insight="the lift on line 1 is slow after 6 pm"))["memory_id"])
        assert all(PUBLIC_FROM <= m < 2 * PUBLIC_FROM for m in mine)  # drawn, not the write count
        assert abs(mine[1] - mine[0]) != 6
        # Guessing the store's own ids (1 … 7 were written) reaches nothing, as another group's does.
        for guess in range(1, 8):
            refused = await rap3.call("forget", memory_id=guess, reason="a guess")
            assert refused["error"] == "not_found", refused
        assert (await rap3.call("forget", memory_id=mine[0], reason="not mine"))["error"] == "not_found"
        found = await rap1.call("recall", query="dock door sticks")
        assert [m["id"] for m in found["memories"]] == [mine[0]]
        updated = await rap1.call("update", memory_id=mine[1], new_content="the lift on line 1 is slow after 7 pm")
        assert updated["status"] == "updated"

    headers = {"Authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(base_url=server.url(""), headers=headers, timeout=10) as c:
        detail = (await c.get(f"/api/memories/{mine[1]}")).json()
        assert (detail["id"], detail["content"]) == (mine[1], "the lift on line 1 is slow after 7 pm")
        listed = (await c.get("/api/memories", params={"robot": "rap-1"})).json()
        assert sorted(m["id"] for m in listed["memories"]) == sorted(mine)
        assert (await c.get("/api/memories/1")).status_code == 404

    await server.restart()
    async with http_session(server, token=TOKENS["rap-1"]) as rap1:
        gone = await rap1.call("forget", memory_id=mine[0], reason="fixed the door")
        assert (gone["status"], gone["memory_id"]) == ("forgotten", mine[0])
